// The consistency models of the parameter server with ranks as threads: the rules alone, then
// ssp's bound over the continuum of S (a worker S clocks ahead of the slowest goes on, S + 1
// ahead waits; asp never waits), ssp with S = 0 against the serial bsp reference, asp with
// learning rate 0, backup workers with exact values, the staleness the servers count, and
// resting workers, for whom nothing waits.
#include <gtest/gtest.h>

#include <latch>

#include "frugal/collectives.h"
#include "ps/consistency.h"
#include "ps/ps_test_util.h"
#include "ps/server_optimizer.h"

namespace frugal::ps_test {
namespace {

using ps_internal::ConsistencyRules;
using ps_internal::PullNeed;
using ps_internal::PushAction;

// One tensor of 4 floats: a single key on one server.
Model OneKey() {
  Model m;
  m.names = {"w"};
  m.values = {{1.0f, -2.0f, 0.5f, 3.0f}};
  return m;
}

ServerOptimizer PlainSgd(double lr) {
  ServerOptimizer opt;
  opt.lr = [lr](int64_t) { return lr; };
  return opt;
}

ParameterServerConfig With(PsConsistency kind, int workers, int servers = 1) {
  ParameterServerConfig config = Config(workers, servers, size_t{1} << 20);
  config.consistency = kind;
  return config;
}

// Pushes `gradient` for the single key at `step` and waits for the parameters, into `x`.
Status Step(ParameterClient& client, uint64_t step, std::vector<float> gradient,
            std::vector<float>& x) {
  TensorRequest request;
  request.name = "w";
  request.step = step;
  FRUGAL_RETURN_IF_ERROR(client.Submit(request, gradient)->Wait(kWait));
  x = gradient;
  return Status::Ok();
}

StatusOr<ParameterServerStats> Stats(ParameterClient& client) {
  ParameterServerStats stats;
  FRUGAL_RETURN_IF_ERROR(client.FetchStats(&stats)->Wait(kWait));
  return stats;
}

void ExpectOk(const ClusterResult& run) {
  for (size_t r = 0; r < run.statuses.size(); ++r) {
    EXPECT_TRUE(run.statuses[r].ok()) << "rank " << r << ": " << run.statuses[r].ToString();
  }
}

TEST(PsConsistencyRules, SspHoldsAPullOnlyBeyondTheBound) {
  ParameterServerConfig config = With(PsConsistency::kSsp, 3);
  config.staleness = 2;
  const ConsistencyRules rules(config);
  // The puller's clock after its push is 5: it may be 2 ahead of the slowest.
  const PullNeed need = rules.NeedOf(/*pushed_version=*/0, /*clock=*/5);
  EXPECT_TRUE(rules.Ready(need, 0, /*min_active_clock=*/3));
  EXPECT_FALSE(rules.Ready(need, 0, 2));
  const std::vector<uint64_t> clocks = {5, 2, 3};
  const std::vector<char> none = {0, 0, 0};
  EXPECT_EQ(rules.Blocking(need, clocks, none, none), std::vector<int>({1}));
  const std::vector<char> resting = {0, 1, 0};
  EXPECT_TRUE(rules.Blocking(need, clocks, resting, none).empty());
  std::string error;
  EXPECT_EQ(rules.OnPush(7, 4, error), PushAction::kApply);
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(rules.OnPush(7, 8, error), PushAction::kDrop);
  EXPECT_FALSE(error.empty());  // a version the key has not reached
}

TEST(PsConsistencyRules, BackupCompletesWithTheFirstWMinusB) {
  ParameterServerConfig config = With(PsConsistency::kBackup, 4);
  config.backup = 1;
  const ConsistencyRules rules(config);
  EXPECT_FALSE(rules.Complete(2, false));
  EXPECT_TRUE(rules.Complete(3, false));
  EXPECT_EQ(rules.Divisor(3), 3);
  EXPECT_TRUE(rules.Complete(1, true));   // the others rest
  EXPECT_FALSE(rules.Complete(0, true));  // nothing to apply
  std::string error;
  EXPECT_EQ(rules.OnPush(3, 3, error), PushAction::kAccumulate);
  EXPECT_EQ(rules.OnPush(3, 2, error), PushAction::kDrop);
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(rules.NeedOf(2, 9).min_version, 3u);  // answered at once after a drop at version 3
}

TEST(PsConsistencyRules, StalenessPolicies) {
  ParameterServerConfig config = With(PsConsistency::kAsp, 2);
  config.staleness_policy = StalenessPolicy::kDrop;
  config.drop_above = 3;
  const ConsistencyRules drop(config);
  std::string error;
  EXPECT_EQ(drop.OnPush(10, 7, error), PushAction::kApply);
  EXPECT_EQ(drop.OnPush(10, 6, error), PushAction::kDrop);
  config.staleness_policy = StalenessPolicy::kScale;
  const ConsistencyRules scale(config);
  EXPECT_DOUBLE_EQ(scale.Scale(0), 1.0);
  EXPECT_DOUBLE_EQ(scale.Scale(4), 0.25);
  EXPECT_EQ(scale.ScheduleStep(1), 0);
  EXPECT_EQ(scale.ScheduleStep(2), 0);
  EXPECT_EQ(scale.ScheduleStep(3), 1);
}

// Two workers; worker 0 runs ahead while worker 1 has not pushed. Under ssp with bound S the
// pulls of worker 0's first S pushes are answered at once (the answer's progress counts only
// worker 0's pushes), the pull of its push S + 1 is held until worker 1 pushes (its answer
// counts worker 1's push too). Worker 1 pushes only once the server has applied worker 0's
// push S + 1 (the servers' counts say so), so the hold is observed, not raced.
// ExpectPulls(kind, S, ahead, held): worker 0 makes `ahead` pushes before worker 1's first; the
// pull of the last is held (`held`) or answered at once, the others answered at once.
void ExpectPulls(PsConsistency kind, int staleness, int ahead, bool held) {
  ParameterServerConfig config = With(kind, 2);
  config.staleness = staleness;
  std::vector<uint64_t> progress_seen;
  const ClusterResult run =
      RunCluster(config, PlainSgd(0.1), OneKey(),
                 [&](int w, ParameterClient& client, Transport&, Model& model) -> Status {
                   std::vector<float> x = model.values[0];
                   if (w == 0) {
                     for (int k = 0; k < ahead; ++k) {
                       FRUGAL_RETURN_IF_ERROR(Step(client, k, {0.1f, 0.1f, 0.1f, 0.1f}, x));
                       progress_seen.push_back(client.progress());
                     }
                     return Status::Ok();
                   }
                   // Worker 1: wait (by asking the server) until worker 0's pushes are all applied.
                   for (int round = 0;; ++round) {
                     FRUGAL_ASSIGN_OR_RETURN(ParameterServerStats stats, Stats(client));
                     if (stats.workers[0].applied == static_cast<uint64_t>(ahead)) break;
                     if (round > 100000) return InternalError("worker 0's pushes never arrived");
                   }
                   return Step(client, 0, {0.2f, 0.2f, 0.2f, 0.2f}, x);
                 });
  ExpectOk(run);
  ASSERT_EQ(progress_seen.size(), static_cast<size_t>(ahead));
  for (int k = 0; k + 1 < ahead; ++k) {
    EXPECT_EQ(progress_seen[k], static_cast<uint64_t>(k + 1))
        << "S=" << staleness << ": the pull of push " << k + 1 << " was held";
  }
  // The last push: held until worker 1's push under ssp (answered with its progress too);
  // answered at once under asp.
  EXPECT_EQ(progress_seen.back(), static_cast<uint64_t>(held ? ahead + 1 : ahead))
      << "S=" << staleness;
}

TEST(ParameterServerSsp, AWorkerSAheadGoesOnAndSPlusOneAheadWaits) {
  for (int s : {0, 1, 2, 5}) ExpectPulls(PsConsistency::kSsp, s, s + 1, /*held=*/true);
}

TEST(ParameterServerSsp, AspNeverWaits) { ExpectPulls(PsConsistency::kAsp, 0, 6, false); }

// The other end of the continuum: the largest bound --sync accepts is asp (12 pushes ahead,
// none held).
TEST(ParameterServerSsp, AVeryLargeBoundIsAsp) {
  ExpectPulls(PsConsistency::kSsp, 1 << 20, 12, /*held=*/false);
}

// Worker w's gradient at step k for parameters x (plain SGD: the serial bsp reference holds).
std::vector<float> GradientAt(int w, uint64_t k, const std::vector<float>& x) {
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    g[i] = 0.5f * x[i] - 0.1f * static_cast<float>(w + 1) + 0.01f * static_cast<float>(k * i);
  }
  return g;
}

TEST(ParameterServerSsp, StalenessZeroIsBspForPlainSgd) {
  constexpr int kWorkers = 3;
  constexpr int kSteps = 8;
  constexpr double kLr = 0.2;
  const Model initial = OneKey();
  // The serial bsp reference: the average of the workers' gradients, then x -= lr * average.
  std::vector<float> expected = initial.values[0];
  for (int k = 0; k < kSteps; ++k) {
    std::vector<float> avg(expected.size(), 0.0f);
    for (int w = 0; w < kWorkers; ++w) {
      const std::vector<float> g = GradientAt(w, k, expected);
      for (size_t i = 0; i < g.size(); ++i) avg[i] += g[i] / kWorkers;
    }
    for (size_t i = 0; i < avg.size(); ++i) expected[i] -= static_cast<float>(kLr) * avg[i];
  }
  ParameterServerConfig config = With(PsConsistency::kSsp, kWorkers);
  config.staleness = 0;
  std::vector<std::vector<float>> finals(kWorkers);
  const ClusterResult run =
      RunCluster(config, PlainSgd(kLr), initial,
                 [&](int w, ParameterClient& client, Transport&, Model& model) -> Status {
                   std::vector<float> x = model.values[0];
                   for (int k = 0; k < kSteps; ++k) {
                     FRUGAL_RETURN_IF_ERROR(Step(client, k, GradientAt(w, k, x), x));
                   }
                   finals[w] = x;
                   return Status::Ok();
                 });
  ExpectOk(run);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_LT(MaxDifference(finals[w], expected), 1e-5) << "worker " << w;
  }
}

TEST(ParameterServerAsp, LearningRateZeroKeepsTheParameters) {
  const Model initial = SmallModel();
  ParameterServerConfig config = Config(3, 2, 64);
  config.consistency = PsConsistency::kAsp;
  std::vector<Model> finals(3);
  const ClusterResult run =
      RunCluster(config, PlainSgd(0.0), initial,
                 [&](int w, ParameterClient& client, Transport&, Model& x) -> Status {
                   for (int k = 0; k < 5; ++k) {
                     std::vector<std::vector<float>> g = x.values;
                     for (auto& t : g) {
                       for (float& v : t) v = 1.0f + static_cast<float>(w);
                     }
                     FRUGAL_RETURN_IF_ERROR(PushPull(client, x, k, g));
                     x.values = g;
                   }
                   finals[w] = x;
                   return Status::Ok();
                 });
  ExpectOk(run);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(finals[w].values, initial.values) << "worker " << w;
  uint64_t applied = 0;
  for (const ServerReport& r : run.reports) {
    for (const WorkerPushStats& s : r.workers) applied += s.applied;
  }
  size_t keys = 0;
  for (const ServerReport& r : run.reports) keys += r.key_names.size();
  EXPECT_EQ(applied, 3 * 5 * keys);  // every push applied, none dropped
}

// Backup workers, W = 3, B = 1, exact values: in step 0 workers 0 and 1 push first and their
// average is applied; worker 2's push (computed on version 0, now 1) is dropped and its pull
// answered with version 1. In step 1 worker 0 is the late one.
TEST(ParameterServerBackup, AppliesTheFirstWMinusBAndDropsTheLate) {
  constexpr double kLr = 0.5;
  const Model initial = OneKey();
  ParameterServerConfig config = With(PsConsistency::kBackup, 3);
  config.backup = 1;
  const std::vector<float> g[3] = {{1, 2, 3, 4}, {-1, 0.5f, 7, 2}, {100, 100, 100, 100}};
  // Expected: x1 = x0 - lr * (g0 + g1) / 2, x2 = x1 - lr * (g1 + g2) / 2 (worker order, floats).
  auto update = [&](std::vector<float> x, const std::vector<float>& a,
                    const std::vector<float>& b) {
    for (size_t i = 0; i < x.size(); ++i) {
      const float avg = (a[i] + b[i]) / 2.0f;
      x[i] = x[i] + static_cast<float>(-kLr) * avg;
    }
    return x;
  };
  const std::vector<float> x1 = update(initial.values[0], g[0], g[1]);
  const std::vector<float> x2 = update(x1, g[1], g[2]);
  std::latch step0(2);  // workers 0 and 1 have their version-1 parameters
  std::latch step1(2);  // workers 1 and 2 have their version-2 parameters
  std::vector<std::vector<float>> after0(3), after1(3);
  ParameterServerStats stats;
  const ClusterResult run =
      RunCluster(config, PlainSgd(kLr), initial,
                 [&](int w, ParameterClient& client, Transport&, Model& model) -> Status {
                   std::vector<float> x = model.values[0];
                   if (w == 2) step0.wait();
                   FRUGAL_RETURN_IF_ERROR(Step(client, 0, g[w], x));
                   after0[w] = x;
                   if (w != 2) step0.count_down();
                   if (w == 0) step1.wait();
                   FRUGAL_RETURN_IF_ERROR(Step(client, 1, g[w], x));
                   after1[w] = x;
                   if (w != 0) step1.count_down();
                   if (w != 0) return Status::Ok();
                   FRUGAL_ASSIGN_OR_RETURN(stats, Stats(client));
                   return Status::Ok();
                 });
  ExpectOk(run);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(after0[w], x1) << "worker " << w;
  EXPECT_EQ(after1[1], x2);
  EXPECT_EQ(after1[2], x2);
  EXPECT_EQ(after1[0], x2);  // its late push was dropped; it pulled version 2
  ASSERT_EQ(stats.workers.size(), 3u);
  EXPECT_EQ(stats.workers[0].applied, 1u);
  EXPECT_EQ(stats.workers[0].dropped, 1u);
  EXPECT_EQ(stats.workers[1].applied, 2u);
  EXPECT_EQ(stats.workers[1].dropped, 0u);
  EXPECT_EQ(stats.workers[2].applied, 1u);
  EXPECT_EQ(stats.workers[2].dropped, 1u);
  EXPECT_EQ(run.reports[0].updates, 2u);
  // The servers' totals: every push received (two per worker), the updates applied.
  EXPECT_EQ(stats.pushes, 6u);
  EXPECT_EQ(stats.updates, 2u);
}

// asp, exact staleness: worker 0 pushes three times alone (each on the version it just pulled:
// staleness 0), then worker 1 pushes a gradient computed on version 0: staleness 3.
TEST(ParameterServerAsp, TheServersCountTheStalenessOfEachPush) {
  ParameterServerConfig config = With(PsConsistency::kAsp, 2);
  std::latch ahead(1);
  ParameterServerStats stats;
  const ClusterResult run =
      RunCluster(config, PlainSgd(0.1), OneKey(),
                 [&](int w, ParameterClient& client, Transport&, Model& model) -> Status {
                   std::vector<float> x = model.values[0];
                   if (w == 0) {
                     for (int k = 0; k < 3; ++k) {
                       FRUGAL_RETURN_IF_ERROR(Step(client, k, {1, 1, 1, 1}, x));
                     }
                     ahead.count_down();
                     return Status::Ok();
                   }
                   ahead.wait();
                   FRUGAL_RETURN_IF_ERROR(Step(client, 0, {1, 1, 1, 1}, x));
                   FRUGAL_ASSIGN_OR_RETURN(stats, Stats(client));
                   return Status::Ok();
                 });
  ExpectOk(run);
  ASSERT_EQ(stats.workers.size(), 2u);
  EXPECT_EQ(stats.workers[0].staleness, std::vector<uint64_t>({3}));
  EXPECT_EQ(stats.workers[1].staleness, std::vector<uint64_t>({0, 0, 0, 1}));
  const WorkerPushStats total = stats.Total();
  EXPECT_EQ(total.applied, 4u);
  EXPECT_EQ(stats.pushes, 4u);
  EXPECT_EQ(stats.updates, 4u);
  EXPECT_EQ(total.Quantile(0), 0u);
  EXPECT_EQ(total.Quantile(0.5), 0u);
  EXPECT_EQ(total.Quantile(0.95), 3u);
  EXPECT_EQ(total.Max(), 3u);
  ASSERT_EQ(stats.bytes_in.size(), 1u);
  EXPECT_GT(stats.bytes_in[0], 0u);
  EXPECT_GT(stats.bytes_out[0], 0u);
}

// At the end of an epoch workers rest: a backup update waiting for W - B pushes is applied with
// what the workers that still push sent, and an ssp pull held for a resting worker is answered.
TEST(ParameterServerRest, NothingWaitsForARestingWorker) {
  for (PsConsistency kind : {PsConsistency::kBackup, PsConsistency::kSsp}) {
    ParameterServerConfig config = With(kind, 3);
    config.backup = 1;
    config.staleness = 0;
    std::vector<float> result;
    const ClusterResult run = RunCluster(
        config, PlainSgd(1.0), OneKey(),
        [&](int w, ParameterClient& client, Transport& workers, Model& model) -> Status {
          std::vector<float> x = model.values[0];
          if (w != 0) {
            FRUGAL_RETURN_IF_ERROR(client.Rest()->Wait(kWait));
          }
          // Worker 0 pushes only once the others rest.
          FRUGAL_RETURN_IF_ERROR(
              client.Call("barrier", [](Transport& t) { return Barrier(t, CollectiveOptions{}); })
                  ->Wait(kWait));
          if (w == 0) {
            FRUGAL_RETURN_IF_ERROR(Step(client, 0, {1, 1, 1, 1}, x));
            result = x;
          }
          (void)workers;
          return Status::Ok();
        });
    ExpectOk(run);
    // backup: the one push averaged alone; ssp: applied as 1/W of an update.
    const float scale = kind == PsConsistency::kBackup ? 1.0f : 1.0f / 3.0f;
    const std::vector<float> x0 = OneKey().values[0];
    ASSERT_EQ(result.size(), x0.size());
    for (size_t i = 0; i < x0.size(); ++i) EXPECT_FLOAT_EQ(result[i], x0[i] - scale);
  }
}

}  // namespace
}  // namespace frugal::ps_test
