// Local SGD with overlap=1: the average taken at one averaging step is applied at the next, beside
// the progress each worker made meanwhile, whether it ran in the background or at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"
#include "strategy/strategy_test_util.h"
#include "strategy/thread_runner.h"

namespace frugal {
namespace {

using strategy_test::ExpectAllOk;
using strategy_test::Plan;

using strategy_test::ModelOfRank;
using strategy_test::RankModel;

struct OverlapSeen {
  RankModel after_first;   // after the first averaging step (local step 2)
  RankModel after_second;  // after the second (local step 4)
  RankModel settled;
  uint64_t bytes = 0;
  int background_calls = 0;
};

// Ranks start from rank 0's model, drift to ModelOfRank(r), take local steps 1 and 2 (an
// averaging step), add r + 1 to `a` and 0.5 to the statistics and momenta (local steps 3 and 4),
// pass local step 4 (the next averaging step), then settle.
std::vector<OverlapSeen> RunOverlap(int n, const std::string& compress, bool background) {
  const StrategyPlan plan = Plan("local:period=2,overlap=1", compress, /*seed=*/3);
  std::vector<OverlapSeen> seen(static_cast<size_t>(n));
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    OverlapSeen& s = seen[static_cast<size_t>(t.rank())];
    RankModel m;
    FRUGAL_ASSIGN_OR_RETURN(strategy_test::BegunStrategy begun,
                            strategy_test::BeginDrifted(plan, t, m));
    Strategy* strategy = begun.strategy.get();
    ModelBuffers view = m.View();
    strategy_test::ThreadRunner runner(t, background);
    StepPoint p;
    p.steps_per_epoch = 10;
    for (uint64_t step = 0; step < 4; ++step) {
      p.step = step;
      if (step == 2) {
        for (float& x : m.a) x += static_cast<float>(t.rank() + 1);
        for (float& x : m.stats) x += 0.5f;
        for (float& x : m.momentum) x += 0.5f;
      }
      if (strategy->ExchangesAfterStep(p)) {
        FRUGAL_RETURN_IF_ERROR(strategy->AfterOptimizerStep(p, view, runner));
      }
      if (step == 1) s.after_first = m;
    }
    s.after_second = m;
    FRUGAL_RETURN_IF_ERROR(strategy->Settle(view, runner));
    s.settled = m;
    s.bytes = strategy->bytes_sent();
    s.background_calls = runner.background_calls;
    return Status::Ok();
  }));
  return seen;
}

TEST(LocalSgdOverlap, AppliesEachAverageOnePeriodLaterBesideTheOwnProgress) {
  for (int n : {1, 2, 3, 4}) {
    for (bool background : {false, true}) {
      const std::vector<OverlapSeen> seen = RunOverlap(n, /*compress=*/"", background);
      const float mean = static_cast<float>(n - 1) / 2;  // of the ranks' a
      const float mean_progress = mean + 1;              // of r + 1
      for (int r = 0; r < n; ++r) {
        const OverlapSeen& s = seen[static_cast<size_t>(r)];
        const std::string where = "n=" + std::to_string(n) + " rank " + std::to_string(r) +
                                  (background ? " background" : " at once");
        // Local step 2 only takes the model: it keeps its own values until local step 4.
        ASSERT_EQ(s.after_first.a[0], static_cast<float>(r)) << where;
        // Local step 4: the average of local step 2 plus the own progress since.
        for (float x : s.after_second.a)
          ASSERT_FLOAT_EQ(x, mean + static_cast<float>(r + 1)) << where;
        for (float x : s.after_second.b) ASSERT_FLOAT_EQ(x, 2 * mean) << where;
        EXPECT_FLOAT_EQ(s.after_second.stats[0], 10 * mean + 0.5f) << where;
        // Momenta are not averaged by default: the own values, progress included.
        EXPECT_FLOAT_EQ(s.after_second.momentum[0], static_cast<float>(r) + 0.5f) << where;
        // Settle applies the average taken at local step 4; no step since, so it is the average.
        for (float x : s.settled.a) ASSERT_FLOAT_EQ(x, mean + mean_progress) << where;
        EXPECT_EQ(s.settled.a, seen[0].settled.a) << where << ": replicas differ after Settle";
        EXPECT_EQ(s.settled.stats, seen[0].settled.stats) << where;
        // Two fused ring all-reduces of a, b and the statistics: 2 (n - 1) / n of their floats
        // each, per rank, within the rounding of the block partition.
        const double one = 2.0 * (n - 1) / n * 4 * (strategy_test::kA + 7 + 3);
        EXPECT_NEAR(static_cast<double>(s.bytes), 2 * one, 16.0 * n) << where;
        EXPECT_EQ(s.background_calls, background ? 2 : 0) << where;
      }
    }
  }
}

// The same bits whether the average ran in the background or at once, with compressed deltas too.
TEST(LocalSgdOverlap, BackgroundAndImmediateAveragesAgreeBitForBit) {
  for (const std::string compress : {"", "topk:ratio=0.1", "qsgd"}) {
    std::vector<std::vector<OverlapSeen>> runs;
    for (bool background : {false, true}) runs.push_back(RunOverlap(3, compress, background));
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(runs[0][r].after_second.a, runs[1][r].after_second.a) << compress << " rank " << r;
      EXPECT_EQ(runs[0][r].settled.a, runs[1][r].settled.a) << compress << " rank " << r;
    }
  }
}

TEST(LocalSgdOverlap, NamesItselfAndRefusesWhatItDoesNotOverlap) {
  const SyncSpec spec = ParseSyncSpec("local:period=4,overlap=1").value();
  EXPECT_TRUE(spec.overlap);
  EXPECT_EQ(SyncSpecName(spec), "local:period=4,overlap=1");
  EXPECT_FALSE(ParseSyncSpec("local:period=4").value().overlap);
  const Status hierarchical = ParseSyncSpec("local:period=4,intra-period=2,overlap=1").status();
  EXPECT_EQ(hierarchical.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(hierarchical.message().find("does not combine with intra-period"), std::string::npos)
      << hierarchical.message();
  StrategyOptions gossip;
  gossip.arch = "gossip:topology=ring";
  gossip.sync = "local:period=4,overlap=1";
  const Status refused = PlanStrategy(gossip).status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("overlap=1 need a global all-reduce"), std::string::npos)
      << refused.message();
}

}  // namespace
}  // namespace frugal
