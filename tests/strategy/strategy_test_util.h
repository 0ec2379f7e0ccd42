// Helpers shared by the strategy layer's tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
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

// The simulated step time in ms (-1 when the simulation fails, which the test reports).
inline double StepMs(const SimOptions& o) {
  auto r = Simulate(o, DefaultCompressorRegistry());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->step_s * 1e3 : -1;
}

}  // namespace frugal::strategy_test
