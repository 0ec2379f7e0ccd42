// The engine under LibTorch training, ranks as threads: every overlap mode ends with the same
// parameters as the blocking path, one-step delay against a serial reference, the timeline's
// compute phases, and the compute-only mode.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "frugal/engine.h"
#include "frugal/inproc_transport.h"
#include "frugal/reducer.h"
#include "frugal_torch/data.h"
#include "frugal_torch/engine_optimizer.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::OverlapMode;
using frugal::Status;
using frugal::Transport;

using testing_torch::Data;
using testing_torch::ExpectAllOk;
using testing_torch::Ring;

TrainOptions SmallRun(const std::string& model) {
  TrainOptions options;
  options.model = model;
  options.batch_size = 16;
  options.max_steps = 5;
  options.seed = 11;
  options.lr = 0.05;
  options.momentum = 0.9;
  options.weight_decay = 1e-4;
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 200;
  return options;
}

struct RunResult {
  std::vector<std::vector<float>> parameters;  // per rank
  std::vector<TrainSummary> summaries;
};

RunResult TrainRanks(int n, const TrainOptions& options) {
  RunResult result;
  result.parameters.resize(n);
  result.summaries.resize(n);
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    auto reducer = Ring(t);
    TrainCallbacks callbacks;
    callbacks.on_final_parameters = [&, rank = t.rank()](const std::vector<float>& p) {
      result.parameters[rank] = p;
    };
    FRUGAL_ASSIGN_OR_RETURN(result.summaries[t.rank()],
                            Train(t, *reducer, Data(), options, callbacks));
    return Status::Ok();
  }));
  return result;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Two ranks: a + b is exact in any bucket layout, so every overlap mode must reproduce the
// blocking path's parameters bit for bit (priority applies the same optimizer formula per
// parameter, in the next forward).
TEST(EngineTraining, EveryModeEndsBitIdenticalToTheBlockingPath) {
  torch::set_num_threads(1);
  for (const std::string model : {"mlp", "cnn"}) {
    TrainOptions blocking = SmallRun(model);
    // A rate that changes at every step (a linear warm-up over the first three steps, then a
    // step decay): a deferred update must use the rate of the step that produced it.
    const double steps_per_epoch = 60000.0 / 2 / blocking.batch_size;
    blocking.schedule = LrScheduleKind::kStep;
    blocking.warmup_epochs = 3 / steps_per_epoch;
    blocking.lr_milestones = {4 / steps_per_epoch};
    blocking.lr_gamma = 0.5;
    const RunResult reference = TrainRanks(2, blocking);
    ASSERT_TRUE(SameBits(reference.parameters[0], reference.parameters[1]));
    struct Case {
      OverlapMode mode;
      frugal::FusionPolicy fusion;
    };
    for (const Case& c : {Case{OverlapMode::kNone, frugal::FusionPolicy::kOff},
                          Case{OverlapMode::kWfbp, frugal::FusionPolicy::kOff},
                          Case{OverlapMode::kFusion, frugal::FusionPolicy::kCycle},
                          Case{OverlapMode::kFusion, frugal::FusionPolicy::kMgWfbp},
                          Case{OverlapMode::kPriority, frugal::FusionPolicy::kOff}}) {
      TrainOptions options = blocking;
      OverlapOptions overlap;
      overlap.mode = c.mode;
      overlap.fusion = c.fusion;
      overlap.engine.mgwfbp_warmup_steps = 1;
      overlap.engine.mgwfbp_profile_steps = 2;
      overlap.engine.partition_bytes = 64 << 10;  // several partitions for the larger tensors
      options.overlap = overlap;
      const RunResult run = TrainRanks(2, options);
      const std::string what = model + " " + std::string(frugal::OverlapModeName(c.mode)) + " " +
                               std::string(frugal::FusionPolicyName(c.fusion));
      for (int r = 0; r < 2; ++r) {
        EXPECT_TRUE(SameBits(run.parameters[r], reference.parameters[0])) << what << " rank " << r;
        EXPECT_TRUE(run.summaries[r].params_consistent) << what;
        EXPECT_EQ(run.summaries[r].overlap, frugal::OverlapModeName(c.mode));
        EXPECT_GT(run.summaries[r].step_seconds_median, 0);
        // Every gradient went through the engine's reducer, and timed.
        EXPECT_GT(run.summaries[r].comm_seconds, 0) << what;
        EXPECT_GT(run.summaries[r].negotiation_bytes_per_worker, 0u) << what;
        // Without overlap the training thread waits for every bucket as soon as it is submitted
        // (before the engine's first cycle ends): communication is waited for, not hidden.
        if (c.mode == OverlapMode::kNone) {
          EXPECT_LT(run.summaries[r].comm_hidden_fraction, 0.5) << what;
        }
        EXPECT_EQ(run.summaries[r].test_accuracy, reference.summaries[0].test_accuracy) << what;
      }
    }
  }
}

// One-step delay on a linear model: step k applies the average of the gradients of step k - 1
// (computed at the parameters of step k - 1), Synchronize applies the last one. The reference
// repeats that schedule serially with plain torch.
TEST(EngineTraining, OneStepDelayAppliesThePreviousStepsAverage) {
  torch::set_num_threads(1);
  const int n = 2;
  const int steps = 4;
  const double lr = 0.1;
  auto batch = [](int rank, int step) {
    at::Generator g = at::detail::createCPUGenerator(1000 + 10 * rank + step);
    return std::make_pair(torch::randn({8, 4}, g), torch::randn({8, 3}, g));
  };
  // The ranks are threads: seeding torch's global generator and drawing the initial weights
  // must not interleave between them, or the ranks (and the reference) start from other weights.
  std::mutex init_mutex;
  auto init = [&init_mutex] {
    std::lock_guard<std::mutex> lock(init_mutex);
    torch::manual_seed(3);
    return torch::nn::Linear(4, 3);
  };
  auto loss_of = [](torch::nn::Linear& m, const torch::Tensor& x, const torch::Tensor& y) {
    return torch::mse_loss(m->forward(x), y);
  };
  std::vector<std::vector<float>> finals(n);
  for (OverlapMode mode : {OverlapMode::kNone, OverlapMode::kWfbp, OverlapMode::kPriority}) {
    ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
      auto reducer = Ring(t);
      torch::nn::Linear model = init();
      torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(lr));
      OverlapOptions overlap;
      overlap.mode = mode;
      overlap.od_sgd = true;
      FRUGAL_ASSIGN_OR_RETURN(
          std::unique_ptr<EngineSession> session,
          EngineSession::Start(t, *reducer, *model, sgd, overlap, std::chrono::seconds(30)));
      for (int step = 0; step < steps; ++step) {
        auto [x, y] = batch(t.rank(), step);
        session->optimizer().BeginStep();
        FRUGAL_RETURN_IF_ERROR(session->optimizer().Backward(loss_of(model, x, y)));
        FRUGAL_RETURN_IF_ERROR(session->optimizer().Step());
      }
      FRUGAL_RETURN_IF_ERROR(session->Finish().status());
      std::vector<float> flat;
      for (const auto& p : model->parameters()) {
        flat.insert(flat.end(), p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
      }
      finals[t.rank()] = flat;
      return Status::Ok();
    }));
    // Serial reference.
    torch::nn::Linear ref = init();
    std::vector<torch::Tensor> previous;  // averaged gradients of the previous step
    auto apply = [&](const std::vector<torch::Tensor>& avg) {
      torch::NoGradGuard no_grad;
      auto params = ref->parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].add_(avg[i], -lr);
    };
    for (int step = 0; step <= steps; ++step) {
      std::vector<torch::Tensor> avg;
      if (step < steps) {
        std::vector<std::vector<torch::Tensor>> grads(n);
        for (int r = 0; r < n; ++r) {
          auto [x, y] = batch(r, step);
          ref->zero_grad();
          loss_of(ref, x, y).backward();
          for (const auto& p : ref->parameters()) grads[r].push_back(p.grad().clone());
        }
        for (size_t i = 0; i < grads[0].size(); ++i) {
          avg.push_back((grads[0][i] + grads[1][i]) * (1.0f / static_cast<float>(n)));
        }
      }
      if (!previous.empty()) apply(previous);
      previous = avg;
    }
    std::vector<float> want;
    for (const auto& p : ref->parameters()) {
      want.insert(want.end(), p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(finals[r].size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_FLOAT_EQ(finals[r][i], want[i]) << frugal::OverlapModeName(mode) << " " << i;
      }
    }
  }
}

TEST(EngineTraining, TimelineHasComputeAndCommunicationPhasesOfEveryRank) {
  torch::set_num_threads(1);
  TrainOptions options = SmallRun("mlp");
  options.max_steps = 3;
  OverlapOptions overlap;
  overlap.mode = OverlapMode::kPriority;
  overlap.timeline = true;
  options.overlap = overlap;
  const RunResult run = TrainRanks(2, options);
  ASSERT_FALSE(run.summaries[0].timeline_json.empty());
  const nlohmann::json doc = nlohmann::json::parse(run.summaries[0].timeline_json);
  std::set<std::string> phases;
  std::set<int> pids;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    phases.insert(e["name"].get<std::string>());
    pids.insert(e["pid"].get<int>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  for (const char* phase :
       {"forward", "backward", "step", "queue", "negotiate", "communicate", "metrics"}) {
    EXPECT_TRUE(phases.count(phase)) << phase;
  }
}

TEST(EngineTraining, SkipCommTrainsWithoutExchangingGradients) {
  torch::set_num_threads(1);
  TrainOptions options = SmallRun("mlp");
  OverlapOptions overlap;
  overlap.skip_comm = true;
  options.overlap = overlap;
  const RunResult run = TrainRanks(2, options);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(run.summaries[r].params_consistent);
    EXPECT_EQ(run.summaries[r].comm_seconds, 0);
  }
  EXPECT_FALSE(SameBits(run.parameters[0], run.parameters[1]));
}

}  // namespace
}  // namespace frugal_torch
