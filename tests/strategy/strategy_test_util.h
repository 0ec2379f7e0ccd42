// Helpers shared by the strategy layer's tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/simulate.h"
#include "frugal/status.h"
#include "frugal/strategy.h"

namespace frugal::strategy_test {

inline void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

// The plan of `--sync sync --compress compress --seed seed` with a 30 s timeout.
inline StrategyPlan Plan(const std::string& sync, const std::string& compress = "",
                         uint64_t seed = 0) {
  StrategyOptions options;
  options.sync = sync;
  options.compress = compress;
  options.seed = seed;
  options.timeout = std::chrono::seconds(30);
  StatusOr<StrategyPlan> plan = PlanStrategy(options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.value();
}

// A model of two parameters and one buffer whose values are set per rank.
struct RankModel {
  std::vector<float> a;
  std::vector<float> b;
  std::vector<float> stats;
  std::vector<float> momentum;
  ModelBuffers View() {
    ModelBuffers m;
    m.parameters = {{"a", a}, {"b", b}};
    m.buffers = {{"bn.running_mean", stats}};
    m.momenta = {{"a/momentum", momentum}};
    return m;
  }
};

// Above the compressed reducer's 64 KB minimum, so that compressors see it.
inline constexpr size_t kA = 20000;

inline RankModel ModelOfRank(int rank) {
  RankModel m;
  m.a.assign(kA, static_cast<float>(rank));
  m.b.assign(7, static_cast<float>(2 * rank));
  m.stats.assign(3, static_cast<float>(10 * rank));
  m.momentum.assign(kA, static_cast<float>(rank));
  return m;
}

// A strategy of `plan` on `t` (steps of epochs of 10) with its reducer, begun on `model`.
struct BegunStrategy {
  std::unique_ptr<GradientReducer> reducer;  // outlives the strategy: declared first
  std::unique_ptr<Strategy> strategy;
};
inline StatusOr<BegunStrategy> BeginStrategy(const StrategyPlan& plan, Transport& t,
                                             ModelBuffers model) {
  BegunStrategy begun;
  FRUGAL_ASSIGN_OR_RETURN(begun.reducer,
                          MakeStrategyReducer(plan, t, 10, DefaultCompressorRegistry()));
  FRUGAL_ASSIGN_OR_RETURN(begun.strategy, MakeStrategy(plan, t, *begun.reducer));
  FRUGAL_RETURN_IF_ERROR(begun.strategy->Begin(model));
  return begun;
}

// Every rank begins the strategy on rank 0's model, then its model drifts to its own values:
// `m` ends as ModelOfRank(t.rank()).
inline StatusOr<BegunStrategy> BeginDrifted(const StrategyPlan& plan, Transport& t, RankModel& m) {
  m = ModelOfRank(0);
  FRUGAL_ASSIGN_OR_RETURN(BegunStrategy begun, BeginStrategy(plan, t, m.View()));
  m = ModelOfRank(t.rank());
  return begun;
}

// The simulated step time in ms (-1 when the simulation fails, which the test reports).
inline double StepMs(const SimOptions& o) {
  auto r = Simulate(o, DefaultCompressorRegistry());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->step_s * 1e3 : -1;
}

}  // namespace frugal::strategy_test
