// The update a parameter server applies to one key (internal): torch's SGD step (dampening 0),
// the same formula the workers' torch optimizer applies under all-reduce, on float buffers.
#pragma once

#include <span>
#include <vector>

#include "frugal/parameter_server.h"

namespace frugal::ps_internal {

// One key's optimizer state: the momentum buffer, empty until the first update with momentum.
struct KeyOptimizerState {
  std::vector<float> momentum;
};

// x -= lr * d with d from `gradient` as ServerOptimizer's comment says; `gradient` is modified
// (it becomes d). gradient.size() == x.size().
void ApplySgd(const ServerOptimizer& optimizer, double lr, std::span<float> x,
              std::span<float> gradient, KeyOptimizerState& state);

}  // namespace frugal::ps_internal
