// Weighted pushes (ParameterServerConfig::weighted, FedAvg's aggregation) on one key: the update
// is the sum of the version's pushes over the sum of their weights, an empty push of weight 0
// waits for nobody and adds nothing, and pushes whose weight and values disagree are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "ps/consistency.h"
#include "ps/key_state.h"
#include "ps/ps_test_util.h"

namespace frugal::ps_test {
namespace {

using ps_internal::ConsistencyRules;
using ps_internal::KeyState;
using ps_internal::PushIn;
using ::testing::HasSubstr;

constexpr int kWeightedWorkers = 3;

struct WeightedKey {
  WeightedKey() : config(Weighted()), rules(config) {
    part.name = std::string("w");
    part.count = 4;
    optimizer.lr = [](int64_t) { return 1.0; };
  }
  static ParameterServerConfig Weighted() {
    ParameterServerConfig config = Config(kWeightedWorkers, 1, size_t{1} << 20);
    config.weighted = true;
    return config;
  }
  ps_internal::KeyPart part;
  ParameterServerConfig config;
  ConsistencyRules rules;
  ServerOptimizer optimizer;
  std::vector<char> resting = std::vector<char>(kWeightedWorkers, 0);
  std::vector<WorkerPushStats> stats = std::vector<WorkerPushStats>(kWeightedWorkers);
};

// Worker `worker`'s push of version `version` (its push number `version` of the key).
PushIn Push(int worker, double weight, std::vector<float> values, uint64_t version = 0) {
  PushIn push;
  push.worker = worker;
  push.step = version;
  push.version = version;
  push.weight = weight;
  push.skip = values.empty();
  push.pull_after = true;
  push.gradient = std::move(values);
  return push;
}

TEST(ParameterServerWeighted, DividesTheSumOfThePushesByTheSumOfTheWeights) {
  WeightedKey k;
  KeyState key(k.part, k.config, k.rules, k.optimizer);
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 3.0f};
  key.Initialize(x);
  const std::vector<float> g0 = {0.3f, 0.7f, -1.1f, 2.9f};  // 2 x a client's delta
  const std::vector<float> g2 = {-5.0f, 1.3f, 0.25f, 0.1f};
  ASSERT_TRUE(key.Push(Push(0, 2, g0), k.resting, k.stats).ok());
  ASSERT_TRUE(key.Push(Push(1, 0, {}), k.resting, k.stats).ok());
  EXPECT_EQ(key.version(), 0u) << "worker 2 has not pushed";
  ASSERT_TRUE(key.Push(Push(2, 5, g2), k.resting, k.stats).ok());
  ASSERT_EQ(key.version(), 1u);
  // Serially: (g0 + g2) / 7, applied at rate 1, in float as the server does.
  for (size_t j = 0; j < x.size(); ++j) {
    const float d = (g0[j] + g2[j]) / 7.0f;
    EXPECT_EQ(key.values()[j], x[j] + -1.0f * d) << j;
  }
  EXPECT_EQ(k.stats[0].applied, 1u);
  EXPECT_EQ(k.stats[1].applied, 0u);
  EXPECT_EQ(k.stats[1].skipped, 1u);
  EXPECT_EQ(k.stats[2].applied, 1u);
  // Every worker's pull is answered once, the empty pusher's included.
  EXPECT_EQ(key.TakeReady(k.resting).size(), 3u);

  // The next version: only worker 1 adds something; the weights do not carry over.
  const std::vector<float> before(key.values().begin(), key.values().end());
  const std::vector<float> g1 = {3.0f, 3.0f, -3.0f, 0.0f};
  ASSERT_TRUE(key.Push(Push(0, 0, {}, 1), k.resting, k.stats).ok());
  ASSERT_TRUE(key.Push(Push(1, 3, g1, 1), k.resting, k.stats).ok());
  ASSERT_TRUE(key.Push(Push(2, 0, {}, 1), k.resting, k.stats).ok());
  ASSERT_EQ(key.version(), 2u);
  for (size_t j = 0; j < x.size(); ++j) {
    EXPECT_EQ(key.values()[j], before[j] + -1.0f * (g1[j] / 3.0f)) << j;
  }
}

TEST(ParameterServerWeighted, RefusesWeightsThatDisagreeWithTheValues) {
  struct Case {
    double weight;
    std::vector<float> values;
    bool skip;
    const char* says;
  };
  const std::vector<Case> cases = {
      {0, {1, 2, 3, 4}, false, "with weight 0"},
      {2, {}, true, "with weight 2 and no values"},
      {-1, {1, 2, 3, 4}, false, "with weight -1"},
      {std::numeric_limits<double>::infinity(), {1, 2, 3, 4}, false, "with weight inf"},
  };
  for (const Case& c : cases) {
    WeightedKey k;
    KeyState key(k.part, k.config, k.rules, k.optimizer);
    key.Initialize(std::vector<float>(4, 0.0f));
    PushIn push = Push(0, c.weight, c.values);
    push.skip = c.skip;
    const Status status = key.Push(std::move(push), k.resting, k.stats);
    EXPECT_EQ(status.code(), StatusCode::kMalformed) << c.says;
    EXPECT_THAT(status.message(), HasSubstr(c.says));
  }
  // Without weighted pushes an empty push is still refused outside lag.
  WeightedKey k;
  k.config.weighted = false;
  KeyState key(k.part, k.config, k.rules, k.optimizer);
  key.Initialize(std::vector<float>(4, 0.0f));
  EXPECT_THAT(key.Push(Push(0, 0, {}), k.resting, k.stats).message(),
              HasSubstr("a skipped push of key 'w' outside lag"));
}

}  // namespace
}  // namespace frugal::ps_test
