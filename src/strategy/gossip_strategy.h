// Decentralized training on the strategy seam: the rules of --arch gossip (gossip_plan.cc) and the
// strategy that drives a gossip algorithm of src/gossip (gossip_strategy.cc).
#pragma once

#include <memory>

#include "frugal/gossip.h"
#include "frugal/strategy.h"

namespace frugal::strategy_internal {

// The rules of --arch gossip:... for PlanStrategy (plan.arch.kind == kGossip, plan.sync parsed):
// the synchronizations, the compression and, when options.workers > 0, the graph.
Status CheckGossipPlan(const StrategyOptions& options, StrategyPlan& plan);

// The graph and mixing matrix of the plan over `workers` ranks, checked for what the algorithm
// needs (kInvalidArgument with one line otherwise).
struct GossipGraph {
  Topology topology;
  MixingMatrix mixing;
};
StatusOr<GossipGraph> MakeGossipGraph(const StrategyPlan& plan, int workers);

// The gossip strategy of the plan over `workers` (which must outlive it).
StatusOr<std::unique_ptr<Strategy>> MakeGossipStrategy(const StrategyPlan& plan,
                                                       Transport& workers);

}  // namespace frugal::strategy_internal
