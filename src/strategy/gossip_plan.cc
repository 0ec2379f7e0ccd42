// The rules of --arch gossip:... (part of PlanStrategy, strategy_plan.cc).
//
//  - --sync bsp runs the algorithm after every step; --sync local:period=H mixes with the
//    neighbours every H steps (D-PSGD's mixing, so algorithm=dpsgd; no start-epoch, whose BSP
//    phase needs a global all-reduce, no intra-period, no momenta=1); --sync asp runs AD-PSGD
//    (algorithm=dpsgd, the default, no mixing=: the averages are pairwise); fedavg does not apply;
//  - --od-sgd and --skip-comm belong to all-reduce BSP;
//  - --compress is the compressor of choco, dcd and ecd, and those need one; dpsgd and sgp send
//    models dense. Each rank's message is decoded apart: no --aggregate, no compressor that only
//    aggregates across ranks (powersgd, gtopk, terngrad; sign, signum), no dgc (gradients),
//    no --ef and no --worker-momentum (CHOCO's copies already carry what compression dropped).
//    dcd and ecd need an unbiased compressor (Tang et al.'s condition);
//  - with a known number of workers, the graph: the topology must exist for that many ranks and
//    be connected; dpsgd, choco, dcd, ecd and local need a doubly stochastic W; choco, dcd and ecd
//    a static graph (their copies follow fixed neighbours); sgp a column-stochastic W; asp an
//    undirected bipartite graph (actives average with passives).
#include <fmt/format.h>

#include "frugal/compressor.h"
#include "strategy/gossip_strategy.h"

namespace frugal::strategy_internal {
namespace {

bool Compressed(GossipAlgorithm a) {
  return a == GossipAlgorithm::kChoco || a == GossipAlgorithm::kDcd || a == GossipAlgorithm::kEcd;
}

Status CheckGossipCompression(const StrategyOptions& options, StrategyPlan& plan) {
  const GossipSpec& gossip = plan.arch.gossip;
  const std::string_view algorithm = GossipAlgorithmName(gossip.algorithm);
  if (options.error_feedback || options.worker_momentum || options.aggregate != "auto") {
    return InvalidArgumentError(
        "--ef, --worker-momentum and --aggregate do not apply to --arch gossip (each rank's "
        "message is decoded on its own; CHOCO's copies carry what compression dropped)");
  }
  const bool asynchronous_or_local = plan.sync.kind != SyncKind::kBsp;
  if (options.compress.empty()) {
    if (Compressed(gossip.algorithm) && !asynchronous_or_local) {
      return InvalidArgumentError(fmt::format(
          "--arch gossip:...,algorithm={} needs --compress SPEC (e.g. topk:ratio=0.01 or qsgd)",
          algorithm));
    }
    if (options.compress_min_bytes != 65536) {
      return InvalidArgumentError("--compress-min-bytes needs --compress");
    }
    return Status::Ok();
  }
  if (!Compressed(gossip.algorithm) || asynchronous_or_local) {
    return InvalidArgumentError(fmt::format(
        "--compress applies to --arch gossip with algorithm=choco, dcd or ecd; {} sends models "
        "dense",
        asynchronous_or_local ? "--sync " + SyncSpecName(plan.sync)
                              : "algorithm=" + std::string(algorithm)));
  }
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> compressor,
                          DefaultCompressorRegistry().Create(options.compress));
  const CompressorTraits traits = compressor->traits();
  if (compressor->name() == "dgc") {
    return InvalidArgumentError(
        "--compress dgc works on gradients; gossip sends models (use e.g. "
        "topk or qsgd)");
  }
  if (traits.custom_aggregate || traits.sign_vote) {
    return InvalidArgumentError(fmt::format(
        "--compress {} aggregates across ranks; gossip decodes each neighbour's message on its "
        "own (use e.g. topk, randomk, qsgd, fp16)",
        compressor->name()));
  }
  if (gossip.algorithm != GossipAlgorithm::kChoco && !traits.unbiased) {
    return InvalidArgumentError(fmt::format(
        "algorithm={} needs an unbiased compressor (Tang et al.); {} is biased (use e.g. qsgd, "
        "natural or randomk with rescaling, or algorithm=choco)",
        algorithm, compressor->name()));
  }
  CompressedReducerOptions compressed;
  compressed.spec = options.compress;
  compressed.min_bytes = options.compress_min_bytes;
  compressed.seed = options.seed;
  compressed.timeout = options.timeout;
  plan.compressed = std::move(compressed);
  return Status::Ok();
}

}  // namespace

Status CheckGossipPlan(const StrategyOptions& options, StrategyPlan& plan) {
  const GossipSpec& gossip = plan.arch.gossip;
  const std::string sync = SyncSpecName(plan.sync);
  if (options.od_sgd || options.skip_comm) {
    return InvalidArgumentError(fmt::format("--{} applies to --arch allreduce, not gossip",
                                            options.od_sgd ? "od-sgd" : "skip-comm"));
  }
  switch (plan.sync.kind) {
    case SyncKind::kBsp:
      break;
    case SyncKind::kLocal:
      if (gossip.algorithm != GossipAlgorithm::kDpsgd) {
        return InvalidArgumentError(
            fmt::format("--sync {} with --arch gossip mixes with D-PSGD's step every H steps; "
                        "algorithm={} does not apply",
                        sync, GossipAlgorithmName(gossip.algorithm)));
      }
      if (plan.sync.start_epoch > 0 || plan.sync.intra_period > 0 || plan.sync.average_momenta ||
          plan.sync.overlap) {
        return InvalidArgumentError(fmt::format(
            "--sync {}: start-epoch, intra-period, momenta=1 and overlap=1 need a global "
            "all-reduce, which --arch gossip does not have",
            sync));
      }
      break;
    case SyncKind::kAsp:
      if (gossip.algorithm != GossipAlgorithm::kDpsgd || gossip.mixing || gossip.atc) {
        return InvalidArgumentError(
            "--sync asp with --arch gossip runs AD-PSGD (pairwise averages): give only "
            "topology=T (no algorithm=, mixing= or order=)");
      }
      break;
    case SyncKind::kFedAvg:
      return InvalidArgumentError(
          fmt::format("--sync {} runs with --arch allreduce, not gossip", sync));
    case SyncKind::kSsp:
    case SyncKind::kBackup:
    case SyncKind::kLag:
      return InvalidArgumentError(fmt::format(
          "--sync {} runs over a parameter server (--arch ps:servers=S), not gossip", sync));
  }
  FRUGAL_RETURN_IF_ERROR(CheckGossipCompression(options, plan));
  if (options.workers > 0) FRUGAL_RETURN_IF_ERROR(MakeGossipGraph(plan, options.workers).status());
  return Status::Ok();
}

StatusOr<GossipGraph> MakeGossipGraph(const StrategyPlan& plan, int workers) {
  const GossipSpec& gossip = plan.arch.gossip;
  FRUGAL_ASSIGN_OR_RETURN(Topology topology, Topology::Make(gossip.topology, workers, plan.seed));
  const MixingKind kind = MixingOf(gossip, topology);
  FRUGAL_ASSIGN_OR_RETURN(MixingMatrix mixing, MixingMatrix::Make(topology, kind));
  const std::string graph = fmt::format("topology {} over {} ranks", topology.name(), workers);
  const std::string who = plan.sync.kind == SyncKind::kBsp
                              ? fmt::format("algorithm={}", GossipAlgorithmName(gossip.algorithm))
                              : fmt::format("--sync {}", SyncSpecName(plan.sync));
  if (plan.sync.kind == SyncKind::kAsp) {
    if (!topology.Bipartite(nullptr)) {
      return InvalidArgumentError(fmt::format(
          "--sync asp (AD-PSGD) needs an undirected bipartite graph (actives average with "
          "passives); {} is not (use e.g. ring with an even number of ranks, or torus)",
          graph));
    }
    return GossipGraph{std::move(topology), std::move(mixing)};
  }
  if (gossip.algorithm == GossipAlgorithm::kSgp) {
    if (!mixing.ColumnStochastic()) {
      return InvalidArgumentError(
          fmt::format("{}: mixing={} is not column stochastic, which push-sum needs", graph,
                      MixingKindName(kind)));
    }
    return GossipGraph{std::move(topology), std::move(mixing)};
  }
  if (!mixing.DoublyStochastic()) {
    return InvalidArgumentError(fmt::format(
        "{}: mixing={} is not doubly stochastic (the degrees differ), which {} needs (use "
        "mixing=metropolis)",
        graph, MixingKindName(kind), who));
  }
  if (Compressed(gossip.algorithm) && topology.period() > 1) {
    return InvalidArgumentError(fmt::format(
        "{} changes every step; {} keeps copies of fixed neighbours (use a static topology)", graph,
        who));
  }
  return GossipGraph{std::move(topology), std::move(mixing)};
}

}  // namespace frugal::strategy_internal
