// Gradient hooks, layer-wise updates and one-step delay over the communication engine.
//
// Create lists the trainable float32 parameters in registration order (index i = engine
// priority i), gives each a float buffer per slot (two slots under od_sgd, so that step k's
// reduction can run while step k-1's result is applied) and, except for kNone and skip_comm,
// registers a hook on each: OnGradient copies the gradient backward just produced into the buffer
// of the current slot and submits it (name, shape, priority, step). Step then submits zeros for
// parameters whose hook did not fire, and
//  - kWfbp / kFusion: waits for every parameter's reduction (WaitParams), writes the averages
//    into the gradients (UnpackParams) and runs the optimizer's step;
//  - kPriority: marks every parameter's update pending, with the learning rates of this step.
//    BeginStep installs the gate: a thread-local RecordFunction start callback that, for each
//    input of an ATen operation (or each tensor of a list input, as aten::lstm's weights) that
//    is a parameter with a pending update, runs ApplyOne - wait for that parameter's reduction,
//    write its average into its gradient, and run the optimizer's step with every other
//    gradient set aside (so the optimizer updates that parameter only, with its own state and
//    formula). The next forward thus starts as soon as the first layer is updated. Backward
//    removes the gate and applies whatever the forward did not read;
//  - od_sgd: waits for and applies the previous step's slot, leaving this step's in flight;
//    Synchronize applies the last one;
//  - kNone: packs the gradients into the PlanBuckets buckets, submits them, waits, unpacks, steps.
// A gate error (a failed wait inside the callback, which cannot return a Status) is kept in
// gate_error_ and returned by the next Backward, Step or Synchronize.
#include "frugal_torch/engine_optimizer.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "frugal/reducer.h"
#include "frugal/timer.h"

namespace frugal_torch {

using frugal::Clock;
using frugal::Status;

struct EngineOptimizer::Param {
  torch::Tensor tensor;
  std::string name;
  std::vector<int64_t> shape;
  size_t numel = 0;
  std::array<std::vector<float>, 2> buffers;
  std::array<std::unique_ptr<frugal::Work>, 2> works;
  unsigned hook = 0;
  bool has_hook = false;
  bool hooked = false;          // its hook fired in this step's backward
  bool update_pending = false;  // kPriority: reduced (or in flight), not yet applied
};

namespace {

// The EngineOptimizer whose gate is installed on this thread, and whether the gate is running
// (its own torch operations must not re-enter it). Thread-local because ATen's callback is a
// plain function pointer; it points only at a gate installed by this thread.
thread_local EngineOptimizer::Gate* tls_gate = nullptr;
thread_local bool tls_in_gate = false;

void CopyToBuffer(const torch::Tensor& grad, std::vector<float>& buffer) {
  const torch::Tensor c = grad.to(torch::kFloat).contiguous();
  std::memcpy(buffer.data(), c.data_ptr<float>(), buffer.size() * sizeof(float));
}

void WriteGrad(torch::Tensor& param, const std::vector<float>& buffer) {
  torch::NoGradGuard no_grad;
  torch::Tensor averaged = torch::from_blob(const_cast<float*>(buffer.data()), param.sizes(),
                                            torch::TensorOptions().dtype(torch::kFloat));
  if (!param.grad().defined()) {
    param.mutable_grad() = averaged.clone();
  } else {
    param.mutable_grad().copy_(averaged);
  }
}

}  // namespace

struct EngineOptimizer::Gate {
  EngineOptimizer* owner = nullptr;
  at::CallbackHandle handle = 0;

  static std::unique_ptr<at::ObserverContext> OnOp(const at::RecordFunction& fn) {
    Gate* gate = tls_gate;
    if (gate == nullptr || tls_in_gate) return nullptr;
    EngineOptimizer& self = *gate->owner;
    tls_in_gate = true;
    auto apply = [&](const at::Tensor& tensor) {
      auto it = self.by_impl_.find(tensor.unsafeGetTensorImpl());
      if (it == self.by_impl_.end() || !self.params_[it->second]->update_pending) return;
      Status status = self.ApplyOne(it->second);
      if (!status.ok() && self.gate_error_.ok()) self.gate_error_ = status;
    };
    for (const c10::IValue& input : fn.inputs()) {
      if (input.isTensor()) {
        apply(input.toTensor());
      } else if (input.isTensorList()) {  // e.g. aten::lstm's weights
        for (const at::Tensor& tensor : input.toTensorVector()) apply(tensor);
      }
    }
    tls_in_gate = false;
    return nullptr;
  }
};

EngineOptimizer::EngineOptimizer(frugal::TensorExchange* engine, torch::optim::Optimizer& optimizer,
                                 EngineOptimizerOptions options)
    : engine_(engine), optimizer_(optimizer), options_(std::move(options)) {}

frugal::StatusOr<std::unique_ptr<EngineOptimizer>> EngineOptimizer::Create(
    frugal::TensorExchange* engine, torch::nn::Module& module, torch::optim::Optimizer& optimizer,
    EngineOptimizerOptions options) {
  FRUGAL_CHECK(engine != nullptr || options.skip_comm, "EngineOptimizer needs an engine");
  std::unique_ptr<EngineOptimizer> self(new EngineOptimizer(engine, optimizer, options));
  const int slots = options.od_sgd ? 2 : 1;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    FRUGAL_CHECK(item.value().scalar_type() == torch::kFloat, "parameter ", item.key(),
                 " is not float32");
    auto p = std::make_unique<Param>();
    p->tensor = item.value();
    p->name = item.key();
    p->shape = item.value().sizes().vec();
    p->numel = static_cast<size_t>(item.value().numel());
    const bool per_param = !options.skip_comm && !self->uses_buckets();
    for (int s = 0; s < slots && per_param; ++s) p->buffers[s].resize(p->numel);
    self->by_impl_[p->tensor.unsafeGetTensorImpl()] = self->params_.size();
    self->params_.push_back(std::move(p));
  }
  EngineOptimizer* raw = self.get();
  // Hooks submit each gradient as it is ready; a compute-only run with a timeline still marks
  // when each was ready, so that its trace is a profile (frugal simulate --timeline).
  const bool hooks = options.skip_comm ? options.timeline != nullptr
                                       : options.overlap != frugal::OverlapMode::kNone;
  if (hooks) {
    for (size_t i = 0; i < raw->params_.size(); ++i) {
      Param& p = *raw->params_[i];
      p.hook = p.tensor.register_hook([raw, i](torch::Tensor grad) { raw->OnGradient(i, grad); });
      p.has_hook = true;
    }
  }
  if (raw->uses_buckets()) {
    std::vector<frugal::TensorSpec> specs;
    std::vector<size_t> order;
    for (size_t i = raw->params_.size(); i-- > 0;) {
      specs.push_back({raw->params_[i]->name, raw->params_[i]->numel, raw->params_[i]->shape});
      order.push_back(i);
    }
    raw->buckets_ = frugal::PlanBuckets(specs, options.bucket_cap_bytes);
    size_t spec_index = 0;
    for (const frugal::BucketInfo& bucket : raw->buckets_) {
      std::vector<size_t> indices;
      for (const frugal::BucketEntry& entry : bucket.entries) {
        while (specs[spec_index].name != entry.name) ++spec_index;
        indices.push_back(order[spec_index++]);
      }
      raw->bucket_params_.push_back(std::move(indices));
      std::array<std::vector<float>, 2> buffers;
      for (int s = 0; s < slots; ++s) buffers[s].resize(bucket.count);
      raw->bucket_buffers_.push_back(std::move(buffers));
    }
    raw->bucket_works_.resize(raw->buckets_.size());
  }
  return self;
}

EngineOptimizer::~EngineOptimizer() {
  RemoveGate();
  for (auto& p : params_) {
    if (p->has_hook) p->tensor.remove_hook(p->hook);
  }
  // The engine must not write into the buffers once they are freed.
  bool all_done = true;
  auto drain = [&](std::unique_ptr<frugal::Work>& work) {
    if (work && !work->Wait(options_.timeout).ok() && !work->IsCompleted()) all_done = false;
    work.reset();
  };
  for (auto& p : params_) {
    for (auto& w : p->works) drain(w);
  }
  for (auto& works : bucket_works_) {
    for (auto& w : works) drain(w);
  }
  if (!all_done && engine_ != nullptr) (void)engine_->Shutdown();
}

void EngineOptimizer::InstallGate() {
  if (gate_) return;
  gate_ = std::make_unique<Gate>();
  gate_->owner = this;
  tls_gate = gate_.get();
  gate_->handle =
      at::addThreadLocalCallback(at::RecordFunctionCallback(&Gate::OnOp).needsInputs(true));
}

void EngineOptimizer::RemoveGate() {
  if (!gate_) return;
  at::removeCallback(gate_->handle);
  if (tls_gate == gate_.get()) tls_gate = nullptr;
  gate_.reset();
}

void EngineOptimizer::BeginStep(bool exchange) {
  exchange_ = exchange;
  optimizer_.zero_grad();
  forward_begin_ = Clock::now();
  const bool any_pending =
      std::any_of(params_.begin(), params_.end(), [](const auto& p) { return p->update_pending; });
  if (any_pending) InstallGate();
}

Status EngineOptimizer::Backward(const torch::Tensor& loss) {
  RemoveGate();
  const auto forward_end = Clock::now();
  if (options_.timeline) {
    options_.timeline->Span("compute", "forward", forward_begin_, forward_end);
  }
  FRUGAL_RETURN_IF_ERROR(ApplyAllPending());
  const auto begin = Clock::now();
  loss.backward();
  if (options_.timeline) options_.timeline->Span("compute", "backward", begin, Clock::now());
  Status error = gate_error_;
  gate_error_ = Status::Ok();
  return error;
}

void EngineOptimizer::OnGradient(size_t index, const torch::Tensor& grad) {
  Param& p = *params_[index];
  if (options_.skip_comm || !exchange_) {
    // This step keeps its own gradients (compute only, gossip, a local step); the timeline still
    // marks when each was ready, as the engine's "queue" span does for a submitted one.
    if (options_.timeline) {
      const auto now = Clock::now();
      options_.timeline->Span("tensor " + p.name, "ready", now, now);
    }
    return;
  }
  const int slot = Slot(step_);
  if (p.works[slot]) {
    if (gate_error_.ok()) {
      gate_error_ = frugal::InternalError(fmt::format(
          "gradient of '{}' arrived while its previous reduction was not applied", p.name));
    }
    return;
  }
  CopyToBuffer(grad, p.buffers[slot]);
  SubmitParam(index, slot);
  p.hooked = true;
}

void EngineOptimizer::SubmitParam(size_t index, int slot) {
  Param& p = *params_[index];
  frugal::TensorRequest request;
  request.name = p.name;
  request.shape = p.shape;
  request.priority = static_cast<int>(index);
  request.step = step_;
  p.works[slot] = engine_->Submit(std::move(request), p.buffers[slot]);
}

Status EngineOptimizer::WaitWork(std::unique_ptr<frugal::Work>& work) {
  if (!work) return Status::Ok();
  Status status;
  if (work->IsCompleted()) {
    status = work->Wait(options_.timeout);
  } else {
    const auto begin = Clock::now();
    status = work->Wait(options_.timeout);
    const auto end = Clock::now();
    wait_seconds_ += std::chrono::duration<double>(end - begin).count();
    if (options_.timeline) options_.timeline->Span("compute", "wait", begin, end);
  }
  work.reset();
  return status;
}

void EngineOptimizer::ApplyBuffer(size_t index, int slot) {
  Param& p = *params_[index];
  if (!pulls_parameters()) {
    WriteGrad(p.tensor, p.buffers[slot]);
    return;
  }
  torch::NoGradGuard no_grad;
  p.tensor.copy_(torch::from_blob(p.buffers[slot].data(), p.tensor.sizes(),
                                  torch::TensorOptions().dtype(torch::kFloat)));
}

void EngineOptimizer::UnpackParams(int slot) {
  for (size_t i = 0; i < params_.size(); ++i) ApplyBuffer(i, slot);
}

Status EngineOptimizer::WaitParams(int slot) {
  Status first;
  for (auto& p : params_) {
    Status s = WaitWork(p->works[slot]);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

Status EngineOptimizer::SubmitBuckets(int slot) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::vector<float>& buffer = bucket_buffers_[b][slot];
    const frugal::BucketInfo& bucket = buckets_[b];
    for (size_t e = 0; e < bucket.entries.size(); ++e) {
      const frugal::BucketEntry& entry = bucket.entries[e];
      const torch::Tensor& grad = params_[bucket_params_[b][e]]->tensor.grad();
      float* dst = buffer.data() + entry.offset;
      if (!grad.defined()) {
        std::fill(dst, dst + entry.count, 0.0f);
      } else {
        const torch::Tensor c = grad.to(torch::kFloat).contiguous();
        std::memcpy(dst, c.data_ptr<float>(), entry.count * sizeof(float));
      }
    }
    frugal::TensorRequest request;
    request.name = bucket.name;
    request.priority = static_cast<int>(b);
    request.step = step_;
    bucket_works_[b][slot] = engine_->Submit(std::move(request), buffer);
  }
  return Status::Ok();
}

Status EngineOptimizer::WaitBuckets(int slot) {
  Status first;
  for (auto& works : bucket_works_) {
    Status s = WaitWork(works[slot]);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

void EngineOptimizer::UnpackBuckets(int slot) {
  torch::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const std::vector<float>& buffer = bucket_buffers_[b][slot];
    for (size_t e = 0; e < buckets_[b].entries.size(); ++e) {
      torch::Tensor& param = params_[bucket_params_[b][e]]->tensor;
      std::vector<float> part(buffer.begin() + static_cast<long>(buckets_[b].entries[e].offset),
                              buffer.begin() + static_cast<long>(buckets_[b].entries[e].offset +
                                                                 buckets_[b].entries[e].count));
      WriteGrad(param, part);
    }
  }
}

Status EngineOptimizer::ApplyOne(size_t index) {
  Param& p = *params_[index];
  p.update_pending = false;
  FRUGAL_RETURN_IF_ERROR(WaitWork(p.works[0]));
  const auto begin = Clock::now();
  if (pulls_parameters()) {
    ApplyBuffer(index, 0);
    if (options_.timeline) options_.timeline->Span("compute", "step", begin, Clock::now());
    return Status::Ok();
  }
  WriteGrad(p.tensor, p.buffers[0]);
  // Step this parameter alone: the optimizer skips parameters without a gradient. The update
  // belongs to the step that produced it, so it uses that step's learning rates, whatever the
  // schedule has set for the step now running.
  std::vector<std::pair<size_t, torch::Tensor>> aside;
  for (size_t j = 0; j < params_.size(); ++j) {
    if (j == index || !params_[j]->tensor.grad().defined()) continue;
    aside.emplace_back(j, params_[j]->tensor.grad());
    params_[j]->tensor.mutable_grad() = torch::Tensor();
  }
  auto& groups = optimizer_.param_groups();
  std::vector<double> current(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    current[g] = groups[g].options().get_lr();
    if (g < pending_lrs_.size()) groups[g].options().set_lr(pending_lrs_[g]);
  }
  optimizer_.step();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(current[g]);
  for (auto& [j, grad] : aside) params_[j]->tensor.mutable_grad() = grad;
  if (options_.timeline) options_.timeline->Span("compute", "step", begin, Clock::now());
  return Status::Ok();
}

Status EngineOptimizer::ApplyAllPending() {
  Status first;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i]->update_pending) continue;
    Status s = ApplyOne(i);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

Status EngineOptimizer::Step() {
  const auto begin = Clock::now();
  Status error = gate_error_;
  gate_error_ = Status::Ok();
  FRUGAL_RETURN_IF_ERROR(error);
  const int slot = Slot(step_);
  const int previous = Slot(step_ + 1);
  bool stepped = true;
  if (options_.skip_comm || !exchange_) {
    optimizer_.step();
  } else if (uses_buckets()) {
    FRUGAL_RETURN_IF_ERROR(SubmitBuckets(slot));
    if (options_.od_sgd) {
      stepped = previous_in_flight_;
      if (previous_in_flight_) {
        FRUGAL_RETURN_IF_ERROR(WaitBuckets(previous));
        UnpackBuckets(previous);
        optimizer_.step();
      }
      previous_in_flight_ = true;
    } else {
      FRUGAL_RETURN_IF_ERROR(WaitBuckets(slot));
      UnpackBuckets(slot);
      optimizer_.step();
    }
  } else {
    for (size_t i = 0; i < params_.size(); ++i) {
      Param& p = *params_[i];
      if (!p.hooked && !p.works[slot]) {
        // No hook fired (kNone over a parameter server, or a parameter the loss does not use).
        if (p.tensor.grad().defined()) {
          CopyToBuffer(p.tensor.grad(), p.buffers[slot]);
        } else {
          std::fill(p.buffers[slot].begin(), p.buffers[slot].end(), 0.0f);
        }
        SubmitParam(i, slot);
      }
      p.hooked = false;
    }
    if (options_.od_sgd) {
      stepped = previous_in_flight_;
      if (previous_in_flight_) {
        FRUGAL_RETURN_IF_ERROR(WaitParams(previous));
        UnpackParams(previous);
        optimizer_.step();
      }
      previous_in_flight_ = true;
    } else if (options_.overlap == frugal::OverlapMode::kPriority) {
      for (auto& p : params_) p->update_pending = true;
      pending_lrs_.clear();
      for (const auto& group : optimizer_.param_groups()) {
        pending_lrs_.push_back(group.options().get_lr());
      }
      stepped = false;
    } else {
      FRUGAL_RETURN_IF_ERROR(WaitParams(slot));
      UnpackParams(slot);
      if (!pulls_parameters()) optimizer_.step();
    }
  }
  if (options_.timeline && stepped) {
    options_.timeline->Span("compute", "step", begin, Clock::now());
  }
  ++step_;
  return Status::Ok();
}

Status EngineOptimizer::Synchronize() {
  RemoveGate();
  Status error = gate_error_;
  gate_error_ = Status::Ok();
  FRUGAL_RETURN_IF_ERROR(error);
  if (options_.skip_comm) return Status::Ok();
  if (options_.od_sgd && previous_in_flight_) {
    const int last = Slot(step_ + 1);  // the slot of step_ - 1
    if (uses_buckets()) {
      FRUGAL_RETURN_IF_ERROR(WaitBuckets(last));
      UnpackBuckets(last);
    } else {
      FRUGAL_RETURN_IF_ERROR(WaitParams(last));
      UnpackParams(last);
    }
    optimizer_.step();
    previous_in_flight_ = false;
  }
  return ApplyAllPending();
}

frugal::StatusOr<std::unique_ptr<EngineSession>> EngineSession::Start(
    frugal::Transport& t, frugal::GradientReducer& reducer, torch::nn::Module& module,
    torch::optim::Optimizer& optimizer, const OverlapOptions& overlap, frugal::Duration timeout,
    frugal::Strategy* strategy) {
  std::unique_ptr<EngineSession> self(new EngineSession());
  self->timeout_ = timeout;
  frugal::EngineOptions engine_options = overlap.engine;
  frugal::ApplyOverlapMode(overlap.mode, engine_options, overlap.fusion);
  engine_options.timeout = timeout;
  if (overlap.timeline) {
    self->timeline_ = std::make_unique<frugal::Timeline>(t.rank());
    engine_options.timeline = self->timeline_.get();
  }
  if (strategy != nullptr) {
    FRUGAL_ASSIGN_OR_RETURN(self->exchange_, strategy->StartExchange(self->timeline_.get()));
  }
  if (self->exchange_ == nullptr) {
    FRUGAL_ASSIGN_OR_RETURN(self->engine_, frugal::Engine::Start(t, reducer, engine_options));
    self->exchange_ = self->engine_.get();
  }
  EngineOptimizerOptions options;
  options.overlap = overlap.mode;
  options.od_sgd = overlap.od_sgd;
  options.skip_comm = overlap.skip_comm;
  // The loop waits a little longer than the engine's own waits, so that when a peer does not
  // answer it returns the engine's failure, which names that peer.
  options.timeout = self->engine_
                        ? timeout + std::min<frugal::Duration>(timeout / 2, std::chrono::seconds(2))
                        : 2 * timeout;
  options.timeline = self->timeline_.get();
  FRUGAL_ASSIGN_OR_RETURN(self->optimizer_,
                          EngineOptimizer::Create(self->exchange_, module, optimizer, options));
  return self;
}

EngineSession::~EngineSession() {
  optimizer_.reset();  // waits for its submissions
  if (exchange_ != nullptr) (void)exchange_->Shutdown();
}

Status EngineSession::Collective(std::string name, std::function<Status(frugal::Transport&)> fn,
                                 frugal::Duration allowance) {
  std::unique_ptr<frugal::Work> work = exchange_->Call(std::move(name), std::move(fn));
  Status status = work->Wait(timeout_ + allowance);
  if (!status.ok() && !work->IsCompleted()) {
    // `fn` may refer to the caller's frames, which end when this returns: the engine must never
    // run it later. Shutdown returns once the engine thread has stopped; a queued call then
    // fails without running. Callers on several threads may time out together.
    std::lock_guard<std::mutex> lock(shutdown_mutex_);
    (void)exchange_->Shutdown();
  }
  return status;
}

std::unique_ptr<frugal::Work> EngineSession::Background(
    std::string name, std::function<Status(frugal::Transport&)> fn) {
  return exchange_->Call(std::move(name), std::move(fn));
}

double EngineSession::comm_seconds() const { return exchange_->stats().comm_seconds; }

double EngineSession::hidden_fraction() const { return exchange_->stats().hidden_fraction(); }

uint64_t EngineSession::negotiation_bytes() const { return exchange_->stats().negotiation_bytes; }

frugal::StatusOr<std::string> EngineSession::Finish() {
  FRUGAL_RETURN_IF_ERROR(optimizer_->Synchronize());
  std::string trace;
  if (timeline_) {
    FRUGAL_RETURN_IF_ERROR(Collective("timeline", [&](frugal::Transport& t) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(trace, timeline_->Gather(t, timeout_));
      return Status::Ok();
    }));
  }
  optimizer_.reset();
  FRUGAL_RETURN_IF_ERROR(exchange_->Shutdown());
  return trace;
}

}  // namespace frugal_torch
