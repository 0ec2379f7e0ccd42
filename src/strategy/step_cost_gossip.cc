// Gossip's part of the cost model (see step_cost.h): the graph of the plan over the workers
// (MakeGossipGraph, as the strategy builds it), the message of the algorithm over the flat model
// (parameters, then the float buffers unless --sync local has buffers=0), and one round after
// every step or every H steps. A time-varying graph (onepeer-exp) has other out-degrees in other
// phases; the model takes the mean over its period, which is exact over a whole number of
// periods.
#include <fmt/format.h>

#include <algorithm>

#include "frugal/compress_wire.h"
#include "strategy/gossip_strategy.h"
#include "strategy/step_cost_internal.h"

namespace frugal::strategy_internal {
namespace {

bool CompressedAlgorithm(GossipAlgorithm a) {
  return a == GossipAlgorithm::kChoco || a == GossipAlgorithm::kDcd || a == GossipAlgorithm::kEcd;
}

}  // namespace

StatusOr<uint64_t> GossipMessageBytes(const StrategyPlan& plan,
                                      const std::vector<CostTensor>& tensors,
                                      const CompressorRegistry& registry, bool* exact) {
  uint64_t floats = 0;
  for (const CostTensor& t : tensors) floats += t.numel;
  const GossipAlgorithm algorithm =
      plan.sync.kind == SyncKind::kLocal ? GossipAlgorithm::kDpsgd : plan.arch.gossip.algorithm;
  if (algorithm == GossipAlgorithm::kDpsgd) return 4 * floats;
  if (algorithm == GossipAlgorithm::kSgp) return 4 * (floats + 1);  // the push-sum weight first
  FRUGAL_INTERNAL_ASSERT(CompressedAlgorithm(algorithm) && plan.compressed.has_value(),
                         "a compressed gossip algorithm without a compressor");
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> c, registry.Create(plan.compressed->spec));
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> dense, registry.Create("none"));
  if (!c->MaxBodyBits(TensorInfo("probe", 1000)).has_value()) {
    return InvalidArgumentError(fmt::format(
        "frugal cost: {} has a payload size that depends on the data, without a bound", c->spec()));
  }
  if (c->traits().variable_size) *exact = false;
  // compressed_message.h: u32 tensor count, u64 length per tensor, the payloads.
  uint64_t bytes = 4 + 8 * static_cast<uint64_t>(tensors.size());
  for (const CostTensor& t : tensors) {
    const TensorInfo info(t.name, t.numel);  // the flat layout has no shapes
    bytes += CompressedWireBytes(4 * t.numel >= plan.compressed->min_bytes ? *c : *dense, info);
  }
  return bytes;
}

StatusOr<StepCost> GossipStepCost(const StepCostInput& in, const CompressorRegistry& registry) {
  const StrategyPlan& plan = in.plan;
  const SyncSpec& sync = plan.sync;
  if (sync.kind == SyncKind::kAsp) {
    return InvalidArgumentError(
        "frugal cost: --sync asp over gossip (AD-PSGD) pairs ranks at random every step; it is "
        "not modelled");
  }
  if (sync.kind != SyncKind::kBsp && sync.kind != SyncKind::kLocal) {
    return InvalidArgumentError(
        fmt::format("frugal cost: --sync {} does not run over gossip", SyncSpecName(sync)));
  }
  const int n = in.workers;
  std::vector<CostTensor> flat = in.parameters;
  if (sync.kind != SyncKind::kLocal || sync.average_buffers) {
    if (in.buffers.empty() && in.buffer_floats > 0) {
      flat.push_back(CostTensor{"buffers", in.buffer_floats, {}});
    }
    flat.insert(flat.end(), in.buffers.begin(), in.buffers.end());
  }
  StepCost cost;
  FRUGAL_ASSIGN_OR_RETURN(const uint64_t message,
                          GossipMessageBytes(plan, flat, registry, &cost.exact));
  uint64_t parameter_floats = 0;
  for (const CostTensor& t : in.parameters) parameter_floats += t.numel;
  cost.dense_ring_bytes_sum = AllreduceBytesSum(AllreduceAlgorithm::kRing, n, 4 * parameter_floats);
  const uint64_t every = sync.kind == SyncKind::kLocal ? static_cast<uint64_t>(sync.period) : 1;
  if (n == 1) {
    cost.pattern = "nothing (one worker)";
    return cost;
  }
  FRUGAL_ASSIGN_OR_RETURN(GossipGraph graph, MakeGossipGraph(plan, n));
  const Topology& g = graph.topology;
  const int phases = g.period();
  uint64_t messages = 0;  // over one period of the graph, all ranks
  size_t busiest = 0;     // the largest out- or in-degree of a rank in a phase
  for (int p = 0; p < phases; ++p) {
    for (int r = 0; r < n; ++r) {
      const size_t out = g.Out(r, static_cast<uint64_t>(p)).size();
      messages += out;
      busiest = std::max({busiest, out, g.In(r, static_cast<uint64_t>(p)).size()});
    }
  }
  const double rounds = static_cast<double>(phases) * static_cast<double>(every);
  cost.average_bytes_sum = messages * message / static_cast<uint64_t>(phases);  // one round
  cost.bytes_sum = messages * message / (static_cast<uint64_t>(phases) * every);
  cost.bytes_per_worker = static_cast<double>(messages * message) / (rounds * n);
  cost.received_per_worker = cost.bytes_per_worker;  // every message sent is received
  cost.compressed_bytes_sum = plan.compressed.has_value() ? cost.bytes_sum : 0;
  cost.terms.latency_terms = 1.0 / static_cast<double>(every);
  cost.terms.bandwidth_bytes = static_cast<double>(busiest * message) / static_cast<double>(every);
  cost.seconds = cost.terms.Seconds(in.network);
  cost.pattern = fmt::format(
      "every {}: {} messages of {} B over topology {} ({} rank{} sending to {:.3g} neighbours on "
      "average{})",
      every == 1 ? std::string("step") : fmt::format("{} steps", every), messages / phases, message,
      g.name(), n, n == 1 ? "" : "s", static_cast<double>(messages) / (phases * n),
      phases > 1 ? fmt::format(", {} phases", phases) : std::string());
  return cost;
}

}  // namespace frugal::strategy_internal
