// Training strategies through frugal_torch, ranks as threads: Local SGD against BSP, post-local
// SGD's BSP phase, what drifting replicas report, and stragglers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::Transport;
using testing_torch::Data;
using testing_torch::ExpectAllOk;
using testing_torch::MaxAbsDifference;

using RunResult = testing_torch::StrategyRun;

RunResult TrainWith(int n, const std::string& sync, const TrainOptions& options) {
  frugal::StrategyOptions strategy_options;
  strategy_options.sync = sync;
  return testing_torch::TrainWithStrategy(n, strategy_options, options);
}

TrainOptions Small(bool engine) {
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = 16;
  options.max_steps = 6;
  options.seed = 5;
  options.lr = 0.05;
  options.momentum = 0;
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 200;
  if (engine) options.overlap = OverlapOptions{};  // priority, as `frugal train`
  return options;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Plain SGD: averaging x - lr g_i over the ranks is x - lr avg(g_i), so Local SGD with period 1
// is BSP up to float rounding; a different algorithm (momentum applied per rank) would not be.
TEST(StrategyTraining, LocalSgdWithPeriodOneIsBspForPlainSgd) {
  torch::set_num_threads(1);
  for (bool engine : {false, true}) {
    for (int n : {2, 3}) {
      const TrainOptions options = Small(engine);
      const RunResult bsp = TrainWith(n, "bsp", options);
      const RunResult local = TrainWith(n, "local:period=1", options);
      for (int r = 0; r < n; ++r) {
        EXPECT_LT(MaxAbsDifference(local.parameters[r], bsp.parameters[0]), 1e-5)
            << "n=" << n << " engine=" << engine << " rank " << r;
      }
      // A longer period is another algorithm: the models must differ measurably.
      const RunResult period3 = TrainWith(n, "local:period=3", options);
      EXPECT_GT(MaxAbsDifference(period3.parameters[0], bsp.parameters[0]), 1e-4);
      EXPECT_FALSE(local.summaries[0].identical_replicas);
      EXPECT_TRUE(bsp.summaries[0].identical_replicas);
    }
  }
}

// Before its start epoch post-local SGD is BSP: the same gradients, the same engine path, the
// same bits.
TEST(StrategyTraining, PostLocalSgdBeforeItsStartEpochIsBspBitForBit) {
  torch::set_num_threads(1);
  TrainOptions options = Small(/*engine=*/true);
  options.momentum = 0.9;
  const RunResult bsp = TrainWith(2, "bsp", options);
  const RunResult post = TrainWith(2, "local:period=2,start-epoch=1", options);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(SameBits(post.parameters[r], bsp.parameters[0])) << "rank " << r;
  }
}

// Replicas that differ: the averaged model is evaluated, the spread and the consensus distance
// are reported, and the training bytes are exactly the averages' all-reduces.
TEST(StrategyTraining, DriftingReplicasReportSpreadAndExactBytes) {
  torch::set_num_threads(1);
  TrainOptions options = Small(/*engine=*/true);
  options.max_steps = 6;  // period 4: one average after step 3, then two local steps
  const RunResult local = TrainWith(2, "local:period=4", options);
  const TrainSummary& s = local.summaries[0];
  ASSERT_EQ(s.history.size(), 1u);
  const EpochRecord& e = s.history[0];
  EXPECT_FALSE(s.identical_replicas);
  EXPECT_GT(e.consensus_distance, 0);
  EXPECT_LE(e.rank_accuracy_min, e.rank_accuracy_max);
  EXPECT_GT(e.rank_accuracy_min, 0);
  EXPECT_GT(e.eval_bytes_sent, 0u);
  // Two ranks, ring: one average sends the whole model once (2 (n-1)/n = 1) in float32.
  EXPECT_EQ(s.bytes_sent_per_worker, 4u * static_cast<uint64_t>(s.params));
  EXPECT_FALSE(SameBits(local.parameters[0], local.parameters[1]));
  // Ending on an average: the replicas agree and the distance is zero.
  options.max_steps = 4;
  const RunResult aligned = TrainWith(2, "local:period=4", options);
  EXPECT_TRUE(SameBits(aligned.parameters[0], aligned.parameters[1]));
  EXPECT_EQ(aligned.summaries[0].history[0].consensus_distance, 0);
  EXPECT_EQ(aligned.summaries[0].history[0].rank_accuracy_min,
            aligned.summaries[0].history[0].rank_accuracy_max);
  EXPECT_EQ(e.rank_accuracy_samples, options.test_samples);
}

// overlap=1: the engine runs each average on its thread while the next period's steps compute;
// without the engine it runs at once. The same algorithm either way: the same bits. It is another
// algorithm than Local SGD's (each average lands a period late): the models differ measurably.
TEST(StrategyTraining, OverlappedLocalSgdIsTheSameWithAndWithoutTheEngine) {
  torch::set_num_threads(1);
  TrainOptions options = Small(/*engine=*/false);
  options.max_steps =
      9;  // averages taken at local steps 3, 6, 9, each applied at the next / Settle
  const RunResult direct = TrainWith(2, "local:period=3,overlap=1", options);
  options = Small(/*engine=*/true);
  options.max_steps = 9;
  const RunResult engine = TrainWith(2, "local:period=3,overlap=1", options);
  const RunResult plain = TrainWith(2, "local:period=3", options);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(SameBits(direct.parameters[r], engine.parameters[r])) << "rank " << r;
  }
  EXPECT_GT(MaxAbsDifference(engine.parameters[0], plain.parameters[0]), 1e-4);
  // Both exchanged the same averages: the same bytes.
  EXPECT_EQ(engine.summaries[0].bytes_sent_per_worker, plain.summaries[0].bytes_sent_per_worker);
  EXPECT_EQ(engine.summaries[0].strategy, "local:period=3,overlap=1");
}

// --replica-eval-samples: each rank's own model on the first N test images only; the averaged
// model's loss and accuracy, the distance and the bytes do not change.
TEST(StrategyTraining, ReplicaEvaluationOnFewerSamplesLeavesTheAveragedModelsFigures) {
  torch::set_num_threads(1);
  TrainOptions options = Small(/*engine=*/true);
  options.max_steps = 6;
  const EpochRecord all = TrainWith(2, "local:period=4", options).summaries[0].history[0];
  options.replica_eval_samples = 50;
  const EpochRecord few = TrainWith(2, "local:period=4", options).summaries[0].history[0];
  EXPECT_EQ(few.rank_accuracy_samples, 50);
  for (double accuracy : {few.rank_accuracy_min, few.rank_accuracy_max}) {
    EXPECT_DOUBLE_EQ(accuracy * 50, std::round(accuracy * 50)) << "not a count out of 50";
  }
  EXPECT_EQ(few.test_loss, all.test_loss);
  EXPECT_EQ(few.test_accuracy, all.test_accuracy);
  EXPECT_EQ(few.consensus_distance, all.consensus_distance);
  EXPECT_EQ(few.eval_bytes_sent, all.eval_bytes_sent);
}

// A straggler slows its own rank; under Local SGD without an average in the run, only its own.
// The factor is 8, not 2 or 4: the straggler's sleeps are a multiple of its own compute, measured
// while rank 0 sleeps, and rank 0 computes while the straggler computes too, so rank 0's epoch can
// be up to twice as slow (three times with another job on the two cores) as an idle rank's.
TEST(StrategyTraining, AStragglerSlowsOnlyItsRankUnderLocalSgd) {
  torch::set_num_threads(1);
  TrainOptions options = Small(/*engine=*/true);
  options.batch_size = 128;
  options.max_steps = 20;
  options.stragglers = {{1, 8.0}};
  const RunResult run = TrainWith(2, "local:period=1000", options);
  EXPECT_GT(run.epoch_seconds[1], 2.0 * run.epoch_seconds[0])
      << "rank 0 " << run.epoch_seconds[0] << " s, rank 1 " << run.epoch_seconds[1] << " s";
  TrainOptions bad = options;
  bad.stragglers = {{2, 3.0}};
  std::vector<Status> statuses = frugal::RunRanks(2, [&](Transport& t) -> Status {
    auto reducer = testing_torch::Ring(t);
    return Train(t, *reducer, Data(), bad).status();
  });
  for (const Status& status : statuses) {
    EXPECT_NE(status.message().find("there are only 2 ranks"), std::string::npos)
        << status.ToString();
  }
}

}  // namespace
}  // namespace frugal_torch
