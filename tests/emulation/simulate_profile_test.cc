// Per-layer times for the simulator: the table and a hand-made trace of two steps.
#include "simulate_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace frugal::apps {
namespace {

using ::testing::HasSubstr;

// The layers read from a trace: the optimizer's step first, then `names` with their forward and
// backward times (us).
void ExpectLayers(const StatusOr<std::vector<ProfiledLayer>>& layers, double optimizer_us,
                  const std::vector<std::string>& names, const std::vector<double>& forward_us,
                  const std::vector<double>& backward_us) {
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), names.size() + 1);
  EXPECT_EQ((*layers)[0].name, kOptimizerLayer);
  EXPECT_NEAR((*layers)[0].forward_s, optimizer_us * 1e-6, 1e-12);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ((*layers)[i + 1].name, names[i]);
    EXPECT_NEAR((*layers)[i + 1].forward_s, forward_us[i] * 1e-6, 1e-12) << names[i];
    EXPECT_NEAR((*layers)[i + 1].backward_s, backward_us[i] * 1e-6, 1e-12) << names[i];
  }
}

TEST(LayerTable, ReadsLinesAndRefusesBadOnes) {
  auto layers = ParseLayerTable(
      "# name,floats,forward_ms,backward_ms\nfc1,100,1.5,3\nfc2,10,0.5,1\n", "t.csv");
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 2u);
  EXPECT_EQ((*layers)[0].name, "fc1");
  EXPECT_EQ((*layers)[0].floats, 100u);
  EXPECT_DOUBLE_EQ((*layers)[0].forward_s, 1.5e-3);
  EXPECT_DOUBLE_EQ((*layers)[1].backward_s, 1e-3);
  auto bad = ParseLayerTable("fc1,100,1.5\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("t.csv:1: expected name,floats"));
  EXPECT_FALSE(ParseLayerTable("fc1,x,1,1\n", "t.csv").ok());
  EXPECT_FALSE(ParseLayerTable("# only a comment\n", "t.csv").ok());
}

// Rank 0, two steps (the first is skipped): step 2's backward 1000-1010 us, gradient of b ready
// at 1004 (4 us), of a at 1010 (6 us); forward 990-1000 (10 us), split 4:6; the optimizer's
// step 3 us.
TEST(LayerTrace, BackwardFromReadyTimesForwardSplitInProportion) {
  const char* trace = R"({"traceEvents":[
    {"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"tensor b"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":2,"args":{"name":"tensor a"}},
    {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"compute"}},
    {"name":"forward","ph":"X","pid":0,"tid":0,"ts":0,"dur":50},
    {"name":"backward","ph":"X","pid":0,"tid":0,"ts":50,"dur":100},
    {"name":"queue","ph":"X","pid":0,"tid":1,"ts":60,"dur":1},
    {"name":"queue","ph":"X","pid":0,"tid":2,"ts":150,"dur":1},
    {"name":"forward","ph":"X","pid":0,"tid":0,"ts":990,"dur":10},
    {"name":"backward","ph":"X","pid":0,"tid":0,"ts":1000,"dur":10},
    {"name":"queue","ph":"X","pid":0,"tid":1,"ts":1004,"dur":1},
    {"name":"queue","ph":"X","pid":0,"tid":2,"ts":1010,"dur":1},
    {"name":"step","ph":"X","pid":0,"tid":0,"ts":1012,"dur":3},
    {"name":"forward","ph":"X","pid":1,"tid":0,"ts":0,"dur":5000}
  ],"displayTimeUnit":"ms"})";
  // First the optimizer's step (the one "step" span: 3 us), without gradient.
  ExpectLayers(LayersFromTrace(trace, 0, {"a", "b"}, "t.json"), 3, {"a", "b"}, {6, 4}, {6, 4});
  auto missing = LayersFromTrace(trace, 0, {"a", "c"}, "t.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no gradient of 'c'"));
  EXPECT_FALSE(LayersFromTrace("{}", 0, {"a"}, "t.json").ok());
}

// A gossip run keeps its gradients: its trace marks each one "ready" (a zero-length span) where
// an all-reduce run's has the "queue" span of its submission; the profile is read the same way.
// Backward 100-130 us, a ready at 110 (10 us) and b at 130 (20 us); forward 60-100 (40 us),
// split 1:2.
TEST(LayerTrace, ReadyMarksOfKeptGradientsGiveTheBackward) {
  const char* trace = R"({"traceEvents":[
    {"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"tensor a"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":2,"args":{"name":"tensor b"}},
    {"name":"forward","ph":"X","pid":0,"tid":0,"ts":60,"dur":40},
    {"name":"backward","ph":"X","pid":0,"tid":0,"ts":100,"dur":30},
    {"name":"ready","ph":"X","pid":0,"tid":1,"ts":110,"dur":0},
    {"name":"ready","ph":"X","pid":0,"tid":2,"ts":130,"dur":0},
    {"name":"step","ph":"X","pid":0,"tid":0,"ts":131,"dur":5}
  ],"displayTimeUnit":"ms"})";
  ExpectLayers(LayersFromTrace(trace, 0, {"b", "a"}, "t.json"), 5, {"b", "a"},
               {40.0 * 2 / 3, 40.0 / 3}, {20, 10});
}

// The events of one step of rank `pid` from time 0 (us): forward for `forward`, backward for
// `backward` with tensor a ready at its middle and b at its end, then the optimizer's step.
// `at` shifts the step (the rows are named again; a reader takes the last name).
std::string OneStep(int pid, int forward, int backward, int step, int at = 0) {
  const std::string p = std::to_string(pid);
  auto span = [&p, at](const std::string& name, int tid, int ts, int dur) {
    return R"({"name":")" + name + R"(","ph":"X","pid":)" + p + R"(,"tid":)" + std::to_string(tid) +
           R"(,"ts":)" + std::to_string(at + ts) + R"(,"dur":)" + std::to_string(dur) + "},";
  };
  auto row = [&p](int tid, const std::string& name) {
    return R"({"name":"thread_name","ph":"M","pid":)" + p + R"(,"tid":)" + std::to_string(tid) +
           R"(,"args":{"name":")" + name + R"("}},)";
  };
  return row(0, "compute") + row(1, "tensor a") + row(2, "tensor b") +
         span("forward", 0, 0, forward) + span("backward", 0, forward, backward) +
         span("ready", 1, forward + backward / 2, 0) + span("ready", 2, forward + backward, 0) +
         span("step", 0, forward + backward + 1, step);
}

// Rank 0: forward 10 us, backward 10 (5 and 5), step 2; rank 1: forward 30, backward 20 (10 and
// 10), step 1. The slowest is rank 1 (51 us against 22).
TEST(LayerTrace, SlowestRankHasTheLargestCompute) {
  std::string trace = R"({"traceEvents":[)" + OneStep(0, 10, 10, 2) + OneStep(1, 30, 20, 1);
  trace.back() = ']';
  trace += "}";
  ExpectLayers(LayersFromTrace(trace, 0, {"b", "a"}, "t.json"), 2, {"b", "a"}, {5, 5}, {5, 5});
  ExpectLayers(LayersFromTrace(trace, kSlowestRank, {"b", "a"}, "t.json"), 1, {"b", "a"}, {15, 15},
               {10, 10});
  auto none = LayersFromTrace(R"({"traceEvents":[]})", kSlowestRank, {"a"}, "t.json");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("no rank has a compute row"));
}

// Ranks in lock step wait each step for the slowest of that step. Three steps (the first is
// skipped): rank 0 takes 51 us in step 1 and 22 in step 2, rank 1 the other way round, so each
// rank's median step is 37 us (forward 20, a and b 7.5 each, optimizer 2) while every step
// waits 51: the lockstep profile is the slowest rank's scaled by 51 / 37. When one rank is the
// slowest in every step, lockstep is that rank's profile.
TEST(LayerTrace, LockstepWaitsForEachStepsSlowest) {
  auto total = [](const std::vector<ProfiledLayer>& layers) {
    double t = 0;
    for (const ProfiledLayer& l : layers) t += l.forward_s + l.backward_s;
    return t;
  };
  std::string alternating = R"({"traceEvents":[)" + OneStep(0, 10, 10, 2, 0) +
                            OneStep(0, 30, 20, 1, 1000) + OneStep(0, 10, 10, 2, 2000) +
                            OneStep(1, 10, 10, 2, 0) + OneStep(1, 10, 10, 2, 1000) +
                            OneStep(1, 30, 20, 1, 2000);
  alternating.back() = ']';
  alternating += "}";
  auto slowest = LayersFromTrace(alternating, kSlowestRank, {"b", "a"}, "t.json");
  auto lockstep = LayersFromTrace(alternating, kLockstepRank, {"b", "a"}, "t.json");
  ASSERT_TRUE(slowest.ok() && lockstep.ok());
  EXPECT_NEAR(total(*slowest), 37e-6, 1e-12);
  EXPECT_NEAR(total(*lockstep), 51e-6, 1e-12);
  ASSERT_EQ(lockstep->size(), slowest->size());
  for (size_t k = 0; k < slowest->size(); ++k) {
    EXPECT_EQ((*lockstep)[k].name, (*slowest)[k].name);
    EXPECT_NEAR((*lockstep)[k].forward_s, (*slowest)[k].forward_s * 51 / 37, 1e-12);
    EXPECT_NEAR((*lockstep)[k].backward_s, (*slowest)[k].backward_s * 51 / 37, 1e-12);
  }
  std::string steady = R"({"traceEvents":[)" + OneStep(0, 10, 10, 2, 0) +
                       OneStep(0, 10, 10, 2, 1000) + OneStep(1, 30, 20, 1, 0) +
                       OneStep(1, 30, 20, 1, 1000);
  steady.back() = ']';
  steady += "}";
  auto steady_lockstep = LayersFromTrace(steady, kLockstepRank, {"b", "a"}, "t.json");
  ASSERT_TRUE(steady_lockstep.ok());
  EXPECT_NEAR(total(*steady_lockstep), 51e-6, 1e-12);
}

}  // namespace
}  // namespace frugal::apps
