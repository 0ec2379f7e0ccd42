// Gossip strategies through frugal_torch's training loop, ranks as threads: D-PSGD on a complete
// graph is BSP, the bytes of a gossip run are exactly its messages, and drifting replicas report
// their spread, the consensus distance and the spectral gap; a gossip run's timeline, and a
// compute-only run's, marks when each gradient was ready.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using RunResult = testing_torch::StrategyRun;
using testing_torch::MaxAbsDifference;

RunResult TrainWith(int n, const std::string& arch, const std::string& sync,
                    const std::string& compress, const TrainOptions& options) {
  frugal::StrategyOptions strategy_options;
  strategy_options.arch = arch;
  strategy_options.sync = sync;
  strategy_options.compress = compress;
  return testing_torch::TrainWithStrategy(n, strategy_options, options);
}

TrainOptions SmallGossipRun() {
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = 16;
  options.max_steps = 6;
  options.seed = 5;
  options.lr = 0.05;
  options.momentum = 0;
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 200;
  options.overlap = OverlapOptions{};  // priority, as `frugal train`
  return options;
}

double Reported(const TrainSummary& s, const std::string& name) {
  for (const auto& [key, value] : s.strategy_report) {
    if (key == name) return value;
  }
  ADD_FAILURE() << "no " << name << " in the report";
  return -1;
}

// Plain SGD on the complete graph with uniform weights, mixing after the step: every rank takes
// the average of x - lr g_i, which is BSP's x - lr avg(g_i) up to float rounding. The paper's
// order (cta) adds each rank's own update after the average instead: another algorithm.
TEST(GossipTraining, AtcOnTheCompleteGraphIsBsp) {
  torch::set_num_threads(1);
  const TrainOptions options = SmallGossipRun();
  const RunResult bsp = TrainWith(3, "allreduce:ring", "bsp", "", options);
  const RunResult atc =
      TrainWith(3, "gossip:topology=complete,mixing=uniform,order=atc", "bsp", "", options);
  for (int r = 0; r < 3; ++r) {
    EXPECT_LT(MaxAbsDifference(atc.parameters[r], bsp.parameters[0]), 1e-5) << "rank " << r;
  }
  const RunResult cta = TrainWith(3, "gossip:topology=complete,mixing=uniform", "bsp", "", options);
  EXPECT_GT(MaxAbsDifference(cta.parameters[0], bsp.parameters[0]), 1e-4);
  EXPECT_GT(MaxAbsDifference(cta.parameters[0], cta.parameters[1]), 1e-5);
  EXPECT_DOUBLE_EQ(Reported(atc.summaries[0], "spectral_gap"), 1.0);
}

// D-PSGD on a ring of 4: every step every rank sends its whole model to its two neighbours, and
// nothing else is training traffic.
TEST(GossipTraining, BytesAreExactlyTheMessages) {
  torch::set_num_threads(1);
  const TrainOptions options = SmallGossipRun();
  const RunResult ring = TrainWith(4, "gossip:topology=ring", "bsp", "", options);
  const TrainSummary& s = ring.summaries[0];
  const uint64_t model_bytes = 4 * static_cast<uint64_t>(s.params);
  EXPECT_EQ(s.bytes_sent_per_worker, 6 * 2 * model_bytes);
  EXPECT_NEAR(Reported(s, "spectral_gap"), 2.0 / 3, 1e-9);  // eigenvalues 1, 1/3, 1/3, -1/3
  EXPECT_EQ(Reported(s, "graph_edges"), 4);
  // The summary names the neighbour exchange, not the reducer that only averages for evaluation.
  EXPECT_EQ(s.reducer.rfind("gossip:topology=ring,", 0), 0u) << s.reducer;
  EXPECT_NE(s.reducer.find(",algorithm=dpsgd"), std::string::npos) << s.reducer;
  // Local gossip every 3 steps: two rounds.
  const RunResult local = TrainWith(4, "gossip:topology=ring", "local:period=3", "", options);
  EXPECT_EQ(local.summaries[0].bytes_sent_per_worker, 2 * 2 * model_bytes);
  // SGP on the one-peer exponential graph: one neighbour, the model and the weight per step.
  const RunResult sgp = TrainWith(4, "gossip:algorithm=sgp", "bsp", "", options);
  EXPECT_EQ(sgp.summaries[0].bytes_sent_per_worker, 6 * (model_bytes + 4));
  // CHOCO with top-k 1% sends far less than D-PSGD.
  const RunResult choco =
      TrainWith(4, "gossip:topology=ring,algorithm=choco", "bsp", "topk:ratio=0.01", options);
  EXPECT_LT(choco.summaries[0].bytes_sent_per_worker, s.bytes_sent_per_worker / 20);
  EXPECT_GT(choco.summaries[0].bytes_sent_per_worker, 0u);
}

// The replicas drift: the averaged model is evaluated, the spread and the consensus distance
// (mean and max over the ranks) are reported.
TEST(GossipTraining, DriftingReplicasReportTheSpread) {
  torch::set_num_threads(1);
  TrainOptions options = SmallGossipRun();
  options.max_steps = 10;
  for (const std::string arch : {"gossip:topology=ring", "gossip:algorithm=sgp,overlap=1"}) {
    const RunResult run = TrainWith(4, arch, "bsp", "", options);
    const TrainSummary& s = run.summaries[0];
    ASSERT_EQ(s.history.size(), 1u);
    const EpochRecord& e = s.history[0];
    EXPECT_FALSE(s.identical_replicas);
    EXPECT_GT(e.consensus_distance, 0) << arch;
    EXPECT_GE(e.consensus_distance_max, e.consensus_distance) << arch;
    EXPECT_LE(e.rank_accuracy_min, e.rank_accuracy_max) << arch;
    EXPECT_GT(e.test_accuracy, 0.3) << arch;
    EXPECT_GT(MaxAbsDifference(run.parameters[0], run.parameters[2]), 0) << arch;
  }
}

// AD-PSGD under --sync asp trains without a global barrier and reports its pairwise exchanges.
TEST(GossipTraining, AsynchronousPairwiseGossipTrains) {
  torch::set_num_threads(1);
  TrainOptions options = SmallGossipRun();
  options.max_steps = 10;
  const RunResult run = TrainWith(4, "gossip:topology=ring", "asp", "", options);
  double started = 0;
  double served = 0;
  for (const TrainSummary& s : run.summaries) {
    for (const auto& [key, value] : s.strategy_report) {
      if (key == "pair_exchanges_started") started += value;
      if (key == "pair_exchanges_served") served += value;
    }
  }
  EXPECT_EQ(started, 2 * 10);
  EXPECT_EQ(served, started);
  EXPECT_GT(run.summaries[0].history.back().test_accuracy, 0.3);
}

// A rank waits in the gossip round for a neighbour six times slower: that wait is communication,
// not computation. Rank 0 waits about 5 of rank 1's compute times each step, so the mean over
// both ranks of the time blocked in exchanges is well above a third of their mean compute time
// (which includes the straggler's sleep).
TEST(GossipTraining, WaitingForNeighboursIsCommunicationTime) {
  torch::set_num_threads(1);
  TrainOptions options = SmallGossipRun();
  options.max_steps = 12;
  options.stragglers = {Straggler{1, 6.0}};
  const RunResult run = TrainWith(2, "gossip:topology=ring", "bsp", "", options);
  for (const TrainSummary& s : run.summaries) {
    EXPECT_GT(s.comm_seconds, s.compute_seconds / 3);
    EXPECT_LE(s.compute_seconds + s.comm_seconds, s.wall_seconds * 1.05);
  }
}

// Every rank's trace in `timeline_json` has one backward span per step and marks every parameter
// of `model` "ready" once per step, inside the backward that produced it, and nothing queued to
// the engine: the trace gives the per-layer backward times of a profile (frugal simulate
// --timeline).
void ExpectReadyMarksInEachBackward(const std::string& timeline_json, int ranks, int64_t steps,
                                    const std::string& model_name) {
  ASSERT_FALSE(timeline_json.empty());
  const nlohmann::json doc = nlohmann::json::parse(timeline_json);
  for (int rank = 0; rank < ranks; ++rank) {
    std::map<int, std::string> rows;
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == rank) {
        rows[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
      }
    }
    std::vector<std::pair<int64_t, int64_t>> backwards;
    std::map<std::string, std::vector<int64_t>> ready;
    int queued = 0;
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] != "X" || e["pid"] != rank) continue;
      const std::string& row = rows[e["tid"].get<int>()];
      const int64_t ts = e["ts"].get<int64_t>();
      if (row == "compute" && e["name"] == "backward") {
        backwards.emplace_back(ts, ts + e["dur"].get<int64_t>());
      }
      if (row.rfind("tensor ", 0) == 0 && e["name"] == "ready") ready[row.substr(7)].push_back(ts);
      if (row.rfind("tensor ", 0) == 0 && e["name"] == "queue") ++queued;
    }
    ASSERT_EQ(backwards.size(), static_cast<size_t>(steps)) << "rank " << rank;
    EXPECT_EQ(queued, 0) << "rank " << rank;
    auto model = MakeModel(model_name, 1).value();
    size_t params = 0;
    for (const auto& item : model->named_parameters(/*recurse=*/true)) {
      ++params;
      const std::vector<int64_t>& marks = ready[item.key()];
      ASSERT_EQ(marks.size(), backwards.size()) << item.key() << " rank " << rank;
      for (size_t k = 0; k < marks.size(); ++k) {
        EXPECT_GE(marks[k], backwards[k].first) << item.key() << " step " << k;
        EXPECT_LE(marks[k], backwards[k].second + 1) << item.key() << " step " << k;
      }
    }
    EXPECT_EQ(ready.size(), params) << "rank " << rank;
  }
}

// D-PSGD keeps each step's gradients (nothing is submitted to the engine), yet its timeline marks
// every gradient ready in its backward.
TEST(GossipTraining, TimelineMarksEachGradientReadyInItsBackward) {
  torch::set_num_threads(1);
  TrainOptions options = SmallGossipRun();
  options.overlap->timeline = true;
  const RunResult run = TrainWith(2, "gossip:topology=ring", "bsp", "", options);
  ExpectReadyMarksInEachBackward(run.summaries[0].timeline_json, 2, options.max_steps,
                                 options.model);
}

// So does a compute-only run (--skip-comm, no engine): its trace is the profile of the compute
// alone.
TEST(GossipTraining, ComputeOnlyTimelineMarksEachGradientReady) {
  torch::set_num_threads(1);
  TrainOptions options = SmallGossipRun();
  options.overlap->timeline = true;
  options.overlap->skip_comm = true;
  const RunResult run = TrainWith(2, "allreduce", "bsp", "", options);
  ExpectReadyMarksInEachBackward(run.summaries[0].timeline_json, 2, options.max_steps,
                                 options.model);
}

}  // namespace
}  // namespace frugal_torch
