// Local SGD's average run beside the next period's local steps (SyncSpec::overlap): CoCoD-SGD
// (Shen et al. 2019), Overlap Local SGD (Wang et al. 2020). See overlap_average.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal/work.h"
#include "strategy/model_average.h"

namespace frugal::strategy_internal {

// One round in flight at most:
//   Start(model)     copies the averaged parts of the model (x_k: parameters, and the buffers and
//                    momenta `parts` names) and averages the copy on the transport's thread, in
//                    the background, while the training thread goes on computing;
//   Complete(model)  waits for that average (avg_k) and applies it to the model as it is now,
//                    after the local steps taken meanwhile: x = avg_k + (x - x_k).
// So each worker keeps its own progress since x_k and replaces x_k by the workers' average; with
// no step between Start and Complete the model becomes avg_k exactly. A runner without a thread
// of its own runs the average at Start; the result is the same bits, later or sooner.
// Not thread safe: Start and Complete are called by the training thread.
class OverlappedAverage {
 public:
  // `average` averages the buffers it is given over the workers, on the transport's thread.
  using AverageFn = std::function<Status(Transport&, uint64_t step, ModelBuffers&)>;

  OverlappedAverage(AverageParts parts, Duration timeout, AverageFn average);
  ~OverlappedAverage();

  // The model's layout, once, before the first Start.
  void Shape(const ModelBuffers& model);
  Status Start(uint64_t step, const ModelBuffers& model, TransportRunner& runner);
  // Nothing to do when no round is in flight.
  Status Complete(ModelBuffers& model);

 private:
  AverageParts parts_;
  Duration timeout_;
  AverageFn average_;
  std::vector<std::vector<float>> storage_;  // the copy the average runs on
  ModelBuffers copy_;                        // views of storage_, named as the model's
  std::vector<float> taken_;                 // x_k, packed, as Start found it
  std::unique_ptr<Work> work_;               // the background average, if one runs
  bool in_flight_ = false;
};

}  // namespace frugal::strategy_internal
