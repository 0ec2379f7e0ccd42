// The step simulator against hand-computed schedules: compute alone, no overlap, wait-free
// backprop against priority scheduling (which lets the next forward start earlier), fusion,
// stragglers, the compressed unit's time, and the ring's bandwidth on hosts and racks.
#include "frugal/simulate.h"

#include <gtest/gtest.h>

#include "frugal/compress_wire.h"
#include "strategy/strategy_test_util.h"

namespace frugal {
namespace {

// Layers of `floats` gradient elements with forward and backward times in ms.
SimLayer Layer(const char* name, size_t floats, double forward_ms, double backward_ms) {
  return SimLayer{name, floats, {}, forward_ms / 1e3, backward_ms / 1e3};
}

SimOptions Options(std::vector<SimLayer> layers, int workers, SimOverlap overlap) {
  SimOptions o;
  o.layers = std::move(layers);
  o.workers = workers;
  o.overlap = overlap;
  o.network.alpha_s = 0;
  // Workers on separate hosts, 1e6 bytes/s NICs.
  o.network.nic_bytes_per_s = 1e6;
  o.network.ranks_per_host = 1;
  o.steps = 3;
  return o;
}

using strategy_test::StepMs;

TEST(Simulate, OneWorkerIsItsCompute) {
  SimOptions o = Options({Layer("a", 1000, 1, 2), Layer("b", 3000, 1, 1)}, 1, SimOverlap::kWfbp);
  auto r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->step_s, 0.005, 1e-12);
  EXPECT_NEAR(r->scaling_efficiency, 1.0, 1e-12);
  EXPECT_NEAR(r->comm_share, 0.0, 1e-12);
}

TEST(Simulate, NoOverlapAddsTheRingOfTheWholeModel) {
  // 4 workers: ring of N bytes = 2 x 3 x (N / 4) / 1e6 s; N = 16000: 24 ms after 5 ms compute.
  SimOptions o = Options({Layer("a", 1000, 1, 2), Layer("b", 3000, 1, 1)}, 4, SimOverlap::kNone);
  EXPECT_NEAR(StepMs(o), 29.0, 1e-9);
  auto r = Simulate(o, DefaultCompressorRegistry());
  EXPECT_NEAR(r->comm_share, 24.0 / 29.0, 1e-9);
  EXPECT_NEAR(r->scaling_efficiency, 5.0 / 29.0, 1e-9);
}

// Three layers, 2 workers (ring of N bytes = N / 1e6 s): gradients of 2000, 4000 and 10000
// bytes, every forward and backward 1 ms. Step 0: forward 0-3, gradients ready at 4 (layer 2),
// 5 (layer 1), 6 (layer 0); layer 2 occupies the channel 4-14.
//  - wfbp: layer 1 14-18, layer 0 18-20; the next step starts at 20: steps of 20 ms.
//  - priority: layer 0 14-16, layer 1 16-20; step 1's forward of layer 0 may start at 16 but
//    layer 1 waits for 20: forward 16-17, 20-21, 21-22, gradients at 23, 24, 25; channel 23-33
//    (layer 2), 33-35 (layer 0), 35-39: steps end at 20, 39, 58: 19 ms.
TEST(Simulate, PriorityLetsTheNextForwardStartEarlierThanWfbp) {
  std::vector<SimLayer> layers = {Layer("l0", 500, 1, 1), Layer("l1", 1000, 1, 1),
                                  Layer("l2", 2500, 1, 1)};
  EXPECT_NEAR(StepMs(Options(layers, 2, SimOverlap::kWfbp)), 20.0, 1e-9);
  EXPECT_NEAR(StepMs(Options(layers, 2, SimOverlap::kPriority)), 19.0, 1e-9);
  // Fusion: layer 2 alone (4-14), then layers 1 and 0 together (6000 bytes, 14-20): 20 ms; with
  // a latency of 1 ms per message it saves the latency terms of one message (2 (n - 1) alpha).
  EXPECT_NEAR(StepMs(Options(layers, 2, SimOverlap::kFusion)), 20.0, 1e-9);
  SimOptions wfbp = Options(layers, 2, SimOverlap::kWfbp);
  SimOptions fusion = Options(layers, 2, SimOverlap::kFusion);
  wfbp.network.alpha_s = fusion.network.alpha_s = 1e-3;
  EXPECT_NEAR(StepMs(wfbp) - StepMs(fusion), 2.0, 1e-9);
}

TEST(Simulate, AStragglerSlowsEveryStep) {
  SimOptions o = Options({Layer("a", 1000, 1, 2), Layer("b", 3000, 1, 1)}, 4, SimOverlap::kNone);
  o.straggler_factor = 3;
  EXPECT_NEAR(StepMs(o), 15.0 + 24.0, 1e-9);
  o.straggler_factor = 0.5;
  EXPECT_FALSE(Simulate(o, DefaultCompressorRegistry()).ok());
}

// Two layers, 2 workers (ring of N bytes = N / 1e6 s): gradients of 4000 bytes each (4 ms),
// every forward and backward 5 ms. Forward 0-10, layer 1 ready at 15 and on the channel 15-19.
//  - contention 1: layer 0's backward 15-20, its unit 20-24; steps of 24 ms.
//  - contention 2: layer 0's backward runs at half speed while layer 1 moves (15-19: 2 ms of
//    its 5), the other 3 ms at full speed after: ready at 22, on the channel 22-26; 26 ms.
//  - priority, contention 2: step 1's forward of layer 0 waits for 26, the channel idle after
//    it; the same 26 ms. A step whose compute the channel never meets is not slowed.
TEST(Simulate, ContentionSlowsTheComputeBesideAMessage) {
  const std::vector<SimLayer> layers = {Layer("l0", 1000, 5, 5), Layer("l1", 1000, 5, 5)};
  SimOptions o = Options(layers, 2, SimOverlap::kWfbp);
  EXPECT_NEAR(StepMs(o), 24.0, 1e-9);
  o.contention = 2;
  EXPECT_NEAR(StepMs(o), 26.0, 1e-9);
  o.overlap = SimOverlap::kPriority;
  EXPECT_NEAR(StepMs(o), 26.0, 1e-9);
  o.overlap = SimOverlap::kNone;  // the buckets move after the backward: nothing beside them
  EXPECT_NEAR(StepMs(o), 20.0 + 8.0, 1e-9);
  o.workers = 1;  // nothing moves
  o.overlap = SimOverlap::kWfbp;
  EXPECT_NEAR(StepMs(o), 20.0, 1e-9);
}

// Three layers of 1 ms forward and backward, 2 workers; the gradients of layers 2, 1 and 0 are
// 10, 4 and 2 ms on the channel. WFBP, contention 3: layer 2 ready at 4 and on the channel 4-14;
// the backward of layers 1 and 0 at a third of the speed, 4-7 and 7-10; layer 1 14-18, layer 0
// 18-20: the channel still decides the step (20 ms, as without contention). A message that
// ends inside a compute segment lets the next one start there: with contention 2 and layer 2's
// gradient 1 ms (2500 -> 250 floats), layer 2 on the channel 4-5, layer 1's backward 4-5.5
// (half of it slowed), layer 1 on the channel 5.5-9.5, layer 0's backward 5.5-7.5, its unit
// 9.5-11.5: steps of 11.5 ms.
TEST(Simulate, ContentionFollowsTheChannelMessageByMessage) {
  std::vector<SimLayer> layers = {Layer("l0", 500, 1, 1), Layer("l1", 1000, 1, 1),
                                  Layer("l2", 2500, 1, 1)};
  SimOptions o = Options(layers, 2, SimOverlap::kWfbp);
  o.contention = 3;
  EXPECT_NEAR(StepMs(o), 20.0, 1e-9);
  layers[2].floats = 250;
  o = Options(layers, 2, SimOverlap::kWfbp);
  o.contention = 2;
  EXPECT_NEAR(StepMs(o), 11.5, 1e-9);
  o.contention = 0.5;
  auto r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("contention must be finite and >= 1"), std::string::npos);
  o.contention = 2;
  o.arch = ParseArchSpec("ps:servers=1").value();
  r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("contention is modelled for --arch allreduce and gossip"),
            std::string::npos);
}

TEST(Simulate, CompressedUnitsOnTheirPaths) {
  SimOptions o = Options({Layer("a", 100000, 1, 1)}, 4, SimOverlap::kWfbp);
  CompressedReducerOptions topk;
  topk.spec = "topk:ratio=0.01";
  topk.min_bytes = 0;
  o.compressed = topk;
  auto compressor = DefaultCompressorRegistry().Create("topk:ratio=0.01").value();
  // Top-k: the bound, every index in the fixed-width code.
  const double w = static_cast<double>(kWireHeaderBytes +
                                       *compressor->MaxBodyBits(TensorInfo("unit", 100000)) / 8);
  // Allgather: (n - 1) (2 alpha + (W + 8) / B), alpha = 0.
  auto t = UnitSeconds(o, DefaultCompressorRegistry(), 100000, {});
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(*t, 3 * (w + 8) / 1e6, 1e-12);
  // Encoding at 4e8 B/s and decoding at 8e8 B/s: + 400000 / 4e8 + 4 x 400000 / 8e8.
  o.encode_bytes_per_s = 4e8;
  o.decode_bytes_per_s = 8e8;
  EXPECT_NEAR(*UnitSeconds(o, DefaultCompressorRegistry(), 100000, {}),
              3 * (w + 8) / 1e6 + 1e-3 + 2e-3, 1e-12);
  // Below min_bytes: dense ring.
  o.compressed->min_bytes = 1 << 30;
  EXPECT_NEAR(*UnitSeconds(o, DefaultCompressorRegistry(), 100000, {}), 6 * 100000 / 1e6, 1e-12);
  // PowerSGD past its warm-up, the flat unit as a 316 x 317 matrix of rank 1: ring all-reduces
  // of P (316 floats) and Q (317), 6 x 633 x 4 / 4 bytes at 1e6 B/s, plus one encoding and one
  // decoding of the unit.
  o.compressed->spec = "powersgd";
  o.compressed->min_bytes = 0;
  EXPECT_NEAR(*UnitSeconds(o, DefaultCompressorRegistry(), 100000, {}), 6 * 633 / 1e6 + 1e-3 + 5e-4,
              1e-12);
  // gTop-k's pairwise merges are not modelled.
  o.compressed->spec = "gtopk";
  EXPECT_FALSE(UnitSeconds(o, DefaultCompressorRegistry(), 100000, {}).ok());
}

TEST(Simulate, RingBandwidthOfHostsAndRacks) {
  SimOptions o = Options({Layer("a", 1000, 0, 1)}, 4, SimOverlap::kWfbp);
  o.network.host_bytes_per_s = 1e8;
  o.network.ranks_per_host = 4;  // one host: the host's rate
  EXPECT_NEAR(*UnitSeconds(o, DefaultCompressorRegistry(), 1000, {}), 6 * 1000 / 1e8, 1e-15);
  o.network.ranks_per_host = 2;  // two hosts: the NIC
  EXPECT_NEAR(*UnitSeconds(o, DefaultCompressorRegistry(), 1000, {}), 6 * 1000 / 1e6, 1e-15);
  o.network.ranks_per_host = 1;
  o.network.hosts_per_rack = 2;  // two racks with slow uplinks
  o.network.rack_bytes_per_s = 5e5;
  EXPECT_NEAR(*UnitSeconds(o, DefaultCompressorRegistry(), 1000, {}), 6 * 1000 / 5e5, 1e-15);
}

}  // namespace
}  // namespace frugal
