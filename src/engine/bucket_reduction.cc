// One bucket through the reducer: see bucket_reduction.h.
#include "engine/bucket_reduction.h"

#include <fmt/format.h>

#include <cstring>

#include "engine/engine_timeline.h"

namespace frugal::engine_internal {

BucketReduction::BucketReduction(GradientReducer& reducer, Timeline* timeline,
                                 PhaseRecorder* phases)
    : reducer_(reducer), timeline_(timeline), phases_(phases) {}

ReductionResult BucketReduction::Reduce(std::span<const BucketPart> parts, int id, uint64_t step) {
  BucketInfo info;
  info.id = id;
  info.step = step;
  size_t total = 0;
  for (const BucketPart& part : parts) {
    info.entries.push_back(BucketEntry{part.name, total, part.data.size(), part.shape});
    total += part.data.size();
  }
  info.count = total;
  info.name = parts.size() == 1
                  ? parts[0].name
                  : fmt::format("fused({}..{})", parts.front().name, parts.back().name);
  std::span<float> data = parts[0].data;
  if (parts.size() > 1) {
    fusion_buffer_.resize(total);
    for (size_t i = 0; i < parts.size(); ++i) {
      std::memcpy(fusion_buffer_.data() + info.entries[i].offset, parts[i].data.data(),
                  parts[i].data.size_bytes());
    }
    data = std::span<float>(fusion_buffer_.data(), total);
  }
  if (phases_) (void)phases_->Drain();
  ReductionResult result;
  result.count = total;
  result.begin = Clock::now();
  result.status = reducer_.Reduce(info, data);
  result.end = Clock::now();
  if (parts.size() > 1 && result.status.ok()) {
    for (size_t i = 0; i < parts.size(); ++i) {
      std::memcpy(parts[i].data.data(), fusion_buffer_.data() + info.entries[i].offset,
                  parts[i].data.size_bytes());
    }
  }
  if (timeline_) {
    std::vector<DrawnUnit> drawn;
    for (const BucketPart& part : parts) drawn.push_back({part.name, part.tensor});
    DrawReduction(*timeline_, info, drawn, phases_ ? phases_->Drain() : std::vector<Phase>{},
                  result.begin, result.end);
  }
  return result;
}

}  // namespace frugal::engine_internal
