// Gossip in the step simulator (see simulate.h).
//
// One worker stands for all (every rank of a regular graph has the same degree; otherwise the
// largest degree of the phase). Per step: the compute of the layers (forward, backward and the
// optimizer's step), and the round of the step if it has one, of
//   round = alpha + d M / B + encode + decodes x decode
// with M the algorithm's message (GossipMessageBytes over the layers' gradients), d the phase's
// largest out- or in-degree, decodes the messages the algorithm decodes (GossipModelPasses) and B
// the NIC (the host's rate when every rank is on one host), or
// the measured rate of a round's flows through the NIC (round_bytes_per_s) when it is given.
//   D-PSGD cta:  the round starts with the step (max(channel free, step start)); the step ends
//                when the compute and the round are both done;
//   SGP overlap: the round starts after the step's compute and must end before the next step's
//                compute ends;
//   the others:  the round runs after the compute; the next step starts when it ends.
// On the training thread, the model's passes through memory (GossipModelPasses) at the measured
// copy rate: D-PSGD cta's first exchange before the compute (the round starts after it) and its
// second after both the compute and the round; the others' after the compute, before the round.

#include <algorithm>

#include "frugal/gossip_graph.h"
#include "strategy/simulate_internal.h"
#include "strategy/step_cost_internal.h"

namespace frugal::strategy_internal {

ModelPasses GossipModelPasses(GossipAlgorithm algorithm, bool cta, int d, bool sparse_decode) {
  const double dd = d;
  // The weighted decodes of a row: d + 1, each a pass and a half unless sparse.
  const double weighted = sparse_decode ? 0 : 1.5 * (dd + 1);
  switch (algorithm) {
    case GossipAlgorithm::kChoco:
      return ModelPasses{0, 2 + 1.5 + 2 + weighted, d + 2};
    case GossipAlgorithm::kDcd:
      return ModelPasses{0, 2 + 2 + 1 + weighted, d + 2};
    case GossipAlgorithm::kEcd:
      return ModelPasses{0, 2 + 2.5 + 1 + 2 + weighted, d + 1};
    default:
      break;
  }
  if (cta) return ModelPasses{3 + dd, 3 + dd, 0};
  return ModelPasses{0, 2 + 1 + dd + (dd + 1), 0};
}

StatusOr<SimResult> SimulateGossip(const SimOptions& o, const CompressorRegistry& registry) {
  const SyncSpec& sync = o.sync;  // bsp or local (Simulate refuses the others)
  StrategyPlan plan;
  plan.arch = o.arch;
  plan.sync = sync;
  plan.compressed = o.compressed;
  std::vector<CostTensor> tensors;
  const double compute = o.straggler_factor * StepComputeSeconds(o);
  for (const SimLayer& l : o.layers) {
    if (l.floats > 0) tensors.push_back(CostTensor{l.name, l.floats, {}});
  }
  const bool local = sync.kind == SyncKind::kLocal;
  const GossipAlgorithm algorithm = local ? GossipAlgorithm::kDpsgd : o.arch.gossip.algorithm;
  if (!local && (algorithm == GossipAlgorithm::kChoco || algorithm == GossipAlgorithm::kDcd ||
                 algorithm == GossipAlgorithm::kEcd) != o.compressed.has_value()) {
    return InvalidArgumentError(
        "frugal simulate: choco, dcd and ecd need --compress, dpsgd and sgp send models dense");
  }
  bool sparse_decode = false;
  if (!local && o.compressed) {
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> c, registry.Create(o.compressed->spec));
    sparse_decode = c->traits().sparse_decode;
  }
  bool exact = true;
  FRUGAL_ASSIGN_OR_RETURN(const uint64_t message,
                          GossipMessageBytes(plan, tensors, registry, &exact));
  const int n = o.workers;
  const bool cta = !local && algorithm == GossipAlgorithm::kDpsgd && !o.arch.gossip.atc;
  std::vector<double> rounds;  // the round time of each phase
  std::vector<double> before;  // the training thread's copies before the compute, each phase
  std::vector<double> after;   // and after it
  if (n > 1) {
    FRUGAL_ASSIGN_OR_RETURN(Topology g, Topology::Make(o.arch.gossip.topology, n, o.seed));
    const int l = std::max(1, o.network.ranks_per_host);
    const double b = n <= l                            ? o.network.host_bytes_per_s
                     : o.network.round_bytes_per_s > 0 ? o.network.round_bytes_per_s
                                                       : o.network.nic_bytes_per_s;
    double model_bytes = 0;
    for (const CostTensor& t : tensors) model_bytes += 4.0 * static_cast<double>(t.numel);
    const double encode =
        o.compressed && o.encode_bytes_per_s > 0 ? model_bytes / o.encode_bytes_per_s : 0;
    const double decode =
        o.compressed && o.decode_bytes_per_s > 0 ? model_bytes / o.decode_bytes_per_s : 0;
    for (int p = 0; p < g.period(); ++p) {
      size_t d = 0;
      for (int r = 0; r < n; ++r) {
        d = std::max({d, g.Out(r, static_cast<uint64_t>(p)).size(),
                      g.In(r, static_cast<uint64_t>(p)).size()});
      }
      const double dd = static_cast<double>(d);
      const ModelPasses passes =
          GossipModelPasses(algorithm, cta, static_cast<int>(d), sparse_decode);
      rounds.push_back(o.network.alpha_s + dd * static_cast<double>(message) / b + encode +
                       passes.decodes * decode);
      const double pass = o.copy_bytes_per_s > 0 ? model_bytes / o.copy_bytes_per_s : 0;
      before.push_back(passes.before * pass);
      after.push_back(passes.after * pass);
    }
  }
  const bool overlapped = !local && algorithm == GossipAlgorithm::kSgp && o.arch.gossip.overlap;
  const int64_t every = local ? sync.period : 1;
  // Whole periods of the rounds and of the graph's phases after the first step.
  const int64_t cycle = every * static_cast<int64_t>(std::max<size_t>(1, rounds.size()));
  SimOptions run = o;
  run.steps = static_cast<int>(1 + cycle * std::max<int64_t>(1, (o.steps - 1 + cycle - 1) / cycle));
  std::vector<double> step_end(static_cast<size_t>(run.steps), 0);
  double now = 0;
  double channel_free = 0;
  double in_flight_until = 0;  // SGP overlap: the previous round
  double busy = 0;
  uint64_t round = 0;
  for (int s = 0; s < run.steps; ++s) {
    const bool gossips = !rounds.empty() && (s + 1) % every == 0;
    const size_t phase = gossips ? round % rounds.size() : 0;
    const double seconds = gossips ? rounds[phase] : 0;
    const double start = now;
    double end = start + compute;
    if (gossips) {
      ++round;
      busy += seconds;
      if (cta) {
        const double sent = start + before[phase];
        channel_free = std::max(channel_free, sent) + seconds;
        end = std::max(ComputeEnd(sent, compute, channel_free, o.contention), channel_free) +
              after[phase];
      } else if (overlapped) {
        end = std::max(ComputeEnd(start, compute, in_flight_until, o.contention) + after[phase],
                       in_flight_until);
        in_flight_until = end + seconds;
      } else {
        end += after[phase] + seconds;
      }
    }
    now = end;
    step_end[static_cast<size_t>(s)] = end;
  }
  return SummarizeSteps(run, step_end, busy / run.steps);
}

}  // namespace frugal::strategy_internal
