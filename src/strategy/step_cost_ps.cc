// The parameter server's part of the cost model (see step_cost.h): the keys of the servers'
// sharding (PlanShards over the trainable parameters, the plan's servers and part size, as every
// rank of a job computes it), each pushed by every worker and answered to every worker once per
// step, in messages of a 52-byte header and the key's floats.
#include <fmt/format.h>

#include <algorithm>

#include "ps/messages.h"
#include "ps/sharding.h"
#include "strategy/ps_strategy.h"
#include "strategy/step_cost_internal.h"

namespace frugal::strategy_internal {

StatusOr<StepCost> ParameterServerStepCost(const StepCostInput& in) {
  const SyncSpec& sync = in.plan.sync;
  if (sync.kind == SyncKind::kLocal || sync.kind == SyncKind::kFedAvg) {
    return InvalidArgumentError(fmt::format(
        "frugal cost: --sync {} is not modelled over a parameter server (bsp, ssp, asp, backup "
        "and lag are)",
        SyncSpecName(sync)));
  }
  if (in.plan.compressed.has_value()) {
    return InvalidArgumentError("frugal cost: --compress does not run over a parameter server");
  }
  const int w = in.workers;
  const int servers = in.plan.arch.servers;
  if (servers < 1) return InvalidArgumentError("frugal cost: ps needs servers >= 1");
  // The configuration the ranks of a job of w workers derive (part size as the strategy's).
  const ParameterServerConfig config = ParameterServerConfigOf(in.plan, w + servers);
  std::vector<TensorSpec> tensors;
  for (const CostTensor& t : in.parameters) tensors.push_back(TensorSpec{t.name, t.numel});
  const ps_internal::ShardPlan plan = ps_internal::PlanShards(tensors, servers, config.part_bytes);

  StepCost cost;
  cost.exact = sync.kind != SyncKind::kLag;
  cost.server_bytes_in.assign(static_cast<size_t>(servers), 0);
  cost.server_bytes_out.assign(static_cast<size_t>(servers), 0);
  std::vector<uint64_t> largest(static_cast<size_t>(servers), 0);
  uint64_t message_sum = 0;  // one worker's pushes of a step
  for (const ps_internal::KeyPart& part : plan.parts) {
    const uint64_t message = ps_internal::kHeaderBytes + 4 * part.count;
    message_sum += message;
    const size_t s = static_cast<size_t>(part.server);
    cost.server_bytes_in[s] += static_cast<uint64_t>(w) * message;
    cost.server_bytes_out[s] += static_cast<uint64_t>(w) * message;
    largest[s] = std::max(largest[s], message);
  }
  uint64_t parameter_floats = 0;
  for (const CostTensor& t : in.parameters) parameter_floats += t.numel;
  cost.bytes_sum = static_cast<uint64_t>(w) * message_sum;
  cost.bytes_per_worker = static_cast<double>(message_sum);
  cost.received_per_worker = static_cast<double>(message_sum);
  cost.dense_ring_bytes_sum = AllreduceBytesSum(AllreduceAlgorithm::kRing, w, 4 * parameter_floats);
  const auto busiest = std::max_element(cost.server_bytes_in.begin(), cost.server_bytes_in.end());
  const size_t b = static_cast<size_t>(busiest - cost.server_bytes_in.begin());
  cost.terms.latency_terms = 2;
  cost.terms.bandwidth_bytes =
      static_cast<double>(std::max(message_sum, *busiest) + static_cast<uint64_t>(w) * largest[b]);
  cost.seconds = cost.terms.Seconds(in.network);
  cost.pattern = fmt::format(
      "every {}: {} keys on {} server{}, each pushed by every worker and answered with its "
      "parameters ({} floats, {} B of headers)",
      sync.kind == SyncKind::kBsp || sync.kind == SyncKind::kLag ? "step" : "push of a worker",
      plan.parts.size(), servers, servers == 1 ? "" : "s", parameter_floats,
      ps_internal::kHeaderBytes * plan.parts.size());
  if (sync.kind == SyncKind::kLag) {
    cost.pattern += "; a skipped push is its header alone (the bytes are the bound of no skip)";
  }
  return cost;
}

}  // namespace frugal::strategy_internal
