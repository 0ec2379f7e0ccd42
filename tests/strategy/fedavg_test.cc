// FedAvg without torch: the spec and the factory's rules, client sampling, the weighted server
// average over ranks as threads against a serial computation, and the compressed uploads (bytes,
// per-client error feedback).
#include "frugal/fedavg.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frugal/compress_wire.h"
#include "frugal/inproc_transport.h"
#include "strategy/strategy_test_util.h"

namespace frugal {
namespace {

using strategy_test::ExpectAllOk;
using strategy_test::Plan;

// The exact reducer of the plan and the FedAvg server over it.
struct Server {
  std::unique_ptr<GradientReducer> reducer;
  std::unique_ptr<FederatedAveraging> fedavg;
};

StatusOr<Server> MakeServer(const StrategyPlan& plan, Transport& t) {
  Server server;
  FRUGAL_ASSIGN_OR_RETURN(server.reducer,
                          MakeStrategyReducer(plan, t, 0, DefaultCompressorRegistry()));
  FRUGAL_ASSIGN_OR_RETURN(
      server.fedavg, FederatedAveraging::Create(plan, *server.reducer, DefaultCompressorRegistry(),
                                                t.rank(), t.size()));
  return server;
}

TEST(FedAvgSpec, ParsesLocalStepsAndMinimumAndNamesThem) {
  const SyncSpec steps = ParseSyncSpec("fedavg:clients=4,local-steps=3,min-samples=10").value();
  EXPECT_EQ(steps.local_steps, 3);
  EXPECT_EQ(steps.min_samples, 10);
  EXPECT_EQ(SyncSpecName(steps), "fedavg:clients=4,fraction=1,local-steps=3,min-samples=10");
  EXPECT_EQ(ParseSyncSpec(SyncSpecName(steps)).value().local_steps, 3);
  const SyncSpec epochs = ParseSyncSpec("fedavg:clients=32,fraction=0.25,local-epochs=2").value();
  EXPECT_EQ(epochs.local_steps, 0);
  EXPECT_EQ(SyncSpecName(epochs), "fedavg:clients=32,fraction=0.25,local-epochs=2");
  for (const char* bad :
       {"fedavg:clients=4,local-steps=2,local-epochs=1", "fedavg:clients=4,local-steps=0",
        "fedavg:clients=4,min-samples=0", "fedavg:clients=0", "fedavg:clients=4,rounds=3"}) {
    const Status status = ParseSyncSpec(bad).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << bad;
  }
  EXPECT_NE(ParseSyncSpec("fedavg:clients=4,local-steps=2,local-epochs=1")
                .status()
                .message()
                .find("not both"),
            std::string::npos);
}

TEST(FedAvgPlanRules, UploadsAreCompressedAloneWithErrorFeedbackAndAggregatedExactly) {
  struct Case {
    const char* compress;
    const char* aggregate;
    const char* message;
  };
  for (const Case& c :
       {Case{"powersgd", "auto", "powersgd aggregates across ranks"},
        Case{"gtopk:ratio=0.01", "auto", "gtopk aggregates across ranks"},
        Case{"terngrad", "auto", "terngrad aggregates across ranks"},
        Case{"sign", "auto", "sign aggregates across ranks"},
        Case{"topk:ratio=0.01", "allgather", "--aggregate allgather does not apply"},
        Case{"dgc:ratio=0.01", "auto", "dgc works on gradients"}}) {
    StrategyOptions options;
    options.sync = "fedavg:clients=8";
    options.compress = c.compress;
    options.aggregate = c.aggregate;
    const Status status = PlanStrategy(options).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.compress;
    EXPECT_NE(status.message().find(c.message), std::string::npos)
        << c.compress << ": " << status.message();
  }
  const StrategyPlan plan = Plan("fedavg:clients=8", "topk:ratio=0.01", 7);
  ASSERT_TRUE(plan.compressed.has_value());
  EXPECT_TRUE(plan.compressed->error_feedback);
  EXPECT_EQ(plan.seed, 7u);
  // The aggregate over the workers is exact even with compressed uploads.
  ExpectAllOk(RunRanks(2, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(Server server, MakeServer(plan, t));
    EXPECT_EQ(server.reducer->name(), "allreduce:ring");
    FederatedAveraging* fedavg = server.fedavg.get();
    EXPECT_NE(fedavg->compressor(), nullptr);
    EXPECT_EQ(MakeStrategy(plan, t, *server.reducer).status().code(), StatusCode::kInvalidArgument);
    return Status::Ok();
  }));
}

TEST(FedAvgSampling, CountIsExactAndRoundingKeepsAtLeastOneClient) {
  EXPECT_EQ(ClientsPerRound(32, 0.25), 8);
  EXPECT_EQ(ClientsPerRound(32, 1.0), 32);
  EXPECT_EQ(ClientsPerRound(7, 0.5), 4);    // 3.5 rounds up
  EXPECT_EQ(ClientsPerRound(10, 0.05), 1);  // 0.5 rounds up
  EXPECT_EQ(ClientsPerRound(10, 0.04), 1);  // 0.4 rounds to 0: one client
  EXPECT_EQ(ClientsPerRound(1000, 0.001), 1);
  for (int64_t k : {1, 5, 32, 100}) {
    for (double c : {0.01, 0.1, 0.25, 0.5, 0.99, 1.0}) {
      const std::vector<int64_t> s = SampleClients(3, 0, k, c);
      ASSERT_EQ(static_cast<int64_t>(s.size()), ClientsPerRound(k, c)) << k << " " << c;
      EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
      EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), s.size()) << "distinct";
      EXPECT_GE(s.front(), 0);
      EXPECT_LT(s.back(), k);
    }
  }
}

TEST(FedAvgSampling, ReproducibleFromTheSeedAndDifferentAcrossRoundsAndSeeds) {
  EXPECT_EQ(SampleClients(1, 5, 32, 0.25), SampleClients(1, 5, 32, 0.25));
  std::set<std::vector<int64_t>> by_round;
  for (int64_t round = 0; round < 20; ++round) by_round.insert(SampleClients(1, round, 32, 0.25));
  EXPECT_GE(by_round.size(), 19u) << "rounds draw different clients";
  std::set<std::vector<int64_t>> by_seed;
  for (uint64_t seed = 0; seed < 20; ++seed) by_seed.insert(SampleClients(seed, 0, 32, 0.25));
  EXPECT_GE(by_seed.size(), 19u) << "seeds draw different clients";
  // Uniform: over 4000 rounds every client is drawn about 4000 x 8 / 32 = 1000 times
  // (binomial standard deviation 27; 6 sigma tolerance).
  std::vector<int> drawn(32, 0);
  for (int64_t round = 0; round < 4000; ++round) {
    for (int64_t c : SampleClients(9, round, 32, 0.25)) ++drawn[static_cast<size_t>(c)];
  }
  for (int c = 0; c < 32; ++c) EXPECT_NEAR(drawn[static_cast<size_t>(c)], 1000, 165) << c;
}

TEST(FedAvgSampling, EveryClientHasOneRankAndRanksShareTheRound) {
  const StrategyPlan plan = Plan("fedavg:clients=10,fraction=0.5");
  std::vector<std::vector<int64_t>> own(3);
  ExpectAllOk(RunRanks(3, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(Server server, MakeServer(plan, t));
    FederatedAveraging* fedavg = server.fedavg.get();
    own[static_cast<size_t>(t.rank())] = fedavg->OwnClients(fedavg->Sample(4));
    return Status::Ok();
  }));
  std::vector<int64_t> all;
  for (int r = 0; r < 3; ++r) {
    for (int64_t c : own[static_cast<size_t>(r)]) {
      EXPECT_EQ(c % 3, r);
      all.push_back(c);
    }
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, SampleClients(0, 4, 10, 0.5));
}

// A model of two parameters and one float buffer; client c's upload sets every value of the
// global model g to g + (c + 1) * (i + 1) / 8 for element i.
struct ToyModel {
  std::vector<float> a = std::vector<float>(5, 0.5f);
  std::vector<float> b = std::vector<float>(20000, -0.25f);  // 80 kB: compressed
  std::vector<float> stats = std::vector<float>(3, 1.0f);
  ModelBuffers View() { return ModelBuffers{{{"a", a}, {"b", b}}, {{"stats", stats}}, {}}; }
  std::vector<float> Flat() const {
    std::vector<float> flat = a;
    flat.insert(flat.end(), b.begin(), b.end());
    flat.insert(flat.end(), stats.begin(), stats.end());
    return flat;
  }
};

void TrainToy(ToyModel& m, int64_t client) {
  auto shift = [&](std::vector<float>& v, size_t offset) {
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] += static_cast<float>(client + 1) * static_cast<float>((offset + i) % 17 + 1) / 8;
    }
  };
  shift(m.a, 0);
  shift(m.b, m.a.size());
  shift(m.stats, m.a.size() + m.b.size());
}

double Weight(int64_t client) { return 10.0 + 7.0 * static_cast<double>(client); }

// Unequal weights: the global model is sum_c n_c x_c / sum_c n_c over the sampled clients,
// whichever rank played them; every rank ends with the same bits.
TEST(FedAvgAggregate, GlobalModelIsTheSampleWeightedAverageOfTheSampledClients) {
  for (int n : {1, 2, 3}) {
    const StrategyPlan plan = Plan("fedavg:clients=7,fraction=0.6", "", 11);
    const std::vector<int64_t> sampled = SampleClients(11, 0, 7, 0.6);
    ASSERT_EQ(sampled.size(), 4u);
    // Serial reference in double.
    ToyModel start;
    const std::vector<float> g = start.Flat();
    std::vector<double> expected(g.size(), 0.0);
    double weights = 0;
    for (int64_t c : sampled) {
      ToyModel m;
      TrainToy(m, c);
      const std::vector<float> x = m.Flat();
      for (size_t i = 0; i < x.size(); ++i) expected[i] += Weight(c) * x[i];
      weights += Weight(c);
    }
    for (double& v : expected) v /= weights;
    std::vector<std::vector<float>> result(static_cast<size_t>(n));
    ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(Server server, MakeServer(plan, t));
      FederatedAveraging* fedavg = server.fedavg.get();
      ToyModel model;
      ModelBuffers view = model.View();
      fedavg->BeginRound(0, view);
      EXPECT_EQ(fedavg->Sample(0), sampled);
      for (int64_t c : fedavg->OwnClients(sampled)) {
        fedavg->LoadGlobal(view);
        TrainToy(model, c);
        FRUGAL_ASSIGN_OR_RETURN(const uint64_t up, fedavg->AddUpload(c, Weight(c), view));
        EXPECT_EQ(up, 4 * g.size()) << "dense upload";
      }
      EXPECT_EQ(fedavg->download_bytes(), 4 * g.size());
      FRUGAL_RETURN_IF_ERROR(fedavg->EndRound(view));
      result[static_cast<size_t>(t.rank())] = model.Flat();
      return Status::Ok();
    }));
    double worst = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      worst = std::max(worst, std::fabs(expected[i] - result[0][i]));
    }
    EXPECT_LT(worst, 2e-5) << "n=" << n;
    // The unweighted mean is measurably elsewhere: the weights matter.
    double unweighted = 0;
    for (int64_t c : sampled) unweighted += static_cast<double>(c + 1) / 4;
    double weighted = 0;
    for (int64_t c : sampled) weighted += static_cast<double>(c + 1) * Weight(c) / weights;
    EXPECT_GT(std::fabs(weighted - unweighted), 0.05);
    for (int r = 1; r < n; ++r)
      EXPECT_EQ(result[static_cast<size_t>(r)], result[0]) << "rank " << r;
  }
}

TEST(FedAvgAggregate, ARoundWithoutUploadsFailsOnEveryRank) {
  const StrategyPlan plan = Plan("fedavg:clients=2");
  std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(Server server, MakeServer(plan, t));
    FederatedAveraging* fedavg = server.fedavg.get();
    ToyModel model;
    ModelBuffers view = model.View();
    fedavg->BeginRound(0, view);
    return fedavg->EndRound(view);
  });
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("no client returned"), std::string::npos);
  }
}

// Compressed uploads: the upload's bytes are the encoded payload of each compressed parameter
// plus float32 for the rest; what the server adds is the decoded payload; what it missed stays in
// that client's own residual, named by the client, and enters its next upload.
TEST(FedAvgUploads, CompressedDeltasCountPayloadBytesAndKeepAResidualPerClient) {
  const StrategyPlan plan = Plan("fedavg:clients=2", "topk:ratio=0.01", 3);
  ExpectAllOk(RunRanks(1, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(Server server, MakeServer(plan, t));
    FederatedAveraging* fedavg = server.fedavg.get();
    const Compressor& compressor = *fedavg->compressor();
    ToyModel model;
    ModelBuffers view = model.View();
    const std::vector<float> g = model.Flat();
    fedavg->BeginRound(0, view);
    // Client 0 alone, weight 1: the new global model is g + decoded(delta).
    fedavg->LoadGlobal(view);
    TrainToy(model, 0);
    const std::vector<float> x0 = model.Flat();
    FRUGAL_ASSIGN_OR_RETURN(const uint64_t up, fedavg->AddUpload(0, 1.0, view));
    // The same delta of b encoded on its own (top-k's payload size depends on the data).
    std::vector<float> delta_b(20000);
    for (size_t i = 0; i < delta_b.size(); ++i) delta_b[i] = x0[5 + i] - g[5 + i];
    CompressContext fresh(3, 0, 2);
    std::vector<std::byte> payload;
    FRUGAL_RETURN_IF_ERROR(compressor.Encode(delta_b, TensorInfo("b", 20000), fresh, payload));
    EXPECT_EQ(up, 4 * (5 + 3) + payload.size()) << "a and the buffer dense, b compressed";
    EXPECT_LT(up, 4 * g.size() / 10);
    FRUGAL_RETURN_IF_ERROR(fedavg->EndRound(view));
    const std::vector<float> g1 = model.Flat();
    std::map<std::string, std::vector<float>> state;
    fedavg->VisitState([&](std::string_view name, std::span<float> v) {
      state[std::string(name)] = std::vector<float>(v.begin(), v.end());
    });
    EXPECT_EQ(state.size(), 1u);
    EXPECT_TRUE(state.count("client/0/b"));
    const std::vector<float>& residual = state["client/0/b"];
    size_t kept = 0;
    for (size_t i = 0; i < 20000; ++i) {
      const size_t k = 5 + i;
      // delta = what the server applied + what the client still owes.
      EXPECT_NEAR(g1[k] - g[k] + residual[i], x0[k] - g[k], 1e-5) << i;
      kept += g1[k] != g[k];
    }
    EXPECT_EQ(kept, 200u) << "top 1% of 20000";
    for (size_t k = 0; k < 5; ++k) EXPECT_FLOAT_EQ(g1[k], x0[k]) << "dense parameter";
    // Client 1 has its own residual; client 0's is untouched by it.
    fedavg->BeginRound(1, view);
    fedavg->LoadGlobal(view);
    TrainToy(model, 1);
    FRUGAL_RETURN_IF_ERROR(fedavg->AddUpload(1, 1.0, view).status());
    std::map<std::string, std::vector<float>> after;
    fedavg->VisitState([&](std::string_view name, std::span<float> v) {
      after[std::string(name)] = std::vector<float>(v.begin(), v.end());
    });
    EXPECT_EQ(after.size(), 2u);
    EXPECT_EQ(after["client/0/b"], residual);
    EXPECT_NE(after["client/1/b"], residual);
    return fedavg->EndRound(view);
  }));
}

// Fixed-size payloads: the upload is exactly the wire size of fp16's payload for b.
TEST(FedAvgUploads, Fp16UploadsCountTheirWireSize) {
  const StrategyPlan plan = Plan("fedavg:clients=3", "fp16");
  ExpectAllOk(RunRanks(1, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(Server server, MakeServer(plan, t));
    FederatedAveraging* fedavg = server.fedavg.get();
    ToyModel model;
    ModelBuffers view = model.View();
    fedavg->BeginRound(0, view);
    uint64_t total = 0;
    for (int64_t c : {0, 1, 2}) {
      fedavg->LoadGlobal(view);
      TrainToy(model, c);
      FRUGAL_ASSIGN_OR_RETURN(const uint64_t up, fedavg->AddUpload(c, 1.0, view));
      total += up;
    }
    const std::optional<uint64_t> bits = fedavg->compressor()->WireBits(TensorInfo("b", 20000));
    EXPECT_TRUE(bits.has_value());
    EXPECT_EQ(*bits, 8 * (kWireHeaderBytes + 2 * 20000));
    EXPECT_EQ(total, 3 * (4 * (5 + 3) + *bits / 8));
    return fedavg->EndRound(view);
  }));
}

}  // namespace
}  // namespace frugal
