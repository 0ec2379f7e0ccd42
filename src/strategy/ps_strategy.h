// The parameter server as a training strategy (see ps_strategy.cc).
#pragma once

#include <memory>

#include "frugal/parameter_server.h"
#include "frugal/strategy.h"

namespace frugal::strategy_internal {

// The configuration every rank of a parameter-server plan derives from it and the world size.
ParameterServerConfig ParameterServerConfigOf(const StrategyPlan& plan, int world_size);

// What the servers run under local:period=H: plain SGD at learning rate 1, so that the pushed
// model deltas d_i = anchor - x_i turn the key into anchor - (1/W) sum_i d_i, the workers' average.
ServerOptimizer ModelAveragingOptimizer();

// plan.arch.kind == ArchKind::kParameterServer; `workers` and `world` must outlive the result.
std::unique_ptr<Strategy> MakeParameterServerStrategy(const StrategyPlan& plan, Transport& workers,
                                                      Transport& world);

}  // namespace frugal::strategy_internal
