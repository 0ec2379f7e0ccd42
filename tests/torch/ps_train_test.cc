// The parameter server through frugal_torch, ranks as threads: W workers train with
// --arch ps:servers=S while S server ranks run the optimizer; with bsp the final model equals
// all-reduce BSP's on the same W workers (to float tolerance), for 1-4 servers and every overlap
// mode; with local:period=H the servers average the workers' models, as Local SGD over
// all-reduce does.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"
#include "frugal_torch/data.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::Transport;
using testing_torch::Data;
using testing_torch::ExpectAllOk;
using testing_torch::MaxAbsDifference;

struct PsRun {
  std::vector<float> parameters;  // worker 0's final model
  std::vector<TrainSummary> summaries;
};

PsRun TrainOn(int world_size, const std::string& arch, const TrainOptions& options,
              const std::string& sync = "bsp") {
  frugal::StrategyOptions strategy_options;
  strategy_options.arch = arch;
  strategy_options.sync = sync;
  strategy_options.momentum = options.momentum;
  strategy_options.timeout = options.timeout;
  const frugal::StrategyPlan plan = frugal::PlanStrategy(strategy_options).value();
  PsRun run;
  run.summaries.resize(static_cast<size_t>(world_size));
  ExpectAllOk(frugal::RunRanks(world_size, [&](Transport& world) -> Status {
    const frugal::RoleAssignment roles = frugal::AssignRoles(plan.arch, world.size(), world.rank());
    FRUGAL_ASSIGN_OR_RETURN(frugal::RoleGroup group,
                            frugal::JoinRoleGroup(world, roles, plan.timeout));
    if (roles.mine == frugal::Role::kServer) {
      frugal::ServerOptimizer optimizer;
      optimizer.lr = LearningRateOf(
          options,
          ShardSampler::StepsPerEpoch(Data().train.count, roles.workers, options.batch_size));
      optimizer.momentum = options.momentum;
      optimizer.weight_decay = options.weight_decay;
      optimizer.nesterov = options.nesterov;
      return frugal::RunServerRole(world, plan, optimizer, frugal::Logger(frugal::LogLevel::kOff));
    }
    Transport& workers = *group.transport;
    FRUGAL_ASSIGN_OR_RETURN(
        auto reducer,
        frugal::MakeStrategyReducer(plan, workers, 0, frugal::DefaultCompressorRegistry()));
    FRUGAL_ASSIGN_OR_RETURN(auto strategy, frugal::MakeStrategy(plan, workers, *reducer, &world));
    TrainCallbacks callbacks;
    if (world.rank() == 0) {
      callbacks.on_final_parameters = [&](const std::vector<float>& p) { run.parameters = p; };
    }
    FRUGAL_ASSIGN_OR_RETURN(run.summaries[static_cast<size_t>(world.rank())],
                            Train(workers, *reducer, *strategy, Data(), options, callbacks));
    return Status::Ok();
  }));
  return run;
}

TrainOptions SmallPsRun() {
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = 16;
  options.max_steps = 5;
  options.seed = 3;
  options.lr = 0.05;
  options.momentum = 0.9;
  options.weight_decay = 1e-4;
  options.nesterov = true;
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 200;
  options.overlap = OverlapOptions{};
  return options;
}

TEST(ParameterServerTraining, BspEqualsAllreduceBspOverOneToFourServers) {
  torch::set_num_threads(1);
  constexpr int kWorkers = 2;
  TrainOptions options = SmallPsRun();
  const PsRun allreduce = TrainOn(kWorkers, "allreduce:ring", options);
  ASSERT_FALSE(allreduce.parameters.empty());
  for (int servers : {1, 2, 3, 4}) {
    // Small parts, so that tensors are cut and spread over the servers.
    const std::string arch = "ps:servers=" + std::to_string(servers) + ",shard-mb=0.01";
    const PsRun ps = TrainOn(kWorkers + servers, arch, options);
    ASSERT_FALSE(ps.parameters.empty()) << arch;
    EXPECT_LT(MaxAbsDifference(ps.parameters, allreduce.parameters), 2e-5) << arch;
    const TrainSummary& summary = ps.summaries[0];
    EXPECT_TRUE(summary.params_consistent) << arch;
    EXPECT_EQ(summary.workers, kWorkers) << arch;
    EXPECT_EQ(summary.reducer, arch) << "the servers carry the gradients";
    EXPECT_GT(summary.bytes_sent_per_worker, 0u) << arch;
    EXPECT_NEAR(summary.test_loss, allreduce.summaries[0].test_loss, 1e-4) << arch;
  }
}

TEST(ParameterServerTraining, EveryOverlapModeGivesTheSameModel) {
  torch::set_num_threads(1);
  TrainOptions options = SmallPsRun();
  options.overlap.reset();  // the parameter server's client runs with priority overlap then
  const PsRun reference = TrainOn(3, "ps:servers=1", options);
  ASSERT_FALSE(reference.parameters.empty());
  for (frugal::OverlapMode mode : {frugal::OverlapMode::kNone, frugal::OverlapMode::kWfbp,
                                   frugal::OverlapMode::kFusion, frugal::OverlapMode::kPriority}) {
    options.overlap = OverlapOptions{};
    options.overlap->mode = mode;
    const PsRun run = TrainOn(3, "ps:servers=1", options);
    EXPECT_EQ(run.parameters, reference.parameters) << frugal::OverlapModeName(mode);
  }
}

// Local SGD over the servers: the workers step on their own and every H steps push their model
// deltas; the servers' average is the all-reduce's average up to the order of the float sums.
TEST(ParameterServerTraining, LocalSgdEqualsLocalSgdOverAllreduce) {
  torch::set_num_threads(1);
  TrainOptions options = SmallPsRun();
  options.max_steps = 7;  // averages after steps 2 and 5, then one local step
  const std::string sync = "local:period=3";
  for (int workers : {2, 3}) {
    const PsRun allreduce = TrainOn(workers, "allreduce:ring", options, sync);
    ASSERT_FALSE(allreduce.parameters.empty());
    EXPECT_FALSE(allreduce.summaries[0].identical_replicas);
    for (const std::string arch : {"ps:servers=1", "ps:servers=2,shard-mb=0.01"}) {
      const PsRun ps = TrainOn(workers + (arch == "ps:servers=1" ? 1 : 2), arch, options, sync);
      ASSERT_FALSE(ps.parameters.empty()) << arch;
      const TrainSummary& summary = ps.summaries[0];
      EXPECT_EQ(summary.workers, workers) << arch;
      EXPECT_FALSE(summary.identical_replicas) << arch;
      // Not bit for bit (the servers sum deltas, the ring sums models): within 1e-6 (measured
      // 2.3e-8 after 7 steps).
      EXPECT_LT(MaxAbsDifference(ps.parameters, allreduce.parameters), 1e-6) << arch;
      EXPECT_NEAR(summary.test_loss, allreduce.summaries[0].test_loss, 1e-5) << arch;
      if (arch == "ps:servers=1") {
        // mlp: 6 tensors cut into keys of at most 128 KiB (32768 floats): 7 + 1 + 2 + 1 + 1 + 1 =
        // 13 keys; two averages, each a 52-byte header and the floats of every key.
        EXPECT_EQ(summary.bytes_sent_per_worker, 2 * (13 * 52 + 4 * 269322u)) << arch;
      }
    }
    // Another period is another algorithm: measurably elsewhere.
    const PsRun period1 = TrainOn(workers + 1, "ps:servers=1", options, "local:period=1");
    EXPECT_GT(MaxAbsDifference(period1.parameters, allreduce.parameters), 1e-4);
  }
}

}  // namespace
}  // namespace frugal_torch
