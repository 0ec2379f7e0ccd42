// One bucket through the reducer: see bucket_reduction.h.
#include "engine/bucket_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "engine/engine_timeline.h"
#include "frugal/collectives.h"

namespace frugal::engine_internal {

BucketReduction::BucketReduction(GradientReducer& reducer, Timeline* timeline,
                                 PhaseRecorder* phases)
    : reducer_(reducer), timeline_(timeline), phases_(phases) {}

std::span<float> BucketReduction::FusionBuffer(size_t count) {
  if (shared_.bytes.size() < count * sizeof(float) && !own_only_) {
    shared_ = reducer_.NewBucketMemory(count);
    own_only_ = shared_.owner == nullptr;
  }
  if (shared_.owner) return std::span<float>(reinterpret_cast<float*>(shared_.bytes.data()), count);
  if (own_.size() < count) own_.resize(count);
  return std::span<float>(own_.data(), count);
}

ReductionResult BucketReduction::Reduce(std::span<const BucketPart> parts, int id, uint64_t step) {
  BucketInfo info;
  info.id = id;
  info.step = step;
  size_t total = 0;
  for (const BucketPart& part : parts) {
    info.entries.push_back(BucketEntry{part.name, total, part.data.size(), part.shape,
                                       part.tensor_offset, part.tensor_count});
    total += part.data.size();
  }
  info.count = total;
  info.name = parts.size() == 1
                  ? parts[0].name
                  : fmt::format("fused({}..{})", parts.front().name, parts.back().name);
  std::span<float> data = parts[0].data;
  std::shared_ptr<void> owner;  // set when `data` is the reducer's bucket memory
  // Several parts are gathered into the fusion buffer in the reducer's layout; a partition alone
  // is reduced in place, its share of each of its tensor's blocks lying there in order already.
  if (parts.size() > 1 || parts[0].tensor_count != 0) info.fused_blocks = reducer_.FusedBlocks();
  // The layout's pieces: block by block when the reducer asks for it (so that each part's result
  // has the bits of its own reduction); in one block, the parts one after the other.
  const std::vector<FusedPart> fused_parts = FusedPartsOf(info.entries);
  const int layout_blocks = std::max(info.fused_blocks, 1);
  if (parts.size() > 1) {
    data = FusionBuffer(total);
    owner = shared_.owner;
    ForEachFusedPiece(fused_parts, layout_blocks, [&](size_t i, size_t from, size_t to, size_t n) {
      std::memcpy(data.data() + to, parts[i].data.data() + from, n * sizeof(float));
    });
  }
  if (phases_) (void)phases_->Drain();
  ReductionResult result;
  result.count = total;
  result.begin = Clock::now();
  result.status =
      owner ? reducer_.ReduceShared(info, data, std::move(owner)) : reducer_.Reduce(info, data);
  result.end = Clock::now();
  if (parts.size() > 1 && result.status.ok()) {
    ForEachFusedPiece(fused_parts, layout_blocks, [&](size_t i, size_t from, size_t to, size_t n) {
      std::memcpy(parts[i].data.data() + from, data.data() + to, n * sizeof(float));
    });
  }
  // The network may still write memory of a failed reduction: it is not used again.
  if (!result.status.ok()) shared_ = {};
  if (timeline_) {
    std::vector<DrawnUnit> drawn;
    for (const BucketPart& part : parts) drawn.push_back({part.name, part.tensor});
    DrawReduction(*timeline_, info, drawn, phases_ ? phases_->Drain() : std::vector<Phase>{},
                  result.begin, result.end);
  }
  return result;
}

}  // namespace frugal::engine_internal
