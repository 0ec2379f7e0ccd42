// The architecture cost model against hand-computed sums and against the bytes that training
// really sends (counted by the transport, ranks as threads): dense all-reduce algorithms over
// powers of two and not, compressors on the allgather, two-phase and all-reduce paths with and
// without error feedback, PowerSGD's all-reduces, the engine's path and the blocking one, Local
// SGD dense and with compressed deltas.
#include "frugal/step_cost.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "frugal/engine.h"
#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::AllreduceAlgorithm;
using frugal::AllreduceBytesSum;
using frugal::Status;
using frugal::Transport;

TEST(StepCost, AllreduceSumsByHand) {
  EXPECT_EQ(AllreduceBytesSum(AllreduceAlgorithm::kRing, 1, 100), 0u);
  EXPECT_EQ(AllreduceBytesSum(AllreduceAlgorithm::kRing, 4, 100), 600u);  // 2 x 3 x 100
  EXPECT_EQ(AllreduceBytesSum(AllreduceAlgorithm::kBinaryTree, 5, 100), 800u);
  // rd, n = 5: p = 4 ranks exchange twice, the extra rank and its partner once each.
  EXPECT_EQ(AllreduceBytesSum(AllreduceAlgorithm::kRecursiveDoubling, 5, 100), 1000u);
  EXPECT_EQ(AllreduceBytesSum(AllreduceAlgorithm::kRecursiveDoubling, 8, 100), 2400u);
  // Rabenseifner, n = 6: 2 (4 - 1) for the halving and doubling, 2 x 2 for pre and post steps.
  EXPECT_EQ(AllreduceBytesSum(AllreduceAlgorithm::kRabenseifner, 6, 100), 1000u);
}

struct Case {
  std::string arch = "allreduce:ring";
  std::string sync = "bsp";
  std::string compress{};
  bool ef = false;
  std::string aggregate = "auto";
  int n = 4;
  bool engine = true;
  int64_t steps = 4;
};

std::string Describe(const Case& c) {
  return c.arch + " " + c.sync + " " + (c.compress.empty() ? "dense" : c.compress) +
         (c.ef ? " ef" : "") + " " + c.aggregate + " n=" + std::to_string(c.n) +
         (c.engine ? " engine" : " blocking");
}

frugal::StepCostInput InputFor(const frugal::StrategyPlan& plan, const Case& c) {
  frugal::StepCostInput in;
  in.parameters = testing_torch::CostTensorsOf("mlp");
  in.workers = c.n;
  in.plan = plan;
  in.partition_bytes = c.engine ? frugal::kDefaultPartitionBytes : 0;
  return in;
}

TEST(StepCost, EqualsTheBytesTrainingSends) {
  torch::set_num_threads(1);
  std::vector<Case> cases;
  for (const char* arch : {"allreduce:ring", "allreduce:rd", "allreduce:rabenseifner",
                           "allreduce:tree", "allreduce:dbtree"}) {
    for (int n : {3, 4}) cases.push_back(Case{.arch = arch, .n = n});
  }
  cases.push_back(Case{.compress = "topk:ratio=0.01", .ef = true});
  cases.push_back(Case{.compress = "topk:ratio=0.1", .n = 3, .engine = false});
  cases.push_back(Case{.compress = "fp16"});
  cases.push_back(Case{.compress = "qsgd:levels=1", .n = 3});
  cases.push_back(Case{.compress = "fp16", .aggregate = "allgather"});
  cases.push_back(Case{.compress = "randomk:ratio=0.05", .n = 3});
  cases.push_back(Case{.compress = "sign", .n = 3});
  // PowerSGD past its warm-up: P and Q all-reduced per matrix, whole tensors and the engine's
  // partitions (flat, viewed as near-square matrices), over the plan's algorithm.
  cases.push_back(Case{.compress = "powersgd:start_iter=0"});
  cases.push_back(Case{.compress = "powersgd:rank=3,start_iter=0", .n = 3, .engine = false});
  cases.push_back(Case{.arch = "allreduce:rd", .compress = "powersgd:rank=2,start_iter=0", .n = 3});
  cases.push_back(Case{.sync = "local:period=2"});
  cases.push_back(Case{.arch = "allreduce:rd", .sync = "local:period=2", .n = 3});
  cases.push_back(Case{.sync = "local:period=2", .compress = "topk:ratio=0.01"});
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c));
    frugal::StrategyOptions options;
    options.arch = c.arch;
    options.sync = c.sync;
    options.compress = c.compress;
    options.error_feedback = c.ef;
    options.aggregate = c.aggregate;
    options.timeout = std::chrono::seconds(60);
    const frugal::StrategyPlan plan = frugal::PlanStrategy(options).value();
    TrainOptions train;
    train.model = "mlp";
    train.batch_size = 8;
    train.max_steps = c.steps;
    train.momentum = 0;
    train.test_samples = 50;
    train.timeout = std::chrono::seconds(60);
    if (c.engine) train.overlap = OverlapOptions{};
    std::vector<TrainSummary> summaries(c.n);
    // Every rank a host of its own, as `frugal cost` counts the messages between hosts (on one
    // host recursive doubling from 1 MiB reads its partners' buffers instead).
    frugal::InProcOptions hosts;
    hosts.ranks_per_host = 1;
    testing_torch::ExpectAllOk(frugal::RunRanks(
        c.n,
        [&](Transport& t) -> Status {
          FRUGAL_ASSIGN_OR_RETURN(
              auto reducer,
              frugal::MakeStrategyReducer(plan, t, 0, frugal::DefaultCompressorRegistry()));
          FRUGAL_ASSIGN_OR_RETURN(auto strategy, frugal::MakeStrategy(plan, t, *reducer));
          FRUGAL_ASSIGN_OR_RETURN(summaries[t.rank()],
                                  Train(t, *reducer, *strategy, testing_torch::Data(), train));
          return Status::Ok();
        },
        hosts));
    auto cost = frugal::ComputeStepCost(InputFor(plan, c), frugal::DefaultCompressorRegistry());
    ASSERT_TRUE(cost.ok()) << cost.status().ToString();
    EXPECT_GT(cost->bytes_sum, 0u);
    const uint64_t modelled = static_cast<uint64_t>(std::llround(cost->bytes_per_worker * c.steps));
    if (c.compress.starts_with("topk")) {
      // Top-k's index code depends on the data: the model is the bound of the fixed-width code.
      EXPECT_FALSE(cost->exact);
      EXPECT_LE(summaries[0].bytes_sent_per_worker, modelled) << cost->pattern;
      EXPECT_GT(summaries[0].bytes_sent_per_worker, modelled / 2) << cost->pattern;
    } else {
      EXPECT_TRUE(cost->exact);
      EXPECT_EQ(summaries[0].bytes_sent_per_worker, modelled) << cost->pattern;
    }
  }
}

// PowerSGD's first start_iter steps are dense: the model gives the steady state, which a run that
// includes them does not send (the model of --compress none per step during the warm-up).
TEST(StepCost, PowerSgdIsCostedPastItsDenseWarmUp) {
  frugal::StrategyOptions options;
  options.compress = "powersgd:start_iter=1000";
  const frugal::StrategyPlan warm = frugal::PlanStrategy(options).value();
  options.compress = "powersgd";
  const frugal::StrategyPlan steady = frugal::PlanStrategy(options).value();
  options.compress = "none";
  const frugal::StrategyPlan none = frugal::PlanStrategy(options).value();
  const auto& registry = frugal::DefaultCompressorRegistry();
  auto warm_cost = frugal::ComputeStepCost(InputFor(warm, Case{}), registry);
  auto steady_cost = frugal::ComputeStepCost(InputFor(steady, Case{}), registry);
  auto none_cost = frugal::ComputeStepCost(InputFor(none, Case{}), registry);
  ASSERT_TRUE(warm_cost.ok() && steady_cost.ok() && none_cost.ok());
  EXPECT_EQ(warm_cost->bytes_sum, steady_cost->bytes_sum);
  EXPECT_LT(steady_cost->bytes_sum * 10, none_cost->bytes_sum);
  EXPECT_NE(steady_cost->pattern.find("past its warm-up"), std::string::npos);
}

TEST(StepCost, RefusesWhatItDoesNotModel) {
  frugal::StrategyOptions options;
  options.compress = "gtopk:ratio=0.01";
  const frugal::StrategyPlan plan = frugal::PlanStrategy(options).value();
  auto cost = frugal::ComputeStepCost(InputFor(plan, Case{}), frugal::DefaultCompressorRegistry());
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().code(), frugal::StatusCode::kInvalidArgument);
  EXPECT_NE(cost.status().message().find("moves its own data"), std::string::npos);
}

}  // namespace
}  // namespace frugal_torch
