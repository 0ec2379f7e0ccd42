// Overlap of gradient communication with computation for LibTorch models, through frugal's
// communication engine (frugal/engine.h).
//
// EngineOptimizer wraps a torch optimizer and submits to a TensorExchange (frugal/engine.h): the
// engine, which answers with averaged gradients, or a parameter-server client, which answers with
// parameters (Result::kParameters: then "applying" a parameter's update means writing what came
// back into the parameter; the torch optimizer does not run, and kNone submits every parameter
// after backward as wfbp would). Per OverlapMode:
//   kNone      after backward, the gradients are packed into buckets (PlanBuckets over the
//              parameters in reverse registration order, bucket_cap_bytes) that are submitted to
//              the engine and waited for; then the optimizer steps.
//   kWfbp,     a gradient hook on every parameter copies the gradient into the parameter's buffer
//   kFusion    and submits it as soon as backward produces it (wait-free backpropagation); Step
//              waits for all of them, writes the averages into the gradients and steps.
//   kPriority  hooks as kWfbp, but Step does not wait: each parameter is updated on its own (the
//              optimizer's own step applied to that parameter only) just before an operation of
//              the next forward first reads it - layers nearer the input first, while later
//              layers' gradients are still being communicated (P3). Priorities are registration
//              indices, so the engine sends layers nearer the input first.
// od_sgd (one-step delay, any mode): Step applies the averaged gradients of the previous step,
// whose communication overlapped this step's computation, and leaves this step's in flight;
// Synchronize applies the last one.
// skip_comm: nothing is communicated; each rank steps with its own gradients (a compute-only
// lower bound; the ranks' parameters drift apart).
//
// Parameters get an engine priority equal to their index in registration order, names from
// named_parameters(). A parameter that gets no gradient contributes zeros (as DDP).
// The forward gate of kPriority is a thread-local ATen RecordFunction callback installed on the
// training thread between BeginStep and Backward.
//
// Not thread safe: one training thread uses an EngineOptimizer. Every wait is bounded by
// options.timeout. The engine, module and optimizer must outlive it; on destruction it waits for
// its outstanding submissions (so the engine no longer writes into its buffers).
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "frugal/engine.h"
#include "frugal/reducer.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal/timeline.h"
#include "frugal/transport.h"
#include "frugal_torch/engine_options.h"

namespace frugal_torch {

struct EngineOptimizerOptions {
  frugal::OverlapMode overlap = frugal::OverlapMode::kPriority;
  bool od_sgd = false;
  bool skip_comm = false;
  size_t bucket_cap_bytes = frugal::kDefaultBucketCapBytes;  // kNone
  frugal::Duration timeout = frugal::kDefaultTimeout;
  // Compute phases: forward, backward, step, wait; and when a step keeps its gradients
  // (BeginStep(false)), a "ready" mark on a gradient's row "tensor NAME" as its hook fires.
  frugal::Timeline* timeline = nullptr;
};

class EngineOptimizer {
 public:
  // `engine` may be null when options.skip_comm is set.
  static frugal::StatusOr<std::unique_ptr<EngineOptimizer>> Create(
      frugal::TensorExchange* engine, torch::nn::Module& module, torch::optim::Optimizer& optimizer,
      EngineOptimizerOptions options);
  ~EngineOptimizer();

  EngineOptimizer(const EngineOptimizer&) = delete;
  EngineOptimizer& operator=(const EngineOptimizer&) = delete;

  // The forward pass of the next step begins: zeroes the gradients and, under kPriority,
  // installs the gate that applies each pending parameter update right before it is read. With
  // exchange false the step's gradients are not communicated: Step applies this rank's own
  // gradients at once (a local step of Local SGD).
  void BeginStep(bool exchange = true);
  // loss.backward(), with the gradient hooks submitting to the engine as gradients appear.
  frugal::Status Backward(const torch::Tensor& loss);
  // Completes the step as the mode says (see above) and advances step().
  frugal::Status Step();
  // Applies every pending update, so the parameters are final and equal on every rank.
  frugal::Status Synchronize();

  uint64_t step() const { return step_; }
  // The step counter, for checkpoints (frugal/state_visitor.h). After Synchronize, nothing else
  // of a step is pending; with od_sgd that is only so at the end of an epoch.
  void VisitState(frugal::StateVisitor& visitor) { visitor.U64("step", step_); }
  // Seconds the training thread spent blocked on communication.
  double wait_seconds() const { return wait_seconds_; }
  const EngineOptimizerOptions& options() const { return options_; }

  struct Param;
  struct Gate;

 private:
  EngineOptimizer(frugal::TensorExchange* engine, torch::optim::Optimizer& optimizer,
                  EngineOptimizerOptions options);
  // The parameters come back from the exchange (a parameter server) instead of gradients.
  bool pulls_parameters() const {
    return engine_ != nullptr && engine_->result() == frugal::TensorExchange::Result::kParameters;
  }
  bool uses_buckets() const {
    return !options_.skip_comm && options_.overlap == frugal::OverlapMode::kNone &&
           !pulls_parameters();
  }
  // Writes the buffer of `slot` of parameter `index` where it belongs: into the gradient, or
  // into the parameter itself when the exchange pulls parameters.
  void ApplyBuffer(size_t index, int slot);

  int Slot(uint64_t step) const { return options_.od_sgd ? static_cast<int>(step % 2) : 0; }
  void OnGradient(size_t index, const torch::Tensor& grad);
  void SubmitParam(size_t index, int slot);
  frugal::Status WaitWork(std::unique_ptr<frugal::Work>& work);
  // Writes the averaged buffer of `slot` into each parameter's gradient.
  void UnpackParams(int slot);
  void UnpackBuckets(int slot);
  frugal::Status SubmitBuckets(int slot);
  frugal::Status WaitBuckets(int slot);
  frugal::Status WaitParams(int slot);
  // Waits for parameter `index`'s slot-0 reduction and steps the optimizer for it alone.
  frugal::Status ApplyOne(size_t index);
  frugal::Status ApplyAllPending();
  void InstallGate();
  void RemoveGate();

  frugal::TensorExchange* engine_;
  torch::optim::Optimizer& optimizer_;
  EngineOptimizerOptions options_;
  std::vector<std::unique_ptr<Param>> params_;
  std::unordered_map<const void*, size_t> by_impl_;
  std::vector<frugal::BucketInfo> buckets_;  // kNone
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<std::array<std::vector<float>, 2>> bucket_buffers_;
  std::vector<std::array<std::unique_ptr<frugal::Work>, 2>> bucket_works_;
  std::unique_ptr<Gate> gate_;
  frugal::Status gate_error_;
  bool exchange_ = true;             // this step's gradients are communicated
  std::vector<double> pending_lrs_;  // kPriority: learning rates of the pending updates' step
  bool previous_in_flight_ = false;  // od_sgd: the previous step's reductions await applying
  uint64_t step_ = 0;
  double wait_seconds_ = 0;
  frugal::Clock::time_point forward_begin_;
};

// The training loop's view of the engine: starts it (collective) with the reducer, wraps the
// optimizer in an EngineOptimizer, runs the loop's other collectives on the engine thread
// (Collective), and at the end gathers the timeline and stops the engine.
class EngineSession {
 public:
  // With a `strategy` that has an exchange of its own (Strategy::StartExchange: the parameter
  // server), the session runs over it instead of starting the engine; its pulls may then take
  // twice the timeout (the servers name missing ranks within one timeout).
  static frugal::StatusOr<std::unique_ptr<EngineSession>> Start(
      frugal::Transport& t, frugal::GradientReducer& reducer, torch::nn::Module& module,
      torch::optim::Optimizer& optimizer, const OverlapOptions& overlap, frugal::Duration timeout,
      frugal::Strategy* strategy = nullptr);
  ~EngineSession();

  EngineOptimizer& optimizer() { return *optimizer_; }
  // Runs `fn` with the transport on the engine thread and waits for it. If it does not complete
  // within the timeout (plus `allowance`) the engine is shut down before this returns, so `fn`
  // (which may refer to the caller's frames) never runs afterwards; later calls fail.
  frugal::Status Collective(std::string name, std::function<frugal::Status(frugal::Transport&)> fn,
                            frugal::Duration allowance = frugal::Duration::zero());
  // Queues `fn` on the engine thread and returns at once (TransportRunner::RunInBackground).
  std::unique_ptr<frugal::Work> Background(std::string name,
                                           std::function<frugal::Status(frugal::Transport&)> fn);
  // Seconds the engine spent reducing, and the share of it hidden behind computation.
  double comm_seconds() const;
  double hidden_fraction() const;
  // Bytes of the engine's negotiation messages this rank sent.
  uint64_t negotiation_bytes() const;
  // Collective: applies pending updates, gathers the timeline (when recorded; the whole trace on
  // every rank, empty otherwise) and stops the engine.
  frugal::StatusOr<std::string> Finish();

 private:
  EngineSession() = default;
  frugal::Duration timeout_{};
  std::mutex shutdown_mutex_;
  std::unique_ptr<frugal::Timeline> timeline_;
  std::unique_ptr<frugal::Engine> engine_;      // unless the strategy has its own exchange
  frugal::TensorExchange* exchange_ = nullptr;  // engine_ or the strategy's
  std::unique_ptr<EngineOptimizer> optimizer_;
};

}  // namespace frugal_torch
