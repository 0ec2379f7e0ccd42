// The scheduling policies of the engine (internal): how the queue of agreed tensors becomes
// buckets. Pure functions of the queue and the options, without threads, transport or buffers,
// so that every rank, given the same agreed tensors in the same order, forms the same buckets.
//
// An agreed tensor becomes one Unit, or under kPriority one Unit per partition of at most
// partition_bytes. The queue holds units in agreement order (kFifo) or ordered by
// (priority, agreement, partition) (kPriority). TakeBuckets removes what can be reduced now:
//   kFifo, kOff     one bucket per unit, in queue order;
//   kFifo, kCycle   the first unit and the later units of its step packed up to
//                   fusion_threshold_bytes (Horovod's fusion), repeatedly;
//   kFifo, kMgWfbp  units of tensors in a group of the merge plan are held until every member is
//                   queued and then form one bucket (one per step if the members' steps differ);
//                   other units alone;
//   kPriority       the front of the queue packed up to partition_bytes while the step is the
//                   front's, ONE bucket, so that the engine negotiates again before the next and
//                   a tensor agreed meanwhile with a lower priority value overtakes the partitions
//                   still queued (P3 / ByteScheduler preemption).
// A bucket never mixes steps: compressors draw their random streams from the bucket's step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frugal/engine.h"

namespace frugal::engine_internal {

struct ScheduleOptions {
  FusionPolicy fusion = FusionPolicy::kOff;
  SchedulePolicy schedule = SchedulePolicy::kFifo;
  size_t fusion_threshold_bytes = kDefaultFusionThresholdBytes;
  size_t partition_bytes = kDefaultPartitionBytes;
};
ScheduleOptions ScheduleOptionsOf(const EngineOptions& options);

// A tensor every rank agreed to reduce.
struct AgreedTensor {
  uint32_t id = 0;     // its negotiation cache id
  uint64_t order = 0;  // agreement order: unique, the same on every rank
  size_t count = 0;    // float elements
  int priority = 0;
  uint64_t step = 0;
};

// A tensor or one partition of it.
struct Unit {
  uint32_t id = 0;
  uint64_t order = 0;
  uint64_t step = 0;
  int priority = 0;
  size_t offset = 0;  // first element within the tensor
  size_t count = 0;
  int part = 0;
  int parts = 1;
  bool held = false;  // waiting for the rest of its MG-WFBP group

  size_t bytes() const { return count * sizeof(float); }
};

// MG-WFBP's merge plan: groups of tensor ids reduced as one bucket. Groups of one are dropped
// (a tensor alone is reduced alone anyway).
class MergePlan {
 public:
  MergePlan() = default;
  explicit MergePlan(const std::vector<std::vector<uint32_t>>& groups);
  bool empty() const { return groups_.empty(); }
  bool Contains(uint32_t id) const { return group_of_.count(id) > 0; }
  const std::vector<std::vector<uint32_t>>& groups() const { return groups_; }

 private:
  std::vector<std::vector<uint32_t>> groups_;
  std::map<uint32_t, size_t> group_of_;
};

// The units of `tensor`: one, or under kPriority with partition_bytes > 0 as many as it takes
// partitions of at most partition_bytes (of near-equal size). Held if `plan` contains it.
std::vector<Unit> SplitIntoUnits(const AgreedTensor& tensor, const ScheduleOptions& options,
                                 const MergePlan& plan);

// Adds `units` to `queue` at the place the policy gives them.
void Enqueue(std::vector<Unit>& queue, std::span<const Unit> units, const ScheduleOptions& options);

bool HasHeld(std::span<const Unit> queue);
// True when TakeBuckets would return a bucket.
bool HasExecutable(std::span<const Unit> queue, const MergePlan& plan);
// Lets every held unit go alone (a member of its group will not come).
void ReleaseHeld(std::vector<Unit>& queue);

// Removes from `queue` and returns the buckets to reduce now, in order (see above).
std::vector<std::vector<Unit>> TakeBuckets(std::vector<Unit>& queue, const MergePlan& plan,
                                           const ScheduleOptions& options);

// The name of a unit in buckets and timelines: the tensor's name, "name#part/parts" for a
// partition.
std::string UnitName(const std::string& tensor, const Unit& unit);

}  // namespace frugal::engine_internal
