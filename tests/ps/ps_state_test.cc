// The parameter server's state from one step to the next, saved and restored: a key on its server
// (KeyState) under bsp with momentum and a learning-rate schedule, mid-version, and under ssp with
// workers at different clocks; LAG's worker-side rule. A restored copy, given the same pushes as
// the original, must end with the same bits, and a checkpoint of another key is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ps/consistency.h"
#include "ps/key_state.h"
#include "ps/lag_rule.h"
#include "ps/ps_test_util.h"

namespace frugal::ps_test {
namespace {

using ps_internal::ConsistencyRules;
using ps_internal::KeyState;
using ps_internal::LagKeyRule;
using ps_internal::PushIn;
using ::testing::HasSubstr;

constexpr int kStateWorkers = 3;

ParameterServerConfig ConfigOf(PsConsistency kind) {
  ParameterServerConfig config = Config(kStateWorkers, 1, size_t{1} << 20);
  config.consistency = kind;
  config.staleness = 2;
  return config;
}

// A key of `count` floats, and everything a KeyState refers to.
struct KeyFixture {
  explicit KeyFixture(PsConsistency kind, size_t count = 5)
      : config(ConfigOf(kind)), rules(config) {
    part.name = std::string("w");
    part.count = count;
    optimizer.lr = [](int64_t step) { return 0.1 / (1.0 + static_cast<double>(step)); };
    optimizer.momentum = 0.9;
    optimizer.weight_decay = 0.01;
    optimizer.nesterov = true;
  }
  KeyState Make() const { return KeyState(part, config, rules, optimizer); }

  ps_internal::KeyPart part;
  ParameterServerConfig config;
  ConsistencyRules rules;
  ServerOptimizer optimizer;
};

// Worker w's gradient for its push number `step`, computed on `version`.
PushIn Gradient(int w, uint64_t step, uint64_t version, size_t count = 5) {
  PushIn push;
  push.worker = w;
  push.step = step;
  push.version = version;
  for (size_t j = 0; j < count; ++j) {
    push.gradient.push_back(0.37f * static_cast<float>(w + 1) - 0.11f * static_cast<float>(j) +
                            0.013f * static_cast<float>(step * step));
  }
  return push;
}

struct Pushes {
  const std::vector<char> resting = std::vector<char>(kStateWorkers, 0);
  std::vector<WorkerPushStats> stats = std::vector<WorkerPushStats>(kStateWorkers);
};

StateRecords Save(KeyState& key) {
  StateSaver saver;
  key.VisitState(saver);
  EXPECT_TRUE(saver.ok()) << saver.status().ToString();
  return saver.records();
}

Status Load(KeyState& key, const StateRecords& records) {
  StateLoader loader(records);
  key.VisitState(loader);
  return loader.Finish();
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// bsp: two versions, then workers 0 and 1 push version 2 (kept in their slots); the restored key
// and the original take worker 2's push and a whole version 3.
TEST(PsState, ABspKeyRestoredMidVersionEndsWithTheSameBits) {
  const KeyFixture f(PsConsistency::kBsp);
  KeyState original = f.Make();
  original.Initialize({1.0f, -2.0f, 0.5f, 3.0f, 0.25f});
  Pushes p;
  for (uint64_t v = 0; v < 2; ++v) {
    for (int w = 0; w < kStateWorkers; ++w)
      ASSERT_TRUE(original.Push(Gradient(w, v, v), p.resting, p.stats).ok());
  }
  for (int w : {0, 1}) ASSERT_TRUE(original.Push(Gradient(w, 2, 2), p.resting, p.stats).ok());
  ASSERT_EQ(original.version(), 2u);
  const StateRecords records = Save(original);

  KeyState restored = f.Make();
  ASSERT_TRUE(Load(restored, records).ok());
  EXPECT_TRUE(restored.initialized());
  KeyState fresh = f.Make();  // the same parameters, without the rest of the state
  fresh.Initialize(std::vector<float>(original.values().begin(), original.values().end()));

  Pushes q, r;
  for (KeyState* key : {&original, &restored}) {
    Pushes& s = key == &original ? q : r;
    ASSERT_TRUE(key->Push(Gradient(2, 2, 2), s.resting, s.stats).ok());
    for (int w = 0; w < kStateWorkers; ++w)
      ASSERT_TRUE(key->Push(Gradient(w, 3, 3), s.resting, s.stats).ok());
  }
  EXPECT_EQ(restored.version(), 4u);
  EXPECT_EQ(restored.progress(), original.progress());
  EXPECT_TRUE(SameBits(restored.values(), original.values()));

  // Without the saved state the next push is refused (its step is not the worker's clock).
  Pushes t;
  EXPECT_EQ(fresh.Push(Gradient(2, 2, 2), t.resting, t.stats).code(), StatusCode::kMalformed);
}

// ssp: pushes applied alone, workers at clocks 3, 2 and 1; after the restore the pushes go on,
// and a pull of worker 0 waits for the same workers.
TEST(PsState, AnSspKeyRestoredWithUnevenClocksEndsWithTheSameBits) {
  const KeyFixture f(PsConsistency::kSsp);
  KeyState original = f.Make();
  original.Initialize({0.5f, 0.5f, -1.0f, 2.0f, 1.5f});
  Pushes p;
  for (int w = 0; w < kStateWorkers; ++w) {
    for (uint64_t step = 0; step < static_cast<uint64_t>(kStateWorkers - w); ++step) {
      ASSERT_TRUE(original
                      .Push(Gradient(w, step, original.version() > 0 ? original.version() - 1 : 0),
                            p.resting, p.stats)
                      .ok());
    }
  }
  KeyState restored = f.Make();
  ASSERT_TRUE(Load(restored, Save(original)).ok());

  Pushes q, r;
  for (KeyState* key : {&original, &restored}) {
    Pushes& s = key == &original ? q : r;
    PushIn last = Gradient(2, 1, 4);
    ASSERT_TRUE(key->Push(Gradient(1, 2, 3), s.resting, s.stats).ok());
    ASSERT_TRUE(key->Push(std::move(last), s.resting, s.stats).ok());
    PushIn with_pull = Gradient(0, 3, 5);
    with_pull.pull_after = true;
    ASSERT_TRUE(key->Push(std::move(with_pull), s.resting, s.stats).ok());
  }
  EXPECT_TRUE(SameBits(restored.values(), original.values()));
  EXPECT_EQ(restored.version(), original.version());
  ASSERT_EQ(restored.held().size(), 1u);
  ASSERT_EQ(original.held().size(), 1u);
  EXPECT_EQ(restored.Blocking(restored.held()[0], r.resting),
            original.Blocking(original.held()[0], q.resting));
  EXPECT_EQ(r.stats[0].staleness, q.stats[0].staleness);
}

// A key of another size, or a server with other workers, refuses the checkpoint naming the field.
TEST(PsState, AKeyOfAnotherSizeRefusesTheCheckpoint) {
  const KeyFixture f(PsConsistency::kBsp);
  KeyState original = f.Make();
  original.Initialize({1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  const StateRecords records = Save(original);
  const KeyFixture other(PsConsistency::kBsp, 4);
  KeyState smaller = other.Make();
  const Status status = Load(smaller, records);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("5 values, the key has 4"));
  EXPECT_FALSE(smaller.initialized());
}

// LAG's rule: the uploads and skips after a restore are those of the rule that was never saved.
TEST(PsState, ALagRuleRestoredDecidesAsTheOriginal) {
  LagOptions options;
  options.xi = 50;
  options.window = 3;
  options.max_skip = 6;
  LagKeyRule original(options);
  auto gradient = [](int i) {
    return std::vector<float>{1.0f + 0.01f * static_cast<float>(i), -0.5f, 0.2f * (i % 3)};
  };
  for (int i = 0; i < 5; ++i) {
    original.Decide(gradient(i));
    original.Heard(0.1 * (i + 1));
  }
  StateSaver saver;
  original.VisitState(saver);
  LagKeyRule restored(options);
  StateLoader loader(saver.records());
  restored.VisitState(loader);
  ASSERT_TRUE(loader.Finish().ok()) << loader.Finish().ToString();
  LagKeyRule fresh(options);
  std::vector<bool> a, b, c;
  for (int i = 5; i < 15; ++i) {
    a.push_back(original.Decide(gradient(i)));
    b.push_back(restored.Decide(gradient(i)));
    c.push_back(fresh.Decide(gradient(i)));
    for (LagKeyRule* rule : {&original, &restored, &fresh}) rule->Heard(0.1 * (i + 1));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c) << "the test does not depend on the saved state";
  EXPECT_EQ(restored.threshold(), original.threshold());
}

}  // namespace
}  // namespace frugal::ps_test
