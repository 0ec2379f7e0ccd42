// MG-WFBP merge planning (internal): which consecutive gradients to reduce together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/cost_model.h"

namespace frugal::engine_internal {

struct PlanTensor {
  uint32_t id = 0;
  double bytes = 0;
  double ready = 0;  // seconds after the first gradient of the step became ready
};

struct MergeGroup {
  std::vector<uint32_t> ids;
  double bytes = 0;
  double ready = 0;  // when its last member is ready
  double start = 0;  // planned start of its reduction
  double end = 0;    // planned end
};

// Groups `tensors` (in the order backward produces them, i.e. by ascending `ready`) into
// consecutive merge groups of at most `max_bytes` (a larger tensor forms its own group), merging
// a tensor into the group before it when that saves time under the reduction cost
// alpha + beta * bytes. `cost` uses alpha and beta only.
std::vector<MergeGroup> PlanMerges(std::span<const PlanTensor> tensors, const CostParams& cost,
                                   double max_bytes);

// The planned end of the last reduction when every tensor is reduced on its own (for tests and
// reports): the same simulation without merges.
double UnmergedEnd(std::span<const PlanTensor> tensors, const CostParams& cost);

}  // namespace frugal::engine_internal
