// Evaluation of the model at the end of an epoch (see evaluate.cc). Internal to frugal_torch.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal_torch/models.h"

namespace frugal_torch::internal {

struct EvalSums {
  double loss_sum = 0;
  double correct = 0;
  double count = 0;
};

// Loss and accuracy sums of `model` over block `rank` of `world` blocks of the test set
// (world = 1: the whole set).
EvalSums Evaluate(Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                  int rank, int world, int64_t batch_size);

// What evaluating drifting replicas adds: the accuracy of each rank's own model on the images
// EvaluateAveragedModel is given (min and max over ranks), the consensus distance mean_i ||x_i -
// x_avg|| (parameters only), and the bytes the averaging sent from this rank.
struct SpreadReport {
  double accuracy_min = 0;
  double accuracy_max = 0;
  int64_t accuracy_samples = 0;       // images each rank's own model was evaluated on
  double consensus_distance = 0;      // mean over the ranks
  double consensus_distance_max = 0;  // max over the ranks
  uint64_t bytes_sent = 0;
};

// For strategies whose replicas differ: measures the spread, replaces the model (parameters and
// float buffers) by the average over the ranks for the caller's `evaluate`, and puts every
// rank's own model back afterwards. Collective; the exchanges run through `runner`.
frugal::StatusOr<SpreadReport> EvaluateAveragedModel(
    Classifier& model, torch::optim::Optimizer& optimizer, const torch::Tensor& images,
    const torch::Tensor& labels, int64_t batch_size, frugal::TransportRunner& runner,
    frugal::Duration timeout, const std::function<frugal::Status()>& evaluate);

}  // namespace frugal_torch::internal
