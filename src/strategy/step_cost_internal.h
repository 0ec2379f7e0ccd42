// The parts of the architecture cost model (frugal/step_cost.h) for the parameter server and
// gossip, and what they share with the all-reduce part.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "frugal/compressor.h"
#include "frugal/step_cost.h"
#include "ps/sharding.h"

namespace frugal::strategy_internal {

// The step at which the cost model and the simulator cost a custom aggregation: past any warm-up
// (PowerSGD's start_iter dense steps), so the figures are those of the steady state.
inline constexpr uint64_t kSteadyStep = std::numeric_limits<uint64_t>::max();

// Whether the cost model and the simulator cover `c`: a payload of fixed size or with a bound
// (top-k) on the generic paths, or a custom aggregation made of all-reduces (PowerSGD's,
// Compressor::AggregateAllreduceFloats at kSteadyStep).
bool IsModelled(const Compressor& c);

// The payload of `tensor` through `c`: exact, or the bound of a variable-size compressor.
uint64_t CompressedWireBytes(const Compressor& c, const TensorInfo& tensor);

// plan.arch.kind == kParameterServer.
StatusOr<StepCost> ParameterServerStepCost(const StepCostInput& input,
                                           const CompressorRegistry& registry);

// The compressors of a parameter server's keys, null for dense floats: the pushes' (push_spec,
// --compress) and the answers' (pull_spec, --compress-pull), without error feedback (it changes
// no payload). kInvalidArgument naming the flag for a spec the parameter server refuses, and
// starting with `command` for one whose payload has no bound; *exact becomes false for a
// variable-size one (the model takes its bound).
struct KeyCompressors {
  std::unique_ptr<Compressor> push;
  std::unique_ptr<Compressor> pull;
};
StatusOr<KeyCompressors> MakeKeyCompressors(const std::string& push_spec,
                                            const std::string& pull_spec, std::string_view command,
                                            bool* exact);

// The bytes of one message of `part`: the 52-byte header and the key's floats, or c's payload of
// them (exact, or the bound).
uint64_t KeyMessageBytes(const Compressor* c, const ps_internal::KeyPart& part);

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
