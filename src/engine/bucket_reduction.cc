// One bucket through the reducer: see bucket_reduction.h.
#include "engine/bucket_reduction.h"

#include <fmt/format.h>

#include <cstring>
#include <functional>

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
  // Where piece `count` at `from` of part i lies in the fusion buffer: block by block when the
  // reducer asks for it (so that each part's result has the bits of its own reduction), else
  // the parts one after the other.
  const std::vector<FusedPart> fused_parts = FusedPartsOf(info.entries);
  auto for_each_piece = [&](const std::function<void(size_t, size_t, size_t, size_t)>& fn) {
    if (info.fused_blocks > 1) {
      ForEachFusedPiece(fused_parts, info.fused_blocks, fn);
    } else {
      for (size_t i = 0; i < parts.size(); ++i) {
        fn(i, 0, info.entries[i].offset, parts[i].data.size());
      }
    }
  };
  // Several parts are gathered into the fusion buffer in the reducer's layout; a partition alone
  // is reduced in place, its share of each of its tensor's blocks lying there in order already.
  if (parts.size() > 1 || parts[0].tensor_count != 0) info.fused_blocks = reducer_.FusedBlocks();
  if (parts.size() > 1) {
    data = FusionBuffer(total);
    owner = shared_.owner;
    for_each_piece([&](size_t i, size_t from, size_t to, size_t count) {
      std::memcpy(data.data() + to, parts[i].data.data() + from, count * sizeof(float));
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
    for_each_piece([&](size_t i, size_t from, size_t to, size_t count) {
      std::memcpy(parts[i].data.data() + from, data.data() + to, count * sizeof(float));
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
