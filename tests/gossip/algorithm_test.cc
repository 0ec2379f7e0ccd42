// The gossip strategies, ranks as threads, against the single-process reference: every algorithm
// over several graphs and world sizes 1, 2, 3, 4 and 8; bit for bit where the order of additions
// is fixed (D-PSGD, local, SGP), to float tolerance where the reference keeps copies and the
// ranks running sums (CHOCO, DCD, ECD). Then what gossip alone does (contraction at the rate of
// the spectral gap, the average kept), push-sum's invariants and AD-PSGD's.
#include "gossip/algorithm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/mpi_transport.h"
#include "frugal/timer.h"
#include "gossip/gossip_reference.h"
#include "gossip/neighbour_exchange.h"

namespace frugal::gossip_test {
namespace {

struct Case {
  Case(std::string name_in, std::string arch_in, std::string sync_in = "bsp",
       std::string compress_in = "", bool exact_in = true)
      : name(std::move(name_in)),
        arch(std::move(arch_in)),
        sync(std::move(sync_in)),
        compress(std::move(compress_in)),
        exact(exact_in) {}
  std::string name;
  std::string arch;  // the items after gossip:
  std::string sync;
  std::string compress;
  bool exact;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

ReferenceConfig ConfigOf(const Case& c) {
  ReferenceConfig config;
  config.spec = ParseGossipSpec(c.arch).value();
  config.sync = ParseSyncSpec(c.sync).value();
  config.compress = c.compress;
  config.seed = 5;
  return config;
}

struct Distributed {
  std::vector<std::vector<float>> models;
  std::vector<std::vector<std::pair<std::string, std::vector<float>>>> states;
  std::vector<std::vector<std::pair<std::string, double>>> reports;
};

Distributed RunDistributed(const ReferenceConfig& config, int n, int steps) {
  Distributed out;
  out.models.resize(n);
  out.states.resize(n);
  out.reports.resize(n);
  const std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    const int r = t.rank();
    FRUGAL_ASSIGN_OR_RETURN(out.models[r],
                            RunStrategy(config, t, steps, &out.states[r], &out.reports[r]));
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  return out;
}

double MaxRelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t e = 0; e < a.size(); ++e) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[e]) - b[e]) / (1 + std::fabs(b[e])));
  }
  return worst;
}

class GossipReference : public ::testing::TestWithParam<std::tuple<Case, int>> {};

TEST_P(GossipReference, DistributedMatchesTheReference) {
  const auto& [c, n] = GetParam();
  const ReferenceConfig config = ConfigOf(c);
  if (const auto plan = PlanOf(config, n); !plan.ok()) {
    // The one combination that cannot exist: a 3-regular graph needs more than 3 vertices.
    // Any other refusal is a defect, not a skip.
    ASSERT_TRUE(c.name == "dpsgd_random_regular" && n <= 3 &&
                plan.status().message().find("the degree must be in [1, " + std::to_string(n - 1) +
                                             "]") != std::string::npos)
        << c.name << " on " << n << " ranks refused: " << plan.status().ToString();
    GTEST_SKIP() << "no 3-regular graph on " << n << " vertices";
  }
  constexpr int kSteps = 12;
  const Distributed run = RunDistributed(config, n, kSteps);
  const std::vector<std::vector<float>> reference = RunReference(config, n, kSteps);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(run.models[r].size(), kTotal);
    if (c.exact) {
      EXPECT_EQ(run.models[r], reference[r]) << "rank " << r;
    } else {
      EXPECT_LT(MaxRelativeError(run.models[r], reference[r]), 2e-5) << "rank " << r;
    }
  }
  // From 4 ranks on no graph here is complete: the ranks' models differ.
  if (n >= 4) {
    EXPECT_NE(run.models[0], run.models[1]);
  }
}

const Case kCases[] = {
    {"dpsgd_ring", "topology=ring"},
    {"dpsgd_ring_atc", "topology=ring,order=atc"},
    {"dpsgd_torus", "topology=torus"},
    {"dpsgd_exp", "topology=exp"},
    {"dpsgd_complete_uniform", "topology=complete,mixing=uniform"},
    {"dpsgd_random_regular", "topology=random-regular:degree=3"},
    {"dpsgd_onepeer", "topology=onepeer-exp"},
    {"local_ring", "topology=ring", "local:period=3"},
    {"local_onepeer", "topology=onepeer-exp", "local:period=2"},
    {"choco_ring_topk", "topology=ring,algorithm=choco", "bsp", "topk:ratio=0.1", false},
    {"choco_exp_qsgd", "topology=exp,algorithm=choco,gamma=0.5", "bsp", "qsgd", false},
    {"choco_torus_randomk", "topology=torus,algorithm=choco", "bsp", "randomk:ratio=0.2", false},
    {"dcd_ring_qsgd", "topology=ring,algorithm=dcd", "bsp", "qsgd:levels=64", false},
    {"dcd_ring_natural", "topology=ring,algorithm=dcd", "bsp", "natural", false},
    {"dcd_exp_randomk", "topology=exp,algorithm=dcd", "bsp", "randomk:ratio=0.2,scale=1", false},
    {"ecd_ring_qsgd", "topology=ring,algorithm=ecd", "bsp", "qsgd:levels=64", false},
    {"ecd_torus_qsgd", "topology=torus,algorithm=ecd", "bsp", "qsgd:levels=64", false},
    {"sgp_onepeer", "algorithm=sgp"},
    {"sgp_onepeer_overlap", "algorithm=sgp,overlap=1"},
    {"sgp_ring_metropolis", "topology=ring,algorithm=sgp"},
    {"sgp_exp_overlap", "topology=exp,mixing=uniform,algorithm=sgp,overlap=1"},
};

INSTANTIATE_TEST_SUITE_P(All, GossipReference,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

// With the identity compressor the compressed algorithms are D-PSGD: CHOCO at gamma = 1 keeps
// x̂_i = x_i + u_i, so x <- x + u + (sum_j W_ij x̂_j - x̂_i) = sum_j W_ij (x_j + u_j) (atc);
// DCD's public model moves by the whole difference, x_i <- sum_j W_ij x_j + u_i (cta). The
// distributed runs against the serial D-PSGD reference; only the running sums round
// differently. At gamma = 0.5 CHOCO is not D-PSGD: the test can tell them apart.
TEST(GossipIdentity, CompressedAlgorithmsWithoutCompressionAreDpsgd) {
  struct Pair {
    std::string compressed;
    std::string dpsgd;
  };
  for (const Pair& p :
       {Pair{"algorithm=choco,gamma=1", "order=atc"}, Pair{"algorithm=dcd", "order=cta"}}) {
    for (const auto& [topology, n] : std::vector<std::pair<std::string, int>>{
             {"ring", 1}, {"ring", 2}, {"ring", 5}, {"exp", 8}, {"torus", 4}}) {
      // The ranks start from one model, as in training (DCD's s_i starts at x^0).
      const ReferenceConfig compressed =
          ConfigOf({"", "topology=" + topology + "," + p.compressed, "bsp", "none"});
      const ReferenceConfig dpsgd = ConfigOf({"", "topology=" + topology + "," + p.dpsgd});
      constexpr int kSteps = 10;
      const Distributed run = RunDistributed(compressed, n, kSteps);
      const std::vector<std::vector<float>> reference = RunReference(dpsgd, n, kSteps);
      for (int r = 0; r < n; ++r) {
        EXPECT_LT(MaxRelativeError(run.models[r], reference[r]), 1e-6)
            << p.compressed << " " << topology << " n=" << n << " rank " << r;
      }
    }
  }
  const ReferenceConfig half =
      ConfigOf({"", "topology=ring,algorithm=choco,gamma=0.5", "bsp", "none"});
  const ReferenceConfig atc = ConfigOf({"", "topology=ring,order=atc"});
  EXPECT_GT(MaxRelativeError(RunDistributed(half, 5, 10).models[0], RunReference(atc, 5, 10)[0]),
            1e-3);
}

// A round left in flight completes by Progress alone (the background call of the strategy polls
// it while the step computes): with rendezvous sends nothing completes before the peer has
// started its round; after that, polling Progress completes both sides, and Finish only reads.
TEST(NeighbourExchange, ProgressCompletesARoundWithoutFinish) {
  InProcWorld world(2, InProcOptions{.rendezvous_bytes = 64});
  std::promise<void> checked;
  std::shared_future<void> rank0_checked = checked.get_future().share();
  std::vector<float> out[2] = {std::vector<float>(100, 1.0f), std::vector<float>(100, 2.0f)};
  const std::vector<Status> statuses = RunRanks(world, [&](Transport& t) -> Status {
    const int me = t.rank();
    const int peer = 1 - me;
    gossip::NeighbourExchange exchange;
    EXPECT_TRUE(exchange.Progress());  // nothing in flight
    if (me == 1) rank0_checked.wait();
    exchange.Start(t, gossip::kMixTag, std::vector<int>{peer},
                   std::as_bytes(std::span<const float>(out[me])), std::vector<int>{peer},
                   out[me].size() * sizeof(float));
    if (me == 0) {
      EXPECT_FALSE(exchange.Progress());  // rank 1 has not started
      checked.set_value();
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!exchange.Progress() && Clock::now() < deadline) {
    }
    EXPECT_TRUE(exchange.Progress()) << "rank " << me;
    FRUGAL_RETURN_IF_ERROR(exchange.Finish(t, Duration(0), "round"));
    EXPECT_EQ(exchange.ReceivedFloats(0)[99], peer + 1.0f);
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
}

// A model larger than the MPI transport's TCP eager limit leaves in segments under it: with
// sends above the limit completing only when a receive takes them (as Open MPI's rendezvous),
// the sender's round completes before the receiver has posted anything, and the receiver then
// reassembles the model.
TEST(NeighbourExchange, AModelAboveTheEagerLimitLeavesInEagerSegments) {
  InProcWorld world(2, InProcOptions{.rendezvous_bytes = kTcpEagerBytes});
  constexpr size_t kFloats = (gossip::NeighbourExchange::kSegmentBytes * 5 / 2) / sizeof(float) + 3;
  std::vector<float> model(kFloats);
  for (size_t e = 0; e < kFloats; ++e) model[e] = static_cast<float>(e);
  const size_t bytes = kFloats * sizeof(float);
  std::promise<void> sent;
  std::shared_future<void> rank0_sent = sent.get_future().share();
  const std::vector<Status> statuses = RunRanks(world, [&](Transport& t) -> Status {
    gossip::NeighbourExchange exchange;
    if (t.rank() == 0) {
      exchange.Start(t, gossip::kMixTag, std::vector<int>{1},
                     std::as_bytes(std::span<const float>(model)), {}, bytes);
      Status status = exchange.Finish(t, std::chrono::seconds(5), "send");
      sent.set_value();
      return status;
    }
    rank0_sent.wait();
    exchange.Start(t, gossip::kMixTag, {}, std::span<const std::byte>(), std::vector<int>{0},
                   bytes);
    FRUGAL_RETURN_IF_ERROR(exchange.Finish(t, std::chrono::seconds(30), "receive"));
    std::span<const float> got = exchange.ReceivedFloats(0);
    EXPECT_EQ(got.size(), kFloats);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), model.begin(), model.end()));
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
}

// Segmented messages on a ring of 3 (each rank sends its own model to both neighbours and
// receives both of theirs), with two rounds in flight on one tag at once as SGP's overlap keeps
// them: every model arrives whole, in its own round.
TEST(NeighbourExchange, SegmentedRoundsInFlightTogetherStayApart) {
  constexpr size_t kFloats = (gossip::NeighbourExchange::kSegmentBytes * 9 / 4) / sizeof(float);
  auto value = [](int round, int rank, size_t e) {
    return static_cast<float>(round * 10 + rank) + static_cast<float>(e % 1000) * 1e-3f;
  };
  const std::vector<Status> statuses = RunRanks(3, [&](Transport& t) -> Status {
    const int me = t.rank();
    const std::vector<int> peers = {(me + 1) % 3, (me + 2) % 3};
    std::vector<std::vector<float>> models(2, std::vector<float>(kFloats));
    for (int round = 0; round < 2; ++round) {
      for (size_t e = 0; e < kFloats; ++e) models[round][e] = value(round, me, e);
    }
    gossip::NeighbourExchange rounds[2];
    for (int round = 0; round < 2; ++round) {
      rounds[round].Start(t, gossip::kMixTag, peers,
                          std::as_bytes(std::span<const float>(models[round])), peers,
                          kFloats * sizeof(float));
    }
    for (int round = 0; round < 2; ++round) {
      FRUGAL_RETURN_IF_ERROR(rounds[round].Finish(t, std::chrono::seconds(30), "round"));
      for (size_t k = 0; k < peers.size(); ++k) {
        std::span<const float> got = rounds[round].ReceivedFloats(k);
        EXPECT_EQ(got.size(), kFloats);
        size_t wrong = 0;
        for (size_t e = 0; e < got.size(); ++e) wrong += got[e] != value(round, peers[k], e);
        EXPECT_EQ(wrong, 0u) << "rank " << me << " round " << round << " from " << peers[k];
      }
    }
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
}

// A segmented message whose last segment is shorter than the size the receiver expects is
// malformed, and the error names the sender.
TEST(NeighbourExchange, ASegmentedMessageOfAnotherSizeIsMalformed) {
  const size_t expected = gossip::NeighbourExchange::kSegmentBytes * 2 + 200;
  std::vector<std::byte> payload(expected - 100, std::byte{1});
  const std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
    gossip::NeighbourExchange exchange;
    if (t.rank() == 0) {
      exchange.Start(t, gossip::kMixTag, std::vector<int>{1}, payload, {}, expected);
    } else {
      exchange.Start(t, gossip::kMixTag, {}, std::span<const std::byte>(), std::vector<int>{0},
                     expected);
    }
    return exchange.Finish(t, std::chrono::seconds(30), "round 7");
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  EXPECT_EQ(statuses[1].code(), StatusCode::kMalformed) << statuses[1].ToString();
  EXPECT_NE(statuses[1].message().find("round 7: rank 0 sent 100 bytes where 200 were expected"),
            std::string::npos)
      << statuses[1].ToString();
}

// A round that expires names every neighbour that did not answer, the one whose wait expired
// included: sends of segmented messages that no receive takes, then receives nobody sends.
TEST(NeighbourExchange, AnExpiredRoundNamesTheNeighboursThatDidNotAnswer) {
  InProcWorld world(3, InProcOptions{.rendezvous_bytes = 64});
  std::vector<std::byte> payload(gossip::NeighbourExchange::kSegmentBytes * 2 + 8, std::byte{2});
  Status sending, receiving;
  const std::vector<Status> statuses = RunRanks(world, [&](Transport& t) -> Status {
    if (t.rank() != 0) return Status::Ok();
    const std::vector<int> peers = {1, 2};
    gossip::NeighbourExchange exchange;
    exchange.Start(t, gossip::kMixTag, peers, payload, {}, payload.size());
    sending = exchange.Finish(t, Duration(100), "round 3");
    exchange.Start(t, gossip::kMixTag, {}, std::span<const std::byte>(), peers, payload.size());
    receiving = exchange.Finish(t, Duration(100), "round 4");
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sending.code(), StatusCode::kTimeout);
  EXPECT_EQ(sending.message(),
            "round 3: no receipt of this rank's message from ranks 1, 2 within 100 ms");
  EXPECT_EQ(receiving.code(), StatusCode::kTimeout);
  EXPECT_EQ(receiving.message(), "round 4: no message from ranks 1, 2 within 100 ms");
}

// ---- Gossip alone ------------------------------------------------------------------------------

// ||X - mean|| over all ranks (Frobenius).
double Distance(const std::vector<std::vector<float>>& x) {
  std::vector<double> mean(x[0].size(), 0.0);
  for (const auto& row : x) {
    for (size_t e = 0; e < row.size(); ++e) mean[e] += row[e] / static_cast<double>(x.size());
  }
  double sum = 0;
  for (const auto& row : x) {
    for (size_t e = 0; e < row.size(); ++e) sum += (row[e] - mean[e]) * (row[e] - mean[e]);
  }
  return std::sqrt(sum);
}

ReferenceConfig GossipOnly(const std::string& arch, const std::string& sync = "bsp") {
  ReferenceConfig config = ConfigOf({"", arch, sync});
  config.local.lr = 0;
  config.local.noise = 0;
  config.initial = Initial::kPerRank;
  return config;
}

// With a symmetric W, one step shrinks the distance to the average by at least 1 - gap, and a
// generic start soon shrinks by exactly that factor (the slowest mode dominates).
TEST(GossipAlone, ContractsAtTheSpectralGapRate) {
  struct Graph {
    std::string topology;
    int n;
  };
  for (const Graph& g : {Graph{"ring", 8}, Graph{"ring", 5}, Graph{"torus", 16}, Graph{"exp", 8},
                         Graph{"random-regular:degree=3", 10}}) {
    const ReferenceConfig config = GossipOnly("topology=" + g.topology + ",order=atc");
    const StrategyPlan plan = PlanOf(config, g.n).value();
    const Topology topology = Topology::Make(config.spec.topology, g.n, plan.seed).value();
    const double gap = SpectralGap(MixingMatrix::Make(topology, MixingKind::kMetropolis).value());
    ASSERT_GT(gap, 0);
    ASSERT_LT(gap, 1);
    const double rate = 1 - gap;
    // Far enough for the slowest mode to dominate, not so far that float rounding does.
    const int k = std::min(40, static_cast<int>(std::log(1e-3) / std::log(rate)));
    std::vector<double> distances;
    for (int steps : {0, 1, 2, k, k + 1}) {
      distances.push_back(Distance(RunDistributed(config, g.n, steps).models));
    }
    EXPECT_LE(distances[1], rate * distances[0] * (1 + 1e-5)) << g.topology;
    EXPECT_LE(distances[2], rate * distances[1] * (1 + 1e-5)) << g.topology;
    EXPECT_LE(distances[3], std::pow(rate, k) * distances[0] * (1 + 1e-4)) << g.topology;
    EXPECT_NEAR(distances[4] / distances[3], rate, 0.02 * rate) << g.topology << " k=" << k;
  }
}

std::vector<double> Mean(const std::vector<std::vector<float>>& x) {
  std::vector<double> mean(x[0].size(), 0.0);
  for (const auto& row : x) {
    for (size_t e = 0; e < row.size(); ++e) mean[e] += row[e];
  }
  for (double& m : mean) m /= static_cast<double>(x.size());
  return mean;
}

std::vector<std::vector<float>> Initials(int n, Initial initial) {
  std::vector<std::vector<float>> x;
  for (int r = 0; r < n; ++r) x.push_back(InitialModel(r, initial));
  return x;
}

// Dyadic weights and small integers: every sum is exact, so the average stays bit for bit, and
// the one-peer exponential graph of 2^k ranks reaches it in k rounds.
TEST(GossipAlone, DoublyStochasticKeepsTheAverageExactly) {
  for (const auto& [topology, n, rounds] : std::vector<std::tuple<std::string, int, int>>{
           {"onepeer-exp", 8, 3}, {"onepeer-exp", 4, 2}, {"ring", 2, 1}}) {
    ReferenceConfig config = GossipOnly("topology=" + topology + ",mixing=uniform,order=atc");
    config.initial = Initial::kIntegers;
    const std::vector<double> before = Mean(Initials(n, Initial::kIntegers));
    for (int steps : {1, rounds, rounds + 5}) {
      const std::vector<std::vector<float>> after = RunDistributed(config, n, steps).models;
      EXPECT_EQ(Mean(after), before) << topology << " " << steps;
      if (steps >= rounds) {
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(std::vector<double>(after[r].begin(), after[r].end()), before) << r;
        }
      }
    }
  }
  // Any doubly stochastic W keeps it up to float rounding; the models do move.
  for (const std::string topology : {"ring", "torus", "random-regular:degree=4"}) {
    const ReferenceConfig config = GossipOnly("topology=" + topology);
    const std::vector<double> before = Mean(Initials(6, Initial::kPerRank));
    const std::vector<std::vector<float>> after = RunDistributed(config, 6, 15).models;
    const std::vector<double> mean = Mean(after);
    for (size_t e = 0; e < mean.size(); ++e) EXPECT_NEAR(mean[e], before[e], 1e-6) << topology;
    EXPECT_GT(std::fabs(after[0][0] - InitialModel(0, Initial::kPerRank)[0]), 1e-3);
  }
}

// Push-sum: the weights always sum to n, and the numerators to the sum of the initial models and
// every local update (here gossip alone: the initial models); in flight shares count once Settle
// has received them.
TEST(PushSum, KeepsTheWeightedSum) {
  // A star with a ring around it: rank 0 has n - 1 neighbours, the others 3, so uniform weights
  // are column- but not row-stochastic and the push-sum weights move away from 1.
  const std::string star = ::testing::TempDir() + "gossip_star_ring.txt";
  {
    std::ofstream f(star);
    for (int i = 1; i < 8; ++i) f << "0 " << i << "\n";
    for (int i = 1; i < 8; ++i) f << i << " " << (i % 7) + 1 << "\n";
  }
  for (const std::string overlap : {"0", "1"}) {
    for (const auto& [topology, n] :
         std::vector<std::pair<std::string, int>>{{"onepeer-exp", 5}, {"file:" + star, 8}}) {
      const ReferenceConfig config =
          GossipOnly("topology=" + topology + ",mixing=uniform,algorithm=sgp,overlap=" + overlap);
      const Distributed run = RunDistributed(config, n, 9);
      double weights = 0;
      std::vector<double> numerators(kTotal, 0.0);
      bool moved = false;
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(run.states[r].size(), 2u);
        EXPECT_EQ(run.states[r][0].first, "numerator");
        EXPECT_EQ(run.states[r][1].first, "weight");
        weights += run.states[r][1].second.at(0);
        moved |= std::fabs(run.states[r][1].second[0] - 1) > 1e-3;
        for (size_t e = 0; e < kTotal; ++e) numerators[e] += run.states[r][0].second[e];
      }
      EXPECT_NEAR(weights, n, 1e-5) << topology;
      const std::vector<double> before = Mean(Initials(n, Initial::kPerRank));
      for (size_t e = 0; e < kTotal; ++e) EXPECT_NEAR(numerators[e] / n, before[e], 1e-5);
      EXPECT_EQ(moved, topology != "onepeer-exp") << topology;
      // The de-biased models approach the average.
      EXPECT_LT(Distance(run.models), 0.2 * Distance(Initials(n, Initial::kPerRank))) << topology;
    }
  }
}

// Every state vector is reachable by name.
TEST(GossipState, EveryAlgorithmShowsItsState) {
  const std::vector<std::pair<Case, std::vector<std::string>>> expected = {
      {{"", "topology=ring"}, {}},
      {{"", "topology=ring,algorithm=choco", "bsp", "topk:ratio=0.1"}, {"xhat", "neighbour_sum"}},
      {{"", "topology=ring,algorithm=dcd", "bsp", "qsgd"}, {"model", "neighbour_sum"}},
      {{"", "topology=ring,algorithm=ecd", "bsp", "qsgd"}, {"model", "neighbour_sum"}},
      {{"", "algorithm=sgp"}, {"numerator", "weight"}},
  };
  for (const auto& [c, names] : expected) {
    const Distributed run = RunDistributed(ConfigOf(c), 3, 2);
    std::vector<std::string> got;
    for (const auto& [name, values] : run.states[1]) {
      got.push_back(name);
      EXPECT_EQ(values.size(), name == "weight" ? 1u : kTotal) << name;
    }
    EXPECT_EQ(got, names) << c.arch;
  }
}

// AD-PSGD: no pairwise exchange is lost or counted twice. With local updates, the sum of all
// models after Settle is the sum of the initial models plus every update; every request an
// active rank started was served by a passive one.
TEST(AdPsgd, PairwiseAveragesConserveTheSum) {
  for (const auto& [topology, n] : std::vector<std::pair<std::string, int>>{
           {"ring", 2}, {"ring", 4}, {"ring", 8}, {"torus", 8}}) {
    ReferenceConfig config = ConfigOf({"", "topology=" + topology, "asp"});
    config.initial = Initial::kPerRank;
    config.local.lr = 0;  // updates independent of the model: their sum is known
    config.local.noise = 0.1f;
    constexpr int kSteps = 25;
    const Distributed run = RunDistributed(config, n, kSteps);
    std::vector<double> expected = Mean(Initials(n, Initial::kPerRank));
    for (double& v : expected) v *= n;
    for (int r = 0; r < n; ++r) {
      std::vector<float> zero(kTotal, 0.0f);
      for (int s = 0; s < kSteps; ++s) LocalStep(config.local, r, s, zero);
      for (size_t e = 0; e < kTotal; ++e) expected[e] += zero[e];
    }
    std::vector<double> sum(kTotal, 0.0);
    for (const auto& m : run.models) {
      for (size_t e = 0; e < kTotal; ++e) sum[e] += m[e];
    }
    for (size_t e = 0; e < kTotal; ++e) EXPECT_NEAR(sum[e], expected[e], 1e-4) << topology << n;
    double started = 0;
    double served = 0;
    for (const auto& report : run.reports) {
      for (const auto& [name, value] : report) {
        if (name == "pair_exchanges_started") started += value;
        if (name == "pair_exchanges_served") served += value;
      }
    }
    EXPECT_EQ(started, (n / 2) * kSteps) << topology << n;  // every active, every step
    EXPECT_EQ(served, started) << topology << n;
  }
}

// AD-PSGD alone drives the models together. How far depends on the schedule (a rank that runs
// ahead averages with the same neighbours again and again; on shared cores the threads often
// run one after the other), but pairwise averages never move them apart, and every pair that
// averaged agrees exactly after its exchange.
TEST(AdPsgd, GossipAloneContracts) {
  ReferenceConfig config = ConfigOf({"", "topology=ring", "asp"});
  config.initial = Initial::kPerRank;
  config.local.lr = 0;
  config.local.noise = 0;
  const double before = Distance(Initials(6, Initial::kPerRank));
  for (int repeat = 0; repeat < 5; ++repeat) {
    EXPECT_LT(Distance(RunDistributed(config, 6, 30).models), before);
  }
  // Two ranks average with each other only: after Settle both hold the same model.
  const std::vector<std::vector<float>> two = RunDistributed(config, 2, 3).models;
  EXPECT_EQ(two[0], two[1]);
}

}  // namespace
}  // namespace frugal::gossip_test
