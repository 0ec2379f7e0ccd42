// The cost model of the parameter server and of gossip against the bytes training really sends
// (ranks as threads): a parameter server's pushes per worker and each server's pushes in and
// answers out, over one and two servers, keys cut across servers, bsp, the asynchronous models,
// Local SGD's model deltas, compressed pushes and answers, FedAvg's rounds with idle workers;
// gossip's messages for D-PSGD on static and time-varying graphs, Local SGD's rounds,
// SGP and the compressed algorithms.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "frugal/fedavg.h"
#include "frugal/inproc_transport.h"
#include "frugal/parameter_server.h"
#include "frugal/step_cost.h"
#include "frugal/strategy.h"
#include "frugal_torch/data.h"
#include "frugal_torch/fedavg_trainer.h"
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

TrainOptions ShortRun(int64_t steps) {
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
  std::string compress{};
  std::string compress_pull{};
  bool ef = false;
};

// The servers' averaging rule under local and fedavg, else SGD at the run's schedule.
frugal::ServerOptimizer ServerOptimizerOf(const frugal::StrategyPlan& plan,
                                          const TrainOptions& options, int workers) {
  if (plan.sync.kind == frugal::SyncKind::kLocal || plan.sync.kind == frugal::SyncKind::kFedAvg) {
    return frugal::strategy_internal::ModelAveragingOptimizer();
  }
  frugal::ServerOptimizer optimizer;
  optimizer.lr = LearningRateOf(
      options,
      ShardSampler::StepsPerEpoch(testing_torch::Data().train.count, workers, options.batch_size));
  return optimizer;
}

// Runs `serve` on the servers (the last ranks, with their reports) and `train` on the workers.
void RunWithServers(const frugal::StrategyPlan& plan, int workers, const TrainOptions& options,
                    std::vector<frugal::ServerReport>& reports,
                    const std::function<Status(Transport& world, Transport& workers)>& train) {
  const int world_size = workers + plan.arch.servers;
  const frugal::ParameterServerConfig config =
      frugal::strategy_internal::ParameterServerConfigOf(plan, world_size);
  reports.assign(static_cast<size_t>(plan.arch.servers), frugal::ServerReport{});
  testing_torch::ExpectAllOk(frugal::RunRanks(world_size, [&](Transport& world) -> Status {
    const frugal::RoleAssignment roles = frugal::AssignRoles(plan.arch, world.size(), world.rank());
    FRUGAL_ASSIGN_OR_RETURN(frugal::RoleGroup group,
                            frugal::JoinRoleGroup(world, roles, plan.timeout));
    if (roles.mine == frugal::Role::kServer) {
      return frugal::RunParameterServer(world, config, ServerOptimizerOf(plan, options, workers),
                                        frugal::Logger(frugal::LogLevel::kOff),
                                        &reports[static_cast<size_t>(world.rank() - workers)]);
    }
    return train(world, *group.transport);
  }));
}

// A server's modelled bytes of `exchanges` exchanges of one worker each, from its per-step figure
// (`per`: exchanges per step).
uint64_t ServerBytes(double per_step, int workers, double per, uint64_t exchanges) {
  return static_cast<uint64_t>(std::llround(per_step / (workers * per))) * exchanges;
}

TEST(StepCostArch, ParameterServerEqualsTheBytesTrainingSends) {
  torch::set_num_threads(1);
  constexpr int64_t kSteps = 4;
  const TrainOptions options = ShortRun(kSteps);
  for (const PsCase& c :
       {PsCase{}, PsCase{.workers = 3, .servers = 2, .shard_mb = "0.01"},
        PsCase{.workers = 2, .servers = 2, .shard_mb = "0.1", .sync = "asp"},
        PsCase{.workers = 3, .sync = "ssp:staleness=1"},
        PsCase{.workers = 3, .servers = 2, .sync = "backup:workers=1"},
        PsCase{.workers = 3, .servers = 2, .shard_mb = "0.1", .sync = "local:period=2"},
        PsCase{.workers = 2, .sync = "local:period=4", .compress = "fp16"},
        PsCase{.workers = 3, .servers = 2, .compress = "qsgd:levels=4", .compress_pull = "fp16"},
        PsCase{.workers = 2,
        .compress = "topk:ratio=0.01",
        .compress_pull = "topk:ratio=0.01",
        .ef = true}}) {
    const std::string arch = "ps:servers=" + std::to_string(c.servers) + ",shard-mb=" + c.shard_mb;
    SCOPED_TRACE(arch + " " + c.sync + " W=" + std::to_string(c.workers) + " " + c.compress + " " +
                 c.compress_pull);
    frugal::StrategyOptions strategy_options;
    strategy_options.arch = arch;
    strategy_options.sync = c.sync;
    strategy_options.compress = c.compress;
    strategy_options.compress_pull = c.compress_pull;
    strategy_options.error_feedback = c.ef;
    strategy_options.timeout = options.timeout;
    const frugal::StrategyPlan plan = frugal::PlanStrategy(strategy_options).value();
    std::vector<frugal::ServerReport> reports;
    std::vector<TrainSummary> summaries(static_cast<size_t>(c.workers));
    RunWithServers(
        plan, c.workers, options, reports, [&](Transport& world, Transport& workers) -> Status {
          FRUGAL_ASSIGN_OR_RETURN(
              auto reducer,
              frugal::MakeStrategyReducer(plan, workers, 0, frugal::DefaultCompressorRegistry()));
          FRUGAL_ASSIGN_OR_RETURN(auto strategy,
                                  frugal::MakeStrategy(plan, workers, *reducer, &world));
          FRUGAL_ASSIGN_OR_RETURN(
              summaries[static_cast<size_t>(world.rank())],
              Train(workers, *reducer, *strategy, testing_torch::Data(), options));
          return Status::Ok();
        });
    const frugal::StepCost cost = CostOf(plan, c.workers);
    ASSERT_EQ(cost.server_bytes_in.size(), static_cast<size_t>(c.servers));
    const bool bound = c.compress.starts_with("topk");
    EXPECT_EQ(cost.exact, !bound);
    const bool local = plan.sync.kind == frugal::SyncKind::kLocal;
    const double per = local ? 1.0 / static_cast<double>(plan.sync.period) : 1.0;
    // Every push is answered: each server's answers match its pushes, and each key was pushed
    // as often on every server. The exchanges of one worker each, from server 0's pushes:
    // bsp and local know them in advance.
    const uint64_t in0 = ServerBytes(cost.server_bytes_in[0], c.workers, per, 1);
    ASSERT_GT(in0, 0u);
    uint64_t exchanges = reports[0].push_bytes_in / in0;
    if (plan.sync.kind == frugal::SyncKind::kBsp) exchanges = kSteps * c.workers;
    if (local) exchanges = kSteps / plan.sync.period * c.workers;
    for (int s = 0; s < c.servers; ++s) {
      const frugal::ServerReport& r = reports[static_cast<size_t>(s)];
      const uint64_t in =
          ServerBytes(cost.server_bytes_in[static_cast<size_t>(s)], c.workers, per, exchanges);
      const uint64_t out =
          ServerBytes(cost.server_bytes_out[static_cast<size_t>(s)], c.workers, per, exchanges);
      if (bound) {
        EXPECT_LE(r.push_bytes_in, in) << "server " << s;
        EXPECT_GT(r.push_bytes_in, in / 2) << "server " << s;
        EXPECT_LE(r.params_bytes_out, out) << "server " << s;
        EXPECT_GT(r.params_bytes_out, out / 2) << "server " << s;
      } else {
        EXPECT_EQ(r.push_bytes_in, in) << "server " << s;
        EXPECT_EQ(r.params_bytes_out, out) << "server " << s;
      }
    }
    // The workers' pushes: bytes_sent_per_worker is their mean, rounded.
    const double modelled =
        cost.bytes_per_worker / per * static_cast<double>(exchanges) / c.workers;
    if (bound) {
      EXPECT_LE(static_cast<double>(summaries[0].bytes_sent_per_worker), modelled + 0.5);
    } else {
      EXPECT_NEAR(static_cast<double>(summaries[0].bytes_sent_per_worker), modelled, 0.5)
          << cost.pattern;
    }
  }
}

struct FedAvgCase {
  int workers = 3;
  int servers = 1;
  std::string shard_mb = "4";
  std::string sync;
  int64_t rounds = 3;
};

// FedAvg over the servers: per round every worker that plays a sampled client pushes every key,
// the others the keys' headers alone; every worker gets every key back. With 2 clients on 3
// workers worker 2 plays none in any round; with 2 of 8 clients sampled the idle workers change
// from round to round.
TEST(StepCostArch, FedAvgOverServersEqualsTheBytesTrainingSends) {
  torch::set_num_threads(1);
  for (const FedAvgCase& c :
       {FedAvgCase{
            .servers = 2, .shard_mb = "0.1", .sync = "fedavg:clients=2,fraction=1,local-steps=1"},
        FedAvgCase{.sync = "fedavg:clients=8,fraction=0.25,local-steps=1", .rounds = 4}}) {
    SCOPED_TRACE(c.sync + " servers=" + std::to_string(c.servers));
    frugal::StrategyOptions strategy_options;
    strategy_options.arch = "ps:servers=" + std::to_string(c.servers) + ",shard-mb=" + c.shard_mb;
    strategy_options.sync = c.sync;
    strategy_options.seed = 5;
    strategy_options.timeout = std::chrono::seconds(60);
    const frugal::StrategyPlan plan = frugal::PlanStrategy(strategy_options).value();
    TrainOptions options = ShortRun(0);
    options.epochs = c.rounds;
    options.seed = 5;
    std::vector<frugal::ServerReport> reports;
    std::vector<FedAvgSummary> summaries(static_cast<size_t>(c.workers));
    RunWithServers(
        plan, c.workers, options, reports, [&](Transport& world, Transport& workers) -> Status {
          FRUGAL_ASSIGN_OR_RETURN(auto fedavg,
                                  frugal::FederatedAveraging::CreateOverServers(
                                      plan, world, workers, frugal::DefaultCompressorRegistry()));
          FRUGAL_ASSIGN_OR_RETURN(summaries[static_cast<size_t>(workers.rank())],
                                  TrainFedAvg(workers, *fedavg, testing_torch::Data(), options));
          return Status::Ok();
        });
    frugal::StepCostInput in;
    in.parameters = testing_torch::CostTensorsOf("mlp");
    in.workers = c.workers;
    in.plan = plan;
    in.rounds = c.rounds;
    auto cost = frugal::ComputeStepCost(in, frugal::DefaultCompressorRegistry());
    ASSERT_TRUE(cost.ok()) << cost.status().ToString();
    EXPECT_TRUE(cost->exact);
    // mlp: 6 tensors, a key each; parts of 0.1 MB cut fc1.weight in 8 and fc2.weight in 3.
    EXPECT_EQ(cost->idle_bytes_per_worker, (c.shard_mb == "4" ? 6 : 15) * 52u);
    const double rounds = static_cast<double>(c.rounds);
    uint64_t pushed = 0;
    for (int s = 0; s < c.servers; ++s) {
      const frugal::ServerReport& r = reports[static_cast<size_t>(s)];
      EXPECT_EQ(r.push_bytes_in,
                static_cast<uint64_t>(std::llround(cost->server_bytes_in[s] * rounds)))
          << "server " << s;
      EXPECT_EQ(r.params_bytes_out,
                static_cast<uint64_t>(std::llround(cost->server_bytes_out[s] * rounds)))
          << "server " << s;
      pushed += r.push_bytes_in;
    }
    EXPECT_EQ(pushed,
              static_cast<uint64_t>(std::llround(cost->bytes_per_worker * c.workers * rounds)));
    const FedAvgSummary& s = summaries[0];
    ASSERT_EQ(s.rounds.size(), static_cast<size_t>(c.rounds));
    EXPECT_NEAR(static_cast<double>(s.rounds.back().bytes_sent), cost->bytes_per_worker * rounds,
                0.5)
        << cost->pattern;
    for (const RoundRecord& r : s.rounds) {
      EXPECT_EQ(r.bytes_up, cost->client_bytes_up);
      EXPECT_EQ(r.bytes_down, cost->client_bytes_down);
    }
    if (c.sync.starts_with("fedavg:clients=2")) {
      EXPECT_EQ(cost->uploading_workers, 2.0);  // clients 0 and 1 on workers 0 and 1
    } else {
      EXPECT_LT(cost->uploading_workers, 2.0);  // some round leaves a third of the workers idle
    }
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
        testing_torch::TrainWithStrategy(c.n, strategy_options, ShortRun(c.steps));
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
