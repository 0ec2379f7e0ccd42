// End-of-epoch evaluation.
//
// Identical replicas: every rank evaluates one block of the BlockPartition of the test set and
// the sums are exchanged by the caller.
//
// Drifting replicas (Local SGD between averages): each rank first evaluates its own model on the
// images it is given (the whole evaluated test set, or its first --replica-eval-samples); the
// accuracies are exchanged (SumAcrossRanks of a one-hot vector, so every rank knows all of them)
// for the min and max. Then the parameters and float buffers are averaged exactly (frugal's ring
// all-reduce) into the model, every rank computes ||x_i - x_avg|| over the parameters from its
// saved copy (exchanged as a one-hot vector too, for the mean and the max), the caller evaluates
// the averaged model as it would identical replicas, and each rank's own parameters and buffers are
// restored. The averaging is evaluation traffic, reported apart from training bytes.
#include "evaluate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/timer.h"
#include "frugal_torch/distributed.h"
#include "frugal_torch/step_driver.h"
#include "strategy/model_average.h"

namespace frugal_torch::internal {

using frugal::Status;
using frugal::StatusOr;

EvalSums Evaluate(Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                  int rank, int world, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  model.eval();
  const frugal::Block block =
      frugal::BlockPartition(static_cast<size_t>(images.size(0)), world, rank);
  EvalSums sums;
  for (int64_t begin = static_cast<int64_t>(block.offset);
       begin < static_cast<int64_t>(block.offset + block.count); begin += batch_size) {
    const int64_t end = std::min<int64_t>(begin + batch_size, block.offset + block.count);
    const torch::Tensor x = images.slice(0, begin, end);
    const torch::Tensor y = labels.slice(0, begin, end);
    const torch::Tensor logits = model.forward(x);
    sums.loss_sum +=
        torch::nn::functional::cross_entropy(
            logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    sums.correct += logits.argmax(1).eq(y).sum().item<double>();
    sums.count += static_cast<double>(y.numel());  // predictions: samples, or positions
  }
  model.train();
  return sums;
}

StatusOr<SpreadReport> EvaluateAveragedModel(Classifier& model, torch::optim::Optimizer& optimizer,
                                             const torch::Tensor& images,
                                             const torch::Tensor& labels, int64_t batch_size,
                                             frugal::TransportRunner& runner,
                                             frugal::Duration timeout,
                                             const std::function<Status()>& evaluate) {
  SpreadReport report;
  // Every rank evaluates its own replica on the same images before the exchange; on a machine
  // whose ranks outnumber its cores they finish apart by up to about that time, which the exchange
  // waits out on top of its timeout (8 ranks of resnet20 on 2 cores: tens of seconds).
  const frugal::Stopwatch own_watch;
  const EvalSums own = Evaluate(model, images, labels, 0, 1, batch_size);
  const frugal::Duration allowance = std::chrono::duration_cast<frugal::Duration>(
      std::chrono::duration<double>(2 * own_watch.Seconds()));
  report.accuracy_samples = images.size(0);
  const double own_accuracy = own.correct / std::max(own.count, 1.0);

  frugal::ModelBuffers buffers = ModelBuffersOf(model, optimizer);
  std::vector<frugal::NamedBuffer> state = buffers.parameters;
  state.insert(state.end(), buffers.buffers.begin(), buffers.buffers.end());
  std::vector<float> saved;
  frugal::strategy_internal::Pack(state, saved);
  std::vector<double> accuracies;
  FRUGAL_RETURN_IF_ERROR(runner.RunAllowing(
      "evaluation average",
      [&](frugal::Transport& t) -> Status {
        const uint64_t before = t.bytes_sent();
        std::vector<double> one_hot(static_cast<size_t>(t.size()), 0.0);
        one_hot[static_cast<size_t>(t.rank())] = own_accuracy;
        FRUGAL_ASSIGN_OR_RETURN(accuracies, SumAcrossRanks(t, one_hot, timeout + allowance));
        FRUGAL_RETURN_IF_ERROR(frugal::strategy_internal::AverageExactly(t, state, timeout));
        report.bytes_sent = t.bytes_sent() - before;
        return Status::Ok();
      },
      allowance));
  report.accuracy_min = *std::min_element(accuracies.begin(), accuracies.end());
  report.accuracy_max = *std::max_element(accuracies.begin(), accuracies.end());
  double squared = 0;
  size_t offset = 0;
  for (const frugal::NamedBuffer& p : buffers.parameters) {
    for (float x : p.data) {
      const double d = static_cast<double>(saved[offset++]) - x;
      squared += d * d;
    }
  }
  const double distance = std::sqrt(squared);
  Status evaluated = evaluate();
  frugal::strategy_internal::Unpack(saved, state);
  FRUGAL_RETURN_IF_ERROR(evaluated);
  std::vector<double> distances;
  FRUGAL_RETURN_IF_ERROR(runner.Run("consensus distance", [&](frugal::Transport& t) -> Status {
    const uint64_t before = t.bytes_sent();
    std::vector<double> mine(static_cast<size_t>(t.size()), 0.0);
    mine[static_cast<size_t>(t.rank())] = distance;
    FRUGAL_ASSIGN_OR_RETURN(distances, SumAcrossRanks(t, mine, timeout));
    report.bytes_sent += t.bytes_sent() - before;
    double sum = 0;
    for (double d : distances) sum += d;
    report.consensus_distance = sum / t.size();
    report.consensus_distance_max = *std::max_element(distances.begin(), distances.end());
    return Status::Ok();
  }));
  return report;
}

}  // namespace frugal_torch::internal
