// The cost model of the parameter server and of gossip against the bytes training really sends
// (ranks as threads): a parameter server's pushes per worker and each server's pushes in and
// answers out, over one and two servers, keys cut across servers, bsp and the asynchronous
// models; gossip's messages for D-PSGD on static and time-varying graphs, Local SGD's rounds,
// SGP and the compressed algorithms.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/parameter_server.h"
#include "frugal/step_cost.h"
#include "frugal/strategy.h"
#include "frugal_torch/data.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"
#include "strategy/ps_strategy.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::Transport;

frugal::StepCost CostOf(const frugal::StrategyPlan& plan, int workers) {
  frugal::StepCostInput in;
  in.parameters = testing_torch::CostTensorsOf("mlp");
  in.workers = workers;
  in.plan = plan;
  auto cost = frugal::ComputeStepCost(in, frugal::DefaultCompressorRegistry());
  EXPECT_TRUE(cost.ok()) << cost.status().ToString();
  return cost.ok() ? *cost : frugal::StepCost{};
}

TrainOptions Small(int64_t steps) {
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = 8;
  options.max_steps = steps;
  options.seed = 3;
  options.lr = 0.05;
  options.momentum = 0;
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 50;
  options.overlap = OverlapOptions{};
  return options;
}

struct PsCase {
  int workers = 2;
  int servers = 1;
  std::string shard_mb = "4";
  std::string sync = "bsp";
};

TEST(StepCostArch, ParameterServerEqualsTheBytesTrainingSends) {
  torch::set_num_threads(1);
  constexpr int64_t kSteps = 4;
  const TrainOptions options = Small(kSteps);
  for (const PsCase& c : {PsCase{}, PsCase{.workers = 3, .servers = 2, .shard_mb = "0.01"},
                          PsCase{.workers = 2, .servers = 2, .shard_mb = "0.1", .sync = "asp"},
                          PsCase{.workers = 3, .sync = "ssp:staleness=1"},
                          PsCase{.workers = 3, .servers = 2, .sync = "backup:workers=1"}}) {
    const std::string arch = "ps:servers=" + std::to_string(c.servers) + ",shard-mb=" + c.shard_mb;
    SCOPED_TRACE(arch + " " + c.sync + " W=" + std::to_string(c.workers));
    frugal::StrategyOptions strategy_options;
    strategy_options.arch = arch;
    strategy_options.sync = c.sync;
    strategy_options.timeout = options.timeout;
    const frugal::StrategyPlan plan = frugal::PlanStrategy(strategy_options).value();
    const int world_size = c.workers + c.servers;
    const frugal::ParameterServerConfig config =
        frugal::strategy_internal::ParameterServerConfigOf(plan, world_size);
    std::vector<frugal::ServerReport> reports(static_cast<size_t>(c.servers));
    std::vector<TrainSummary> summaries(static_cast<size_t>(c.workers));
    testing_torch::ExpectAllOk(frugal::RunRanks(world_size, [&](Transport& world) -> Status {
      const frugal::RoleAssignment roles =
          frugal::AssignRoles(plan.arch, world.size(), world.rank());
      FRUGAL_ASSIGN_OR_RETURN(frugal::RoleGroup group,
                              frugal::JoinRoleGroup(world, roles, plan.timeout));
      if (roles.mine == frugal::Role::kServer) {
        frugal::ServerOptimizer optimizer;
        optimizer.lr =
            LearningRateOf(options, ShardSampler::StepsPerEpoch(testing_torch::Data().train.count,
                                                                roles.workers, options.batch_size));
        return frugal::RunParameterServer(world, config, optimizer,
                                          frugal::Logger(frugal::LogLevel::kOff),
                                          &reports[static_cast<size_t>(world.rank() - c.workers)]);
      }
      Transport& workers = *group.transport;
      FRUGAL_ASSIGN_OR_RETURN(
          auto reducer,
          frugal::MakeStrategyReducer(plan, workers, 0, frugal::DefaultCompressorRegistry()));
      FRUGAL_ASSIGN_OR_RETURN(auto strategy, frugal::MakeStrategy(plan, workers, *reducer, &world));
      FRUGAL_ASSIGN_OR_RETURN(summaries[static_cast<size_t>(world.rank())],
                              Train(workers, *reducer, *strategy, testing_torch::Data(), options));
      return Status::Ok();
    }));
    const frugal::StepCost cost = CostOf(plan, c.workers);
    ASSERT_EQ(cost.server_bytes_in.size(), static_cast<size_t>(c.servers));
    EXPECT_TRUE(cost.exact);
    // Every push is answered: each server's answers equal its pushes, and each key was pushed
    // as often on every server.
    uint64_t pushes = 0;  // worker steps, from the servers' counts
    for (int s = 0; s < c.servers; ++s) {
      const frugal::ServerReport& r = reports[static_cast<size_t>(s)];
      const uint64_t per_push = cost.server_bytes_in[static_cast<size_t>(s)] / c.workers;
      ASSERT_GT(per_push, 0u) << "server " << s;
      EXPECT_EQ(r.push_bytes_in % per_push, 0u) << "server " << s;
      if (s == 0) pushes = r.push_bytes_in / per_push;
      EXPECT_EQ(r.push_bytes_in, pushes * per_push) << "server " << s;
      EXPECT_EQ(r.params_bytes_out, r.push_bytes_in) << "server " << s;
      EXPECT_EQ(cost.server_bytes_out[static_cast<size_t>(s)],
                cost.server_bytes_in[static_cast<size_t>(s)]);
    }
    if (c.sync == "bsp") {
      EXPECT_EQ(pushes, static_cast<uint64_t>(kSteps * c.workers));
      for (int s = 0; s < c.servers; ++s) {
        EXPECT_EQ(reports[static_cast<size_t>(s)].push_bytes_in,
                  kSteps * cost.server_bytes_in[static_cast<size_t>(s)]);
      }
    }
    // The workers' pushes: bytes_sent_per_worker is their mean, rounded.
    const double modelled = cost.bytes_per_worker * static_cast<double>(pushes) / c.workers;
    EXPECT_NEAR(static_cast<double>(summaries[0].bytes_sent_per_worker), modelled, 0.5);
  }
}

struct GossipCase {
  std::string arch;
  std::string sync = "bsp";
  std::string compress{};
  int n = 4;
  int64_t steps = 4;
};

TEST(StepCostArch, GossipEqualsTheBytesTrainingSends) {
  torch::set_num_threads(1);
  for (const GossipCase& c :
       {GossipCase{.arch = "gossip:topology=ring"},
        GossipCase{.arch = "gossip:topology=exp", .n = 5},
        GossipCase{.arch = "gossip:topology=ring", .sync = "local:period=2", .n = 3},
        GossipCase{.arch = "gossip:topology=onepeer-exp", .n = 8, .steps = 6},
        GossipCase{.arch = "gossip:algorithm=sgp", .n = 4},
        GossipCase{.arch = "gossip:topology=ring,algorithm=choco", .compress = "qsgd", .n = 3},
        GossipCase{.arch = "gossip:topology=ring,algorithm=dcd", .compress = "qsgd:levels=4"},
        GossipCase{.arch = "gossip:topology=ring,algorithm=choco",
        .compress = "topk:ratio=0.01"}}) {
    SCOPED_TRACE(c.arch + " " + c.sync + " " + c.compress + " n=" + std::to_string(c.n));
    frugal::StrategyOptions strategy_options;
    strategy_options.arch = c.arch;
    strategy_options.sync = c.sync;
    strategy_options.compress = c.compress;
    const frugal::StrategyPlan plan = frugal::PlanStrategy(strategy_options).value();
    const testing_torch::StrategyRun run =
        testing_torch::TrainWithStrategy(c.n, strategy_options, Small(c.steps));
    const frugal::StepCost cost = CostOf(plan, c.n);
    const double modelled = cost.bytes_per_worker * static_cast<double>(c.steps);
    EXPECT_DOUBLE_EQ(cost.received_per_worker, cost.bytes_per_worker);
    if (c.compress.starts_with("topk")) {
      EXPECT_FALSE(cost.exact);
      EXPECT_LE(static_cast<double>(run.summaries[0].bytes_sent_per_worker), modelled);
      EXPECT_GT(static_cast<double>(run.summaries[0].bytes_sent_per_worker), modelled / 2);
    } else {
      EXPECT_TRUE(cost.exact);
      EXPECT_NEAR(static_cast<double>(run.summaries[0].bytes_sent_per_worker), modelled, 0.5)
          << cost.pattern;
    }
  }
}

TEST(StepCostArch, RefusesWhatItDoesNotModel) {
  frugal::StrategyOptions options;
  options.arch = "gossip:topology=ring";
  options.sync = "asp";
  const frugal::StrategyPlan plan = frugal::PlanStrategy(options).value();
  frugal::StepCostInput in;
  in.parameters.push_back({"w", 10, {10}});
  in.workers = 4;
  in.plan = plan;
  auto cost = frugal::ComputeStepCost(in, frugal::DefaultCompressorRegistry());
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().code(), frugal::StatusCode::kInvalidArgument);
  EXPECT_NE(cost.status().message().find("AD-PSGD"), std::string::npos);
}

}  // namespace
}  // namespace frugal_torch
