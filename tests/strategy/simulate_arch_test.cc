// The step simulator's parameter server and gossip against hand-computed schedules: the server's
// NIC carrying every worker's push and answer, keys spread over two servers, the optimizer's step
// moved to the servers; D-PSGD's round during the step (cta) and after it (atc), Local SGD's
// rounds every H steps, SGP with and without overlap, Local SGD's average over all-reduce with
// and without overlap, the training thread's copies of the model at a measured copy rate, the
// compressed algorithms' decodes and passes, and what is refused.
#include <gtest/gtest.h>

#include <cmath>

#include "frugal/fedavg.h"
#include "frugal/simulate.h"
#include "strategy/strategy_test_util.h"

namespace frugal {
namespace {

// One layer of `floats` gradient elements, forward 1 ms and backward 2 ms; 1e6 bytes/s NICs, no
// latency, workers on hosts of their own.
SimOptions Options(size_t floats, int workers, const std::string& arch,
                   const std::string& sync = "bsp") {
  SimOptions o;
  o.layers = {SimLayer{"a", floats, {}, 1e-3, 2e-3}};
  o.workers = workers;
  o.overlap = SimOverlap::kWfbp;
  o.network.alpha_s = 0;
  o.network.nic_bytes_per_s = 1e6;
  o.network.ranks_per_host = 1;
  o.steps = 3;
  o.arch = ParseArchSpec(arch).value();
  o.sync = ParseSyncSpec(sync).value();
  return o;
}

using strategy_test::StepMs;

TEST(SimulateArch, ParameterServerNicCarriesEveryWorker) {
  // One key of 1000 floats: messages of 52 + 4000 bytes. The server receives 2 pushes (8.104 ms)
  // after the backward (3 ms), then sends 2 answers (8.104 ms).
  SimOptions o = Options(1000, 2, "ps:servers=1");
  EXPECT_NEAR(StepMs(o), 3 + 2 * 8.104, 1e-9);
  // 4 workers: twice the server's time.
  o.workers = 4;
  EXPECT_NEAR(StepMs(o), 3 + 2 * 16.208, 1e-9);
}

TEST(SimulateArch, ParameterServerLinksAtTheDuplexShare) {
  // The test above with every push and answer at 0.4 of the NICs' rate: 8.104 / 0.4 = 20.26 ms
  // in and as much out after the backward; the compute is unchanged.
  SimOptions o = Options(1000, 2, "ps:servers=1");
  o.network.duplex_share = 0.4;
  EXPECT_NEAR(StepMs(o), 3 + 2 * 20.26, 1e-9);
  // The ring and gossip do not read it.
  SimOptions ring = Options(1000, 2, "allreduce:ring");
  const double full = StepMs(ring);
  ring.network.duplex_share = 0.4;
  EXPECT_DOUBLE_EQ(StepMs(ring), full);
  // A share outside (0, 1] is refused (0 would make every message take forever).
  for (double bad : {0.0, -0.5, 1.5}) {
    o.network.duplex_share = bad;
    auto r = Simulate(o, DefaultCompressorRegistry());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--duplex-share must be in (0, 1]"), std::string::npos);
  }
}

TEST(SimulateArch, ParameterServerMessagesAtTheDuplexShareOfTheirSize) {
  // The key of the tests above (4052-byte pushes and answers) between two measured sizes: its
  // share is linear in log bytes, 0.4 at 1000 and 1 at 16000 bytes.
  SimOptions o = Options(1000, 2, "ps:servers=1");
  o.network.duplex_by_bytes = {{1000, 0.4}, {16000, 1}};
  const double share = 0.4 + 0.6 * std::log(4052.0 / 1000) / std::log(16.0);
  EXPECT_NEAR(DuplexShareAt(o.network, 4052), share, 1e-12);
  EXPECT_NEAR(StepMs(o), 3 + 2 * 8.104 / share, 1e-9);
  // Beyond the measured sizes, the nearest one's share (duplex_share is not read).
  o.network.duplex_share = 0.9;
  o.network.duplex_by_bytes = {{8000, 0.4}, {16000, 1}};
  EXPECT_NEAR(StepMs(o), 3 + 2 * 20.26, 1e-9);
  o.network.duplex_by_bytes = {{100, 1}, {2000, 0.4}};
  EXPECT_NEAR(StepMs(o), 3 + 2 * 20.26, 1e-9);
  // Sizes not ascending, a size of 0 and a share outside (0, 1] are refused.
  for (const std::vector<DuplexPoint>& bad :
       std::vector<std::vector<DuplexPoint>>{{{2000, 0.5}, {1000, 0.6}},
                                             {{0, 0.5}},
                                             {{1000, 0}},
                                             {{1000, 0.5}, {1000, 0.6}},
                                             {{1000, 1.2}}}) {
    o.network.duplex_by_bytes = bad;
    auto r = Simulate(o, DefaultCompressorRegistry());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("duplex shares by message size need ascending sizes"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(SimulateArch, ParameterServerKeysOnTwoServers) {
  // 2000 floats: one key of 8052 bytes on one server, 3 + 2 x 2 x 8.052 ms.
  SimOptions one = Options(2000, 2, "ps:servers=1");
  EXPECT_NEAR(StepMs(one), 3 + 4 * 8.052, 1e-9);
  // Keys of 1000 floats on two servers: key 0 pushed 3-7.052, in at 11.104, answered at 19.208;
  // key 1 pushed 7.052-11.104, in at 15.156 (its server's NIC from 7.052), answered at 23.26.
  SimOptions two = Options(2000, 2, "ps:servers=2,shard-mb=0.003814697265625");  // 4000 B
  EXPECT_NEAR(StepMs(two), 23.26, 1e-9);
}

TEST(SimulateArch, ParameterServerRunsTheOptimizerOnTheServers) {
  SimOptions o = Options(1000, 2, "ps:servers=1");
  o.layers.insert(o.layers.begin(), SimLayer{"opt", 0, {}, 2e-3, 0, /*optimizer=*/true});
  // The worker's compute is 3 ms; the server applies the update (2 ms) between pushes and answers.
  EXPECT_NEAR(StepMs(o), 3 + 2 * 8.104 + 2, 1e-9);
}

TEST(SimulateArch, GossipRounds) {
  // Ring of 4: two neighbours, messages of 4000 bytes: a round of 8 ms; compute 3 ms.
  EXPECT_NEAR(StepMs(Options(1000, 4, "gossip:topology=ring")), 8, 1e-9);  // during the step
  EXPECT_NEAR(StepMs(Options(1000, 4, "gossip:topology=ring,order=atc")), 11, 1e-9);
  // Local SGD every 2 steps: 2 x 3 + 8 ms per two steps.
  EXPECT_NEAR(StepMs(Options(1000, 4, "gossip:topology=ring", "local:period=2")), 7, 1e-9);
  // SGP on the one-peer exponential graph: one message of 4004 bytes after the step, or during
  // the next one with overlap=1.
  EXPECT_NEAR(StepMs(Options(1000, 4, "gossip:algorithm=sgp")), 7.004, 1e-9);
  EXPECT_NEAR(StepMs(Options(1000, 4, "gossip:algorithm=sgp,overlap=1")), 4.004, 1e-9);
  // One worker: compute alone.
  EXPECT_NEAR(StepMs(Options(1000, 1, "gossip:topology=ring")), 3, 1e-9);
}

TEST(SimulateArch, GossipComputeBesideTheRoundUnderContention) {
  // D-PSGD cta on the ring of 4: the 8 ms round moves from the start of the step. Contention 2:
  // the 3 ms of compute take 6 ms beside it, still inside the round (8 ms); contention 3: 8 ms
  // do 8/3 ms of the work, the last 1/3 ms after the round: 8.333 ms.
  SimOptions o = Options(1000, 4, "gossip:topology=ring");
  o.contention = 2;
  EXPECT_NEAR(StepMs(o), 8, 1e-9);
  o.contention = 3;
  EXPECT_NEAR(StepMs(o), 8 + 1.0 / 3, 1e-9);
  // SGP with overlap=1: the 4.004 ms round beside the next step's compute at half speed does
  // 2.002 ms of it, the other 0.998 ms follow: 5.002 ms a step (4.004 without contention).
  o.arch = ParseArchSpec("gossip:algorithm=sgp,overlap=1").value();
  o.contention = 2;
  EXPECT_NEAR(StepMs(o), 5.002, 1e-9);
  // atc: the round after the compute, nothing beside it.
  o.arch = ParseArchSpec("gossip:topology=ring,order=atc").value();
  EXPECT_NEAR(StepMs(o), 11, 1e-9);
}

TEST(SimulateArch, GossipRoundsAtTheMeasuredRoundRate) {
  // The round's flows carried at 8e5 bytes/s (as a `frugal bench round` record gives it): the
  // ring's round of two 4000-byte messages takes 10 ms, so the step is the round.
  SimOptions o = Options(1000, 4, "gossip:topology=ring");
  o.network.round_bytes_per_s = 8e5;
  EXPECT_NEAR(StepMs(o), 10, 1e-9);
  o.arch = ParseArchSpec("gossip:topology=ring,order=atc").value();
  EXPECT_NEAR(StepMs(o), 13, 1e-9);
  // One-peer graph, one message of 4004 bytes a round at 4e5 bytes/s: 10.01 ms after the step.
  o.arch = ParseArchSpec("gossip:algorithm=sgp").value();
  o.network.round_bytes_per_s = 4e5;
  EXPECT_NEAR(StepMs(o), 13.01, 1e-9);
  // Ranks of one host exchange at the host's rate, whatever the NIC's round rate.
  o.arch = ParseArchSpec("gossip:topology=ring").value();
  o.network.ranks_per_host = 4;
  o.network.host_bytes_per_s = 4e6;
  EXPECT_NEAR(StepMs(o), 3, 1e-9);
}

TEST(SimulateArch, GossipCopiesOfTheModelAtTheMeasuredCopyRate) {
  // 1000 floats copied at 4e6 bytes/s: 1 ms a pass of the model through memory.
  SimOptions o = Options(1000, 4, "gossip:topology=ring");
  o.copy_bytes_per_s = 4e6;
  // D-PSGD cta on the ring (d = 2): 5 passes before the compute (pack, snapshot, 2 messages,
  // unpack), the round of 8 ms from their end, 5 after the round (pack, the mix of 3 models,
  // unpack): 5 + max(3, 8) + 5.
  EXPECT_NEAR(StepMs(o), 18, 1e-9);
  // atc: the compute, the 8 passes, the round.
  o.arch = ParseArchSpec("gossip:topology=ring,order=atc").value();
  EXPECT_NEAR(StepMs(o), 3 + 8 + 8, 1e-9);
  // SGP on the one-peer graph (d = 1): 6 passes and the round of 4.004 ms after the compute; with
  // overlap=1 the round moves into the next step, which is then the compute and the passes.
  o.arch = ParseArchSpec("gossip:algorithm=sgp").value();
  EXPECT_NEAR(StepMs(o), 3 + 6 + 4.004, 1e-9);
  o.arch = ParseArchSpec("gossip:algorithm=sgp,overlap=1").value();
  EXPECT_NEAR(StepMs(o), 3 + 6, 1e-9);
  // Local SGD every 2 steps: the passes only in the steps that gossip (D-PSGD after the step).
  o.arch = ParseArchSpec("gossip:topology=ring").value();
  o.sync = ParseSyncSpec("local:period=2").value();
  EXPECT_NEAR(StepMs(o), (2 * 3 + 8 + 8) / 2.0, 1e-9);
  // One worker has no round and no copies.
  o.sync = ParseSyncSpec("bsp").value();
  o.workers = 1;
  EXPECT_NEAR(StepMs(o), 3, 1e-9);
}

// The compressed algorithms on the ring of 4 (d = 2), 1 ms a pass, an encode and a decode of the
// model: what the training thread adds to the step beside the messages (GossipModelPasses).
TEST(SimulateArch, CompressedGossipDecodesAndPassesOnTheTrainingThread) {
  struct Case {
    const char* arch;
    const char* compress;
    double added_ms;
  };
  for (const Case& c : {
           // 5.5 passes, the encode, d + 2 sparse decodes.
           Case{"gossip:topology=ring,algorithm=choco", "topk:ratio=0.1", 5.5 + 1 + 4},
           // The same with a dense decoder: the d + 1 weighted decodes add 1.5 passes each.
           Case{"gossip:topology=ring,algorithm=choco", "qsgd", 5.5 + 4.5 + 1 + 4},
           Case{"gossip:topology=ring,algorithm=dcd", "qsgd", 5 + 4.5 + 1 + 4},
           Case{"gossip:topology=ring,algorithm=ecd", "qsgd", 7.5 + 4.5 + 1 + 3},
       }) {
    SimOptions o = Options(1000, 4, c.arch);
    CompressedReducerOptions compressed;
    compressed.spec = c.compress;
    compressed.min_bytes = 0;
    o.compressed = compressed;
    const double messages_only = StepMs(o);
    o.copy_bytes_per_s = 4e6;
    o.encode_bytes_per_s = 4e6;
    o.decode_bytes_per_s = 4e6;
    EXPECT_NEAR(StepMs(o) - messages_only, c.added_ms, 1e-9) << c.arch << " " << c.compress;
  }
}

TEST(SimulateArch, LocalSgdOverAllreduceAveragesEveryPeriod) {
  // The model of 1000 floats averaged by a ring of 4: 2 x 3 x 4000 / 4 / 1e6 s = 6 ms after every
  // second step's compute of 3 ms: (2 x 3 + 6) / 2 ms a step, the channel busy 6 / 2 ms a step.
  SimOptions o = Options(1000, 4, "allreduce", "local:period=2");
  auto r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->step_s * 1e3, 6, 1e-9);
  EXPECT_NEAR(r->comm_busy_s * 1e3, 3, 1e-9);
  EXPECT_NEAR(r->compute_s * 1e3, 3, 1e-9);
  EXPECT_NEAR(r->scaling_efficiency, 0.5, 1e-9);
  // Every 4 steps: (4 x 3 + 6) / 4; BSP averages the gradient (the same bytes) every step.
  o.sync = ParseSyncSpec("local:period=4").value();
  EXPECT_NEAR(StepMs(o), 4.5, 1e-9);
  o.sync = ParseSyncSpec("bsp").value();
  EXPECT_NEAR(StepMs(o), 3 + 6, 1e-9);
  // A compressed average: every layer's change is one unit; fp16 on the all-reduce path sends
  // 2 x 1000 + 4 bytes: 2 x 3 x 2004 / 4 / 1e6 s = 3.006 ms.
  o.sync = ParseSyncSpec("local:period=2").value();
  o.compressed = CompressedReducerOptions{};
  o.compressed->spec = "fp16";
  o.compressed->min_bytes = 0;
  o.compressed->path = AggregationPath::kAllreduce;
  EXPECT_NEAR(StepMs(o), (2 * 3 + 3.006) / 2, 1e-9);
  // One worker averages with nobody.
  o.workers = 1;
  EXPECT_NEAR(StepMs(o), 3, 1e-9);
}

TEST(SimulateArch, LocalSgdOverlappedAverageRunsBesideThePeriod) {
  // Period 4 with overlap: the 6 ms average runs beside the next 4 x 3 ms of compute.
  SimOptions o = Options(1000, 4, "allreduce", "local:period=4,overlap=1");
  EXPECT_NEAR(StepMs(o), 3, 1e-9);
  // Period 2 on 8 workers: the average (2 x 7 x 4000 / 8 / 1e6 s = 7 ms) is longer than the
  // period's compute (6 ms): each averaging step waits 1 ms for the one in flight.
  o = Options(1000, 8, "allreduce", "local:period=2,overlap=1");
  EXPECT_NEAR(StepMs(o), 7 / 2.0, 1e-9);
  o.sync = ParseSyncSpec("local:period=2").value();
  EXPECT_NEAR(StepMs(o), (6 + 7) / 2.0, 1e-9);
  // The steady state does not depend on how many steps are simulated (the first average has
  // none in flight to wait for, and is not in the window).
  o.sync = ParseSyncSpec("local:period=2,overlap=1").value();
  for (int steps : {2, 3, 7, 20}) {
    o.steps = steps;
    EXPECT_NEAR(StepMs(o), 7 / 2.0, 1e-9) << steps;
  }
}

TEST(SimulateArch, LocalSgdOverlappedAverageSlowsTheComputeBesideIt) {
  // Period 4 on 4 workers, contention 2: the first step beside the 6 ms average takes 6 ms, the
  // next three 3 ms: 15 ms a period.
  SimOptions o = Options(1000, 4, "allreduce", "local:period=4,overlap=1");
  o.contention = 2;
  EXPECT_NEAR(StepMs(o), 15 / 4.0, 1e-9);
  // Period 2 on 8 workers (a 7 ms average): 6 ms for the first step, then 1 ms of the second at
  // half speed and its other 2.5 ms at full: 9.5 ms a period.
  o = Options(1000, 8, "allreduce", "local:period=2,overlap=1");
  o.contention = 2;
  EXPECT_NEAR(StepMs(o), 9.5 / 2, 1e-9);
  // Without overlap nothing computes beside the average.
  o.sync = ParseSyncSpec("local:period=2").value();
  EXPECT_NEAR(StepMs(o), (6 + 7) / 2.0, 1e-9);
}

TEST(SimulateArch, RefusesWhatLocalSgdDoesNotModel) {
  for (const char* sync : {"local:period=2,start-epoch=1", "local:period=4,intra-period=2",
                           "local:period=2,momenta=1"}) {
    SimOptions o = Options(1000, 4, "allreduce", sync);
    auto r = Simulate(o, DefaultCompressorRegistry());
    ASSERT_FALSE(r.ok()) << sync;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("Local SGD is simulated without start-epoch"),
              std::string::npos)
        << r.status().message();
  }
}

// FedAvg: a client's 2 steps of 3 ms are 6 ms; the round's all-reduce moves the 1000 floats and
// the weight (4004 bytes): on 2 workers 4004 / 1e6 s, on 4 workers 6 x 1001 / 1e6 s, on 8
// workers 14 x 500.5 / 1e6 s. The step is the round's time x n / (m S).
TEST(SimulateArch, FedAvgRoundsOfTheBusiestWorker) {
  // 4 clients, all sampled: 2 each on 2 workers (12 + 4.004 ms), 1 each on 4 (6 + 6.006 ms).
  SimOptions o = Options(1000, 2, "allreduce", "fedavg:clients=4,local-steps=2");
  EXPECT_NEAR(StepMs(o), (12 + 4.004) * 2 / 8, 1e-9);
  o.workers = 4;
  EXPECT_NEAR(StepMs(o), (6 + 6.006) * 4 / 8, 1e-9);
  // 8 workers for 4 clients: half of them idle (6 + 7.007 ms a round for 4 x 2 client steps).
  o.workers = 8;
  auto r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->step_s * 1e3, 6 + 7.007, 1e-9);
  EXPECT_NEAR(r->scaling_efficiency, 3 / 13.007, 1e-9);
  // Compressed uploads: each client encodes and decodes the model's 4000 bytes (10 + 5 us).
  o = Options(1000, 4, "allreduce", "fedavg:clients=4,local-steps=2");
  o.compressed = CompressedReducerOptions{};
  o.compressed->spec = "fp16";
  o.encode_bytes_per_s = 4e8;
  o.decode_bytes_per_s = 8e8;
  EXPECT_NEAR(StepMs(o), (6.015 + 6.006) * 4 / 8, 1e-9);
}

TEST(SimulateArch, FedAvgSamplesTheClientsOfEachRound) {
  // 8 clients, fraction 0.25: 2 a round on 2 workers; a round whose two clients have the same
  // parity puts both on one worker (12 ms), otherwise 6 ms; plus 4.004 ms of all-reduce.
  SimOptions o = Options(1000, 2, "allreduce", "fedavg:clients=8,fraction=0.25,local-steps=2");
  o.steps = 100;
  o.seed = 7;
  double rounds_ms = 0;
  int same = 0;
  for (int64_t round = 0; round < 100; ++round) {
    const std::vector<int64_t> c = SampleClients(7, round, 8, 0.25);
    ASSERT_EQ(c.size(), 2u);
    const bool one_worker = c[0] % 2 == c[1] % 2;
    same += one_worker ? 1 : 0;
    rounds_ms += (one_worker ? 12 : 6) + 4.004;
  }
  EXPECT_GT(same, 0);  // both kinds of rounds occur in these draws
  EXPECT_LT(same, 100);
  EXPECT_NEAR(StepMs(o), rounds_ms * 2 / (100 * 2 * 2), 1e-9);
  // `rounds` simulates the first rounds of the same draws.
  o.rounds = 3;
  double first_ms = 0;
  for (int64_t round = 0; round < 3; ++round) {
    const std::vector<int64_t> c = SampleClients(7, round, 8, 0.25);
    first_ms += (c[0] % 2 == c[1] % 2 ? 12 : 6) + 4.004;
  }
  EXPECT_NEAR(StepMs(o), first_ms * 2 / (3 * 2 * 2), 1e-9);
}

// With local-epochs a client's steps are its passes over its samples in batches (the last one
// short): 100, 64, 65 and 30 samples in batches of 32 are 4, 2, 3 and 1 steps an epoch. On 2
// workers worker 0 plays clients 0 and 2 (7 steps, 21 ms), worker 1 clients 1 and 3 (9 ms); the
// round is 21 + 4.004 ms for 10 client steps.
TEST(SimulateArch, FedAvgLocalEpochsFromTheClientsSamples) {
  SimOptions o = Options(1000, 2, "allreduce", "fedavg:clients=4,local-epochs=1");
  o.client_samples = {100, 64, 65, 30};
  o.batch_size = 32;
  EXPECT_NEAR(StepMs(o), (21 + 4.004) * 2 / 10, 1e-9);
  // Two epochs: twice the steps, one all-reduce.
  o.sync = ParseSyncSpec("fedavg:clients=4,local-epochs=2").value();
  EXPECT_NEAR(StepMs(o), (42 + 4.004) * 2 / 20, 1e-9);
  // 4 workers: the busiest plays client 0 alone (12 ms), the all-reduce is 6.006 ms.
  o = Options(1000, 4, "allreduce", "fedavg:clients=4,local-epochs=1");
  o.client_samples = {100, 64, 65, 30};
  o.batch_size = 32;
  EXPECT_NEAR(StepMs(o), (12 + 6.006) * 4 / 10, 1e-9);
  // Equal shards of 2 steps give what local-steps=2 gives.
  o.client_samples = {64, 50, 33, 40};
  const double epochs = StepMs(o);
  o.sync = ParseSyncSpec("fedavg:clients=4,local-steps=2").value();
  EXPECT_NEAR(epochs, StepMs(o), 1e-12);
}

TEST(SimulateArch, FedAvgRefusals) {
  // local-epochs needs the clients' samples, one count per client, and a batch.
  SimOptions o = Options(1000, 4, "allreduce", "fedavg:clients=8");
  auto r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("FedAvg with local-epochs needs the clients' samples"),
            std::string::npos)
      << r.status().message();
  o.client_samples = {10, 10, 10};
  r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the partition has 3 clients where --sync fedavg names 8"),
            std::string::npos)
      << r.status().message();
  o.client_samples.assign(8, 10);
  o.batch_size = 0;
  r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--batch-size must be >= 1"), std::string::npos);
  o.batch_size = 32;
  o.client_samples[5] = 0;
  r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("every client needs at least one sample"), std::string::npos);
  r = Simulate(Options(1000, 4, "ps:servers=1", "fedavg:clients=8,local-steps=2"),
               DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--sync fedavg"), std::string::npos) << r.status().message();
}

TEST(SimulateArch, RefusesTheAsynchronousModels) {
  SimOptions o = Options(1000, 2, "ps:servers=1", "asp");
  auto r = Simulate(o, DefaultCompressorRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("asp"), std::string::npos);
}

}  // namespace
}  // namespace frugal
