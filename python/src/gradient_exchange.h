// What a frugal.torch.DistributedOptimizer does across ranks: the strategy of `frugal train`
// (frugal/strategy.h, built by PlanStrategy from the same StrategyOptions) applied to a Python
// optimizer's parameters.
//
// Create (collective) plans the strategy (kInvalidArgument / kNotFound with PlanStrategy's one
// line for a refused combination), sets the engine's mode for the overlap asked for, and makes
// the strategy's reducer on the engine thread; from then on the engine sends the parameters'
// gradients through it. Per step, the Python side:
//   AveragesGradients(step)  whether this step's gradients are averaged (false: a local step of
//                            Local SGD, or skip_comm);
//   Submit(i, grad, step)    as the gradient of parameter i is ready (its hook; or all of them
//                            before the optimizer step with overlap none): averaged in place;
//   WaitAll()                before the optimizer step (or Wait(indices) for some parameters,
//                            when their updates are deferred to the next forward pass);
//   AfterStep(step, params)  after it: the strategy's exchange of parameters, if any (Local SGD's
//                            model average), on the engine thread.
// Begin(params) is called once, before the first step, with the replicas identical.
//
// Thread safety: one Python thread uses an exchange (its waits release the GIL in the bindings).
// Gradients must be contiguous float32 CPU tensors; a submitted gradient must not be written to
// until WaitAll returns.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dispatch_reducer.h"
#include "frugal/strategy.h"
#include "frugal/work.h"
#include "runtime.h"

namespace frugal_py {

struct ExchangeOptions {
  frugal::StrategyOptions strategy;
  std::string overlap = "fusion";  // none, wfbp, fusion or priority (frugal/engine.h)
  std::string fusion = "cycle";    // with overlap fusion: cycle or mgwfbp
  int64_t steps_per_epoch = 0;     // 0: unknown (epoch-based options are refused)
  std::vector<std::string> names;  // of the parameters, in registration order
  std::vector<std::vector<int64_t>> shapes;
};

// The strategy plan for `options` alone (no communication): what the factory refuses, refused
// here, before anything collective happens.
frugal::StatusOr<frugal::StrategyPlan> PlanExchange(const ExchangeOptions& options);

class GradientExchange {
 public:
  static frugal::StatusOr<std::unique_ptr<GradientExchange>> Create(Runtime& runtime,
                                                                    ExchangeOptions options);

  const frugal::StrategyPlan& plan() const { return plan_; }
  std::string strategy_name() const { return strategy_->name(); }
  std::string reducer_name() const { return path_->reducer->name(); }
  bool identical_replicas() const { return strategy_->traits().identical_replicas; }
  frugal::OverlapMode overlap() const { return mode_.overlap; }

  bool AveragesGradients(uint64_t step) const;
  void Submit(size_t index, const torch::Tensor& grad, uint64_t step);
  frugal::Status Wait(const std::vector<size_t>& indices);
  frugal::Status WaitAll();
  frugal::Status Begin(const std::vector<torch::Tensor>& params,
                       const std::vector<torch::Tensor>& momenta);
  frugal::Status AfterStep(uint64_t step, const std::vector<torch::Tensor>& params,
                           const std::vector<torch::Tensor>& momenta);
  // Bytes the strategy's own exchanges sent (the gradients' are the engine's).
  uint64_t strategy_bytes() const { return strategy_->bytes_sent(); }

 private:
  GradientExchange(Runtime& runtime, ExchangeOptions options)
      : runtime_(runtime), options_(std::move(options)) {}
  frugal::StepPoint Point(uint64_t step) const;
  frugal::ModelBuffers Buffers(const std::vector<torch::Tensor>& params,
                               const std::vector<torch::Tensor>& momenta) const;

  Runtime& runtime_;
  ExchangeOptions options_;
  EngineMode mode_;
  frugal::StrategyPlan plan_;
  std::shared_ptr<GradientPath> path_;
  std::unique_ptr<frugal::Strategy> strategy_;
  std::vector<std::unique_ptr<frugal::Work>> works_;
  std::vector<torch::Tensor> in_flight_;
};

}  // namespace frugal_py
