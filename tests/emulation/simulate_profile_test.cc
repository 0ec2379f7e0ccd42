// Per-layer times for the simulator: the table and a hand-made trace of two steps.
#include "simulate_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace frugal::apps {
namespace {

using ::testing::HasSubstr;

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
  auto layers = LayersFromTrace(trace, 0, {"a", "b"}, "t.json");
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 3u);
  // First the optimizer's step (the one "step" span: 3 us), without gradient.
  EXPECT_EQ((*layers)[0].name, kOptimizerLayer);
  EXPECT_NEAR((*layers)[0].forward_s, 3e-6, 1e-12);
  EXPECT_EQ((*layers)[1].name, "a");
  EXPECT_NEAR((*layers)[1].backward_s, 6e-6, 1e-12);
  EXPECT_NEAR((*layers)[2].backward_s, 4e-6, 1e-12);
  EXPECT_NEAR((*layers)[1].forward_s, 6e-6, 1e-12);
  EXPECT_NEAR((*layers)[2].forward_s, 4e-6, 1e-12);
  auto missing = LayersFromTrace(trace, 0, {"a", "c"}, "t.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no gradient of 'c'"));
  EXPECT_FALSE(LayersFromTrace("{}", 0, {"a"}, "t.json").ok());
}

}  // namespace
}  // namespace frugal::apps
