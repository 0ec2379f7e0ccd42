// The step driver: one training step, the same for every strategy (frugal/strategy.h).
//
// Step(p, forward):
//   0. if strategy.ActsBeforeForward(p): every pending update is applied, then
//      strategy.BeforeForward(p, model, runner) may start an exchange of the model or change it;
//   1. exchange = strategy.AveragesGradients(p);
//   2. before forward: the engine optimizer's BeginStep(exchange) zeroes the gradients (and, under
//      priority overlap, installs the gate that applies the previous step's pending updates as
//      the forward reads each parameter);
//   3. forward: `forward()` returns the loss;
//   4. a straggler (options.straggler_factor > 1) sleeps (factor - 1) times its last measured
//      forward + backward time, so that its gradients appear that much later;
//   5. backward: with exchange, the gradient hooks submit each gradient to the engine as it is
//      produced (otherwise the rank keeps its own gradient);
//   6. the optimizer step (the engine optimizer's Step: wait for the averages as the overlap mode
//      says, or defer them to the next forward under priority; without exchange, the rank's own
//      gradient is applied at once);
//   5b. non-finite gradients (nan_policy.h): a hook registered before the engine's checks every
//      gradient as backward produces it. kAbort: a non-finite gradient is replaced by zeros before
//      it is submitted and Step returns kFailedPrecondition naming the rank, the step and the
//      tensor. kSkip: when the step's gradients are averaged, the ranks agree (one Allgatherv of
//      each rank's finding, on the transport's thread) before any is sent; if any rank has one,
//      no rank applies the step's update (skipped() says why); a step without averaging is
//      skipped by the rank alone;
//   7. if strategy.ExchangesAfterStep(p): every pending update is applied, then
//      strategy.AfterOptimizerStep(p, model, runner) exchanges parameters on the transport's
//      thread.
// Without the engine (TrainOptions::overlap unset) steps 5-6 use the blocking
// DistributedOptimizer. A strategy whose servers run the optimizer (the parameter server) has
// an exchange of its own (Strategy::StartExchange), which takes the engine's place in every
// overlap mode (priority when TrainOptions::overlap is unset): the hooks push the gradients, and
// what step 6 and the next forward's gate apply are the parameters the servers answered with.
//
// The driver is the TransportRunner of the strategy and of the training loop's own collectives:
// before Start and without the engine they run on the calling thread; with the engine, on its
// thread (EngineSession::Collective).
//
// Not thread safe: the training thread uses it. The module, optimizer, transport, reducer and
// strategy must outlive it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "frugal/reducer.h"
#include "frugal/strategy.h"
#include "frugal/timer.h"
#include "frugal_torch/distributed.h"
#include "frugal_torch/engine_optimizer.h"
#include "frugal_torch/engine_options.h"
#include "frugal_torch/nan_policy.h"

namespace frugal_torch::internal {
class NanGuard;
}

namespace frugal_torch {

struct StepDriverOptions {
  std::optional<OverlapOptions> overlap;  // unset: blocking DistributedOptimizer
  size_t bucket_cap_bytes = frugal::kDefaultBucketCapBytes;
  double straggler_factor = 1;  // > 1: this rank is a straggler
  frugal::Duration timeout = frugal::kDefaultTimeout;
  // Non-finite gradients (nan_policy.h); kSkip needs the gradients to be sent after backward
  // (overlap unset or OverlapMode::kNone, without od_sgd). `inject_nan`: this rank's NaN fault.
  NanPolicy nan_policy = NanPolicy::kAbort;
  std::optional<NanFault> inject_nan;
};

// The model's parameters, batch-norm buffers and SGD momentum buffers as named float buffers
// (views of the tensors' storage: they stay valid while the tensors live).
frugal::ModelBuffers ModelBuffersOf(torch::nn::Module& module, torch::optim::Optimizer& optimizer);

class StepDriver final : public frugal::TransportRunner {
 public:
  // Collective over `t`: verifies the bucket plan, starts the engine when asked for, and tells
  // the strategy the run begins (Strategy::Begin) with the identical starting model.
  static frugal::StatusOr<std::unique_ptr<StepDriver>> Start(
      frugal::Transport& t, frugal::GradientReducer& reducer, frugal::Strategy& strategy,
      torch::nn::Module& module, torch::optim::Optimizer& optimizer, StepDriverOptions options);
  ~StepDriver() override;

  // One step (see above); returns the loss `forward` computed.
  frugal::StatusOr<torch::Tensor> Step(const frugal::StepPoint& p,
                                       const std::function<torch::Tensor()>& forward);
  // Applies every pending update, so that the parameters are final for this step.
  frugal::Status Synchronize();
  // Synchronize, then Strategy::Settle: no exchange of the strategy is left in flight.
  frugal::Status Settle();
  // TransportRunner: runs `fn` with the transport on the thread that owns it.
  frugal::Status Run(std::string_view what,
                     const std::function<frugal::Status(frugal::Transport&)>& fn) override;
  frugal::Status RunAllowing(std::string_view what,
                             const std::function<frugal::Status(frugal::Transport&)>& fn,
                             frugal::Duration allowance) override;
  // With the engine, queues `fn` on its thread; without, nullptr.
  std::unique_ptr<frugal::Work> RunInBackground(
      std::string_view what, std::function<frugal::Status(frugal::Transport&)> fn) override;

  // Seconds the training thread was blocked on communication, the seconds the engine (or the
  // blocking reducer) spent reducing, and the share of it hidden behind computation. Both of the
  // first two include the strategy's own exchanges (BeforeForward, AfterOptimizerStep, Settle:
  // gossip rounds, model averages), during which the training thread waits.
  double blocked_seconds() const;
  double comm_seconds() const;
  double hidden_fraction() const;
  // Bytes of the engine's negotiation messages (0 without the engine); read on the transport's
  // thread (inside Run).
  uint64_t negotiation_bytes() const;
  bool uses_engine() const { return session_ != nullptr; }
  // Why the last step's update was skipped (--nan-policy skip), or nullptr when it was applied.
  const std::string* skipped() const { return skipped_ ? &*skipped_ : nullptr; }
  // The step counters of the blocking optimizer and of the engine's (frugal/state_visitor.h):
  // "dist/step", "engine/step". Between steps, after Synchronize.
  void VisitState(frugal::StateVisitor& visitor);
  // Collective: applies pending updates, gathers the timeline and stops the engine.
  frugal::StatusOr<std::string> Finish();

 private:
  StepDriver(frugal::Transport& t, frugal::Strategy& strategy, torch::nn::Module& module,
             torch::optim::Optimizer& optimizer, StepDriverOptions options);

  frugal::StatusOr<bool> CheckGradients(const frugal::StepPoint& p, bool exchange);

  frugal::Transport& t_;
  frugal::Strategy& strategy_;
  torch::nn::Module& module_;
  torch::optim::Optimizer& optimizer_;
  StepDriverOptions options_;
  std::unique_ptr<DistributedOptimizer> dist_;
  std::unique_ptr<EngineSession> session_;
  std::unique_ptr<internal::NanGuard> nan_guard_;
  std::optional<std::string> skipped_;
  double last_compute_seconds_ = 0;  // forward + backward of the last step (stragglers)
  double exchange_seconds_ = 0;      // in the strategy's BeforeForward, AfterOptimizerStep, Settle
};

}  // namespace frugal_torch
