// The parts of the architecture cost model (frugal/step_cost.h) for the parameter server and
// gossip, and what they share with the all-reduce part.
#pragma once

#include <cstdint>
#include <string>

#include "frugal/compressor.h"
#include "frugal/step_cost.h"

namespace frugal::strategy_internal {

// The payload of `tensor` through `c`: exact, or the bound of a variable-size compressor.
uint64_t CompressedWireBytes(const Compressor& c, const TensorInfo& tensor);

// plan.arch.kind == kParameterServer.
StatusOr<StepCost> ParameterServerStepCost(const StepCostInput& input,
                                           const CompressorRegistry& registry);

// FedAvg's client traffic of a round (cost.client_bytes_up and down, cost.exact false for a
// bound) and its description.
StatusOr<std::string> FedAvgClientTraffic(const StepCostInput& input,
                                          const CompressorRegistry& registry, StepCost& cost);

// plan.arch.kind == kGossip.
StatusOr<StepCost> GossipStepCost(const StepCostInput& input, const CompressorRegistry& registry);

// The bytes of one gossip message of the plan's algorithm over `tensors` (the flat model), or
// kInvalidArgument for what is not modelled.
StatusOr<uint64_t> GossipMessageBytes(const StrategyPlan& plan,
                                      const std::vector<CostTensor>& tensors,
                                      const CompressorRegistry& registry, bool* exact);

}  // namespace frugal::strategy_internal
