// One bucket through the reducer (internal): the parts are reduced in place when there is one,
// through a fusion buffer otherwise (copied in, one after the other or block by block as the
// reducer asks, GradientReducer::FusedBlocks; reduced; copied out if the reduction succeeded; a
// partition alone is told its place in the layout and needs no copy),
// with the bucket's step, and the reduction's phases are drawn in the timeline. The fusion buffer
// is the reducer's bucket memory when it has some (GradientReducer::NewBucketMemory, reduced with
// ReduceShared: over MPI, memory the transport sends and receives without staging copies), kept
// from one bucket to the next while it is large enough and dropped after a failed reduction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frugal/engine_phases.h"
#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/timeline.h"
#include "frugal/timer.h"

namespace frugal::engine_internal {

// A tensor or partition in a bucket.
struct BucketPart {
  std::string name;    // in the bucket: the tensor's name, or "name#part/parts"
  std::string tensor;  // the tensor's name (its timeline row)
  std::span<float> data;
  std::vector<int64_t> shape;  // a whole tensor's shape; empty for a partition
  // A partition: elements [tensor_offset, tensor_offset + data.size()) of a tensor of
  // tensor_count elements (BucketEntry's fields). tensor_count 0: the whole tensor.
  size_t tensor_offset = 0;
  size_t tensor_count = 0;
};

struct ReductionResult {
  Status status;
  Clock::time_point begin;  // of the reducer call
  Clock::time_point end;
  size_t count = 0;  // floats reduced
};

class BucketReduction {
 public:
  // `timeline` and `phases` may be null; they and `reducer` must outlive this object.
  BucketReduction(GradientReducer& reducer, Timeline* timeline, PhaseRecorder* phases);

  // Reduces `parts` (not empty) as bucket number `id` of `step`. Buckets of several parts are
  // named "fused(<first>..<last>)".
  ReductionResult Reduce(std::span<const BucketPart> parts, int id, uint64_t step);

 private:
  GradientReducer& reducer_;
  Timeline* const timeline_;
  PhaseRecorder* const phases_;
  // The fusion buffer: `shared_` when the reducer gave bucket memory, `own_` otherwise.
  std::span<float> FusionBuffer(size_t count);

  SharedBytes shared_;
  bool own_only_ = false;  // the reducer has no bucket memory
  std::vector<float> own_;
};

}  // namespace frugal::engine_internal
