// Helpers shared by the tests that train through frugal_torch.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/step_cost.h"
#include "frugal/strategy.h"
#include "frugal/transport.h"
#include "frugal_torch/data.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"

namespace frugal_torch::testing_torch {

// Fashion-MNIST, loaded once per test binary (the tests need the Debian package).
inline const FashionMnist& Data() {
  static const FashionMnist* data = [] {
    auto loaded = LoadFashionMnist();
    if (!loaded.ok()) throw std::runtime_error(loaded.status().ToString());
    return new FashionMnist(std::move(loaded).value());
  }();
  return *data;
}

// The trainable parameters of `model` (seed 1) as the step-cost model takes them.
inline std::vector<frugal::CostTensor> CostTensorsOf(std::string_view model) {
  std::vector<frugal::CostTensor> tensors;
  auto net = MakeModel(model, 1).value();
  for (const auto& item : net->named_parameters()) {
    std::vector<int64_t> shape(item.value().sizes().begin(), item.value().sizes().end());
    tensors.push_back({item.key(), static_cast<size_t>(item.value().numel()), std::move(shape)});
  }
  return tensors;
}

// The dense ring reducer with a 30 s timeout.
inline std::unique_ptr<frugal::GradientReducer> Ring(frugal::Transport& t) {
  frugal::DenseReducerOptions options;
  options.algorithm = "ring";
  options.timeout = std::chrono::seconds(30);
  return frugal::MakeDenseReducer(t, options).value();
}

// The largest |a[i] - b[i]|; the sizes must agree.
inline double MaxAbsDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

inline void ExpectAllOk(const std::vector<frugal::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

// A training run of `n` ranks as threads with the strategy of `strategy_options` (whose momentum
// and timeout are taken from `options`): every rank's final parameters, summary and the training
// time of its last epoch.
struct StrategyRun {
  std::vector<std::vector<float>> parameters;  // per rank
  std::vector<TrainSummary> summaries;
  std::vector<double> epoch_seconds;  // per rank, of its own training steps
};

inline StrategyRun TrainWithStrategy(int n, frugal::StrategyOptions strategy_options,
                                     const TrainOptions& options) {
  StrategyRun run;
  run.parameters.resize(n);
  run.summaries.resize(n);
  run.epoch_seconds.resize(n);
  strategy_options.momentum = options.momentum;
  strategy_options.timeout = options.timeout;
  const frugal::StrategyPlan plan = frugal::PlanStrategy(strategy_options).value();
  ExpectAllOk(frugal::RunRanks(n, [&](frugal::Transport& t) -> frugal::Status {
    FRUGAL_ASSIGN_OR_RETURN(
        auto reducer, frugal::MakeStrategyReducer(plan, t, 0, frugal::DefaultCompressorRegistry()));
    FRUGAL_ASSIGN_OR_RETURN(auto strategy, frugal::MakeStrategy(plan, t, *reducer));
    TrainCallbacks callbacks;
    const int rank = t.rank();
    callbacks.on_final_parameters = [&, rank](const std::vector<float>& p) {
      run.parameters[rank] = p;
    };
    callbacks.on_step = [&, rank](const StepProgress& p) {
      run.epoch_seconds[rank] = p.epoch_seconds;
    };
    FRUGAL_ASSIGN_OR_RETURN(run.summaries[rank],
                            Train(t, *reducer, *strategy, Data(), options, callbacks));
    return frugal::Status::Ok();
  }));
  return run;
}

}  // namespace frugal_torch::testing_torch
