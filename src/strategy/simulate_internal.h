// The parts of the step simulator (frugal/simulate.h) for the parameter server and gossip, and
// what they share with the all-reduce part.
#pragma once

#include <vector>

#include "frugal/simulate.h"

namespace frugal::strategy_internal {

// The results from the end time of every simulated step and the channel's busy time over all of
// them (steady state: steps 2..S).
SimResult SummarizeSteps(const SimOptions& options, const std::vector<double>& step_end,
                         double busy);

// options.arch.kind == kParameterServer.
StatusOr<SimResult> SimulateParameterServer(const SimOptions& options);

// options.arch.kind == kGossip.
StatusOr<SimResult> SimulateGossip(const SimOptions& options, const CompressorRegistry& registry);

}  // namespace frugal::strategy_internal
