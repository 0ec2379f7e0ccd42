// The parameter server's time in the cost model against the alpha-beta model worked out by hand
// on small cases: a server's NIC is full duplex, and a key's answers leave only after the key's
// pushes of every worker arrived, so one key's pushes in and its answers out add up. FedAvg
// rounds where a worker plays no sampled client (it pushes a 52-byte header alone), one and two
// servers, several keys on a server in push order, compressed pushes, and dense bsp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/step_cost.h"
#include "frugal/strategy.h"

namespace frugal {
namespace {

constexpr double kAlpha = 1e-4;  // s per message
constexpr double kBeta = 1e-8;   // s per byte (100 MB/s)
constexpr double kHeader = 52;   // a push's or an answer's header

StepCost CostOf(const std::string& arch, const std::string& sync, const std::string& compress,
                const std::vector<CostTensor>& parameters, int workers) {
  StrategyOptions options;
  options.arch = arch;
  options.sync = sync;
  options.compress = compress;
  options.seed = 5;
  StepCostInput in;
  auto plan = PlanStrategy(options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  in.plan = *plan;
  in.parameters = parameters;
  in.workers = workers;
  in.network = CostParams{.alpha = kAlpha, .beta = kBeta, .gamma = 0};
  auto cost = ComputeStepCost(in, DefaultCompressorRegistry());
  EXPECT_TRUE(cost.ok()) << cost.status().ToString();
  return cost.ok() ? *cost : StepCost{};
}

// FedAvg, 3 workers, 2 clients: clients 0 and 1 play on workers 0 and 1, worker 2 pushes the
// key's header alone. One key of 1000 floats (4052 B a message) on one server: the server takes
// in 2 x 4052 + 52 B, then answers every worker, 3 x 4052 B, after the last push arrived.
TEST(StepCostPsTime, FedAvgOneKeyPushesThenAnswers) {
  const StepCost cost = CostOf("ps:servers=1", "fedavg:clients=2,fraction=1,local-steps=1", "",
                               {{"w", 1000, {1000}}}, 3);
  ASSERT_EQ(cost.uploading_workers, 2.0);
  ASSERT_EQ(cost.server_bytes_in.size(), 1u);
  const double message = kHeader + 4 * 1000;
  EXPECT_DOUBLE_EQ(cost.server_bytes_in[0], 2 * message + kHeader);
  EXPECT_DOUBLE_EQ(cost.server_bytes_out[0], 3 * message);
  const double by_hand = 2 * kAlpha + (2 * message + kHeader + 3 * message) * kBeta;
  EXPECT_DOUBLE_EQ(cost.terms.latency_terms, 2);
  EXPECT_DOUBLE_EQ(cost.terms.bandwidth_bytes, 2 * message + kHeader + 3 * message);
  EXPECT_NEAR(cost.seconds, by_hand, 1e-12);
  // Neither the server's one direction (3 x 4052 B) nor every worker's upload assumed
  // (6 x 4052 B).
  EXPECT_GT(cost.seconds, 2 * kAlpha + 3 * message * kBeta + 1e-9);
  EXPECT_LT(cost.seconds, 2 * kAlpha + 6 * message * kBeta - 1e-9);
}

// Two keys on two servers (largest first on the least loaded server): a (3000 floats) on server
// 0, b (1000 floats) on server 1. The busier server decides: 2 x 12052 + 52 in, 3 x 12052 out.
TEST(StepCostPsTime, FedAvgTwoServersTheBusierDecides) {
  const StepCost cost = CostOf("ps:servers=2", "fedavg:clients=2,fraction=1,local-steps=1", "",
                               {{"a", 3000, {3000}}, {"b", 1000, {1000}}}, 3);
  ASSERT_EQ(cost.server_bytes_in.size(), 2u);
  const double a = kHeader + 4 * 3000, b = kHeader + 4 * 1000;
  EXPECT_DOUBLE_EQ(cost.server_bytes_in[0], 2 * a + kHeader);
  EXPECT_DOUBLE_EQ(cost.server_bytes_in[1], 2 * b + kHeader);
  EXPECT_DOUBLE_EQ(cost.terms.bandwidth_bytes, 2 * a + kHeader + 3 * a);
  EXPECT_NEAR(cost.seconds, 2 * kAlpha + (5 * a + kHeader) * kBeta, 1e-12);
}

// Two keys on one server, pushed in order a (3000 floats) then b (1000): a's answers can leave
// while b's pushes arrive. Dense bsp with 2 workers: in and out are 2 x the key's message each
// way, and the last answer leaves at max(in_a + out_a + out_b, in_a + in_b + out_b)
// = 2 (a + b) + 2 a.
TEST(StepCostPsTime, BspKeysOverlapOnTheServer) {
  const StepCost cost =
      CostOf("ps:servers=1", "bsp", "", {{"a", 3000, {3000}}, {"b", 1000, {1000}}}, 2);
  const double a = kHeader + 4 * 3000, b = kHeader + 4 * 1000;
  EXPECT_DOUBLE_EQ(cost.terms.bandwidth_bytes, 2 * (a + b) + 2 * a);
  EXPECT_NEAR(cost.seconds, 2 * kAlpha + (4 * a + 2 * b) * kBeta, 1e-12);
  // The same keys pushed b first: b's answers wait for b's pushes only, a's for everything.
  const StepCost reversed =
      CostOf("ps:servers=1", "bsp", "", {{"b", 1000, {1000}}, {"a", 3000, {3000}}}, 2);
  EXPECT_DOUBLE_EQ(reversed.terms.bandwidth_bytes, 2 * (a + b) + 2 * a);
}

// Compressed pushes (fp16), dense answers, one key, 2 workers: the server takes in 2 pushes and
// sends 2 answers after them; the answers are not counted twice.
TEST(StepCostPsTime, CompressedPushesThenDenseAnswers) {
  const StepCost cost = CostOf("ps:servers=1", "bsp", "fp16", {{"w", 1000, {1000}}}, 2);
  const double push = cost.bytes_per_worker, answer = cost.received_per_worker;
  ASSERT_DOUBLE_EQ(answer, kHeader + 4 * 1000);
  ASSERT_LT(push, answer * 0.6);  // about half: 2 bytes a value
  EXPECT_DOUBLE_EQ(cost.terms.bandwidth_bytes, 2 * push + 2 * answer);
  EXPECT_NEAR(cost.seconds, 2 * kAlpha + (2 * push + 2 * answer) * kBeta, 1e-12);
}

}  // namespace
}  // namespace frugal
