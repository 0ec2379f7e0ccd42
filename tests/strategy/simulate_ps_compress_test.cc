// The step simulator's compressed parameter server: a schedule of one key on one server worked
// out by hand (fp16 pushes and answers of known size, encode and decode rates of known time), and
// on a model of several keys the servers' NIC times against the bytes of the cost model
// (`frugal cost`): top-k 1% pushes shrink the inbound time by exactly the cost model's ratio of
// the bytes in and leave the outbound alone; compressed answers shrink the outbound by the ratio
// of the bytes out. What the byte model cannot bound is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frugal/simulate.h"
#include "frugal/step_cost.h"
#include "frugal/strategy.h"

namespace frugal {
namespace {

// One layer of 1000 floats, forward 1 ms and backward 2 ms; 1e6 bytes/s NICs, no latency, two
// workers, one server.
SimOptions OneKey() {
  SimOptions o;
  o.layers = {SimLayer{"a", 1000, {}, 1e-3, 2e-3}};
  o.workers = 2;
  o.overlap = SimOverlap::kWfbp;
  o.network.alpha_s = 0;
  o.network.nic_bytes_per_s = 1e6;
  o.steps = 3;
  o.arch = ParseArchSpec("ps:servers=1").value();
  return o;
}

SimResult Simulated(const SimOptions& o) {
  auto r = Simulate(o, DefaultCompressorRegistry());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : SimResult{};
}

TEST(SimulatePsCompress, OneKeyByHand) {
  // Dense: messages of 52 + 4000 bytes, 4.052 ms each through a NIC.
  SimOptions o = OneKey();
  SimResult dense = Simulated(o);
  EXPECT_NEAR(dense.step_s * 1e3, 3 + 2 * 4.052 + 2 * 4.052, 1e-9);
  // fp16 pushes: 52 + 32 + 2000 = 2084 bytes. Encoding the key's 4000 bytes at 4e6 bytes/s takes
  // 1 ms on the worker, decoding one push at 8e6 bytes/s 0.5 ms on the server, less than a push
  // takes to arrive (2.084 ms), so only the last push's decoding adds: compute 3, encode 1, the
  // two pushes into the server 4.168, the last decode 0.5, the two dense answers out 8.104.
  o.push_compress = "fp16";
  o.encode_bytes_per_s = 4e6;
  o.decode_bytes_per_s = 8e6;
  SimResult push = Simulated(o);
  EXPECT_NEAR(push.step_s * 1e3, 3 + 1 + 4.168 + 0.5 + 8.104, 1e-9);
  EXPECT_NEAR(push.comm_busy_s * 1e3, 4.168, 1e-9);
  EXPECT_NEAR(push.server_out_busy_s * 1e3, 8.104, 1e-9);
  // fp16 answers too, encoded once on the server (1 ms at 4e6 bytes/s) and decoded on the worker
  // (0.5 ms at 8e6 bytes/s): the two answers out take 4.168 ms.
  o.pull_compress = "fp16";
  o.pull_encode_bytes_per_s = 4e6;
  o.pull_decode_bytes_per_s = 8e6;
  SimResult both = Simulated(o);
  EXPECT_NEAR(both.step_s * 1e3, 3 + 1 + 4.168 + 0.5 + 1 + 4.168 + 0.5, 1e-9);
  EXPECT_NEAR(both.server_out_busy_s * 1e3, 4.168, 1e-9);
  // Decoding slower than the pushes arrive (1e6 bytes/s: 4 ms a push): the pushes are in at 6.084
  // and 8.168 ms, decoded one after the other from 6.084 to 14.084 ms.
  o.pull_compress.clear();
  o.decode_bytes_per_s = 1e6;
  EXPECT_NEAR(Simulated(o).step_s * 1e3, 14.084 + 8.104, 1e-9);
  // Without rates compression takes no time: the bytes alone.
  o.encode_bytes_per_s = o.decode_bytes_per_s = 0;
  EXPECT_NEAR(Simulated(o).step_s * 1e3, 3 + 4.168 + 8.104, 1e-9);
}

// A model of four tensors, from a bias to one of 409600 floats (cnn's largest: 1.6 MB, one key
// under the default shard-mb=4), on 4 workers.
std::vector<SimLayer> Model() {
  return {SimLayer{"conv1.weight", 800, {}, 2e-3, 4e-3}, SimLayer{"conv1.bias", 32, {}, 0, 0},
          SimLayer{"fc1.weight", 409600, {}, 3e-3, 6e-3},
          SimLayer{"fc2.weight", 5120, {}, 1e-3, 2e-3}};
}

// The cost model's bytes into and out of the one server per step.
std::pair<double, double> ServerBytes(const std::string& push, const std::string& pull) {
  StrategyOptions options;
  options.arch = "ps:servers=1";
  options.compress = push;
  options.compress_pull = pull;
  auto plan = PlanStrategy(options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  StepCostInput in;
  in.plan = *plan;
  for (const SimLayer& l : Model()) in.parameters.push_back(CostTensor{l.name, l.floats, {}});
  in.workers = 4;
  auto cost = ComputeStepCost(in, DefaultCompressorRegistry());
  EXPECT_TRUE(cost.ok()) << cost.status().ToString();
  if (!cost.ok()) return {0, 0};
  return {cost->server_bytes_in.at(0), cost->server_bytes_out.at(0)};
}

SimResult RunModel(const std::string& push, const std::string& pull) {
  SimOptions o;
  o.layers = Model();
  o.workers = 4;
  o.network.alpha_s = 0;
  o.network.nic_bytes_per_s = 12.5e6;  // 100 Mbit/s
  o.steps = 4;
  o.arch = ParseArchSpec("ps:servers=1").value();
  o.push_compress = push;
  o.pull_compress = pull;
  return Simulated(o);
}

TEST(SimulatePsCompress, TopkPushesShrinkTheServersInboundByTheCostModelsRatio) {
  const double b = 12.5e6;
  const auto [dense_in, dense_out] = ServerBytes("", "");
  const auto [topk_in, topk_out] = ServerBytes("topk:ratio=0.01", "");
  ASSERT_GT(dense_in, 0);
  ASSERT_LT(topk_in, dense_in / 20);  // 1% of the floats, with their indices and headers
  EXPECT_DOUBLE_EQ(topk_out, dense_out);
  const SimResult dense = RunModel("", "");
  const SimResult topk = RunModel("topk:ratio=0.01", "");
  // Without latency a server's NIC is busy exactly its bytes over the rate, each direction.
  EXPECT_NEAR(dense.comm_busy_s * b, dense_in, 1e-6 * dense_in);
  EXPECT_NEAR(dense.server_out_busy_s * b, dense_out, 1e-6 * dense_out);
  EXPECT_NEAR(topk.comm_busy_s * b, topk_in, 1e-6 * topk_in);
  EXPECT_NEAR(topk.comm_busy_s / dense.comm_busy_s, topk_in / dense_in, 1e-9);
  EXPECT_NEAR(topk.server_out_busy_s, dense.server_out_busy_s, 1e-12);
  // The dense answers still leave after the last push: the step shrinks by less than the pushes.
  EXPECT_LT(topk.step_s, dense.step_s);
  EXPECT_GT(topk.step_s, dense.step_s - dense.comm_busy_s);
}

TEST(SimulatePsCompress, CompressedAnswersShrinkBothDirections) {
  const double b = 12.5e6;
  const auto [dense_in, dense_out] = ServerBytes("", "");
  const auto [in, out] = ServerBytes("topk:ratio=0.01", "topk:ratio=0.01");
  ASSERT_LT(out, dense_out / 20);
  const SimResult dense = RunModel("", "");
  const SimResult push = RunModel("topk:ratio=0.01", "");
  const SimResult both = RunModel("topk:ratio=0.01", "topk:ratio=0.01");
  EXPECT_NEAR(both.comm_busy_s * b, in, 1e-6 * in);
  EXPECT_NEAR(both.server_out_busy_s * b, out, 1e-6 * out);
  EXPECT_NEAR(both.server_out_busy_s / dense.server_out_busy_s, out / dense_out, 1e-9);
  EXPECT_LT(both.step_s, push.step_s);
  // Both directions compressed, the step is the compute and little more: 18 ms of compute, the
  // server's bytes in and out (each under 1/20 of the dense ones) and the worker's NIC.
  EXPECT_LT(both.step_s - both.compute_s, 0.1 * (dense.step_s - dense.compute_s));
}

TEST(SimulatePsCompress, RefusesWhatTheByteModelCannotBound) {
  SimOptions o = OneKey();
  o.push_compress = "threshold:tau=0.001";  // a payload of as many entries as pass the threshold
  auto r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("frugal simulate: --compress threshold", 0), 0u)
      << r.status().message();
  // A compressor that combines all ranks' payloads does not run over a parameter server at all.
  o.push_compress.clear();
  o.pull_compress = "gtopk:ratio=0.01";
  r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--compress-pull gtopk"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace frugal
