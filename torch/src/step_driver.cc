// The step driver (see step_driver.h).
#include "frugal_torch/step_driver.h"

#include <c10/util/string_utils.h>
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "frugal/collectives.h"
#include "frugal/timer.h"
#include "nan_guard.h"

namespace frugal_torch {

using frugal::Clock;
using frugal::Status;
using frugal::StatusOr;

namespace {

std::span<float> FloatView(const torch::Tensor& t) {
  FRUGAL_CHECK(t.scalar_type() == torch::kFloat && t.is_contiguous(),
               "tensor is not a "
               "contiguous float32 tensor");
  return {t.data_ptr<float>(), static_cast<size_t>(t.numel())};
}

}  // namespace

frugal::ModelBuffers ModelBuffersOf(torch::nn::Module& module, torch::optim::Optimizer& optimizer) {
  frugal::ModelBuffers model;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    model.parameters.push_back({item.key(), FloatView(item.value())});
    auto state = optimizer.state().find(c10::guts::to_string(item.value().unsafeGetTensorImpl()));
    if (state == optimizer.state().end()) continue;
    auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state->second.get());
    if (sgd != nullptr && sgd->momentum_buffer().defined()) {
      model.momenta.push_back({item.key() + "/momentum", FloatView(sgd->momentum_buffer())});
    }
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    if (item.value().scalar_type() != torch::kFloat) continue;  // e.g. num_batches_tracked
    model.buffers.push_back({item.key(), FloatView(item.value())});
  }
  return model;
}

StatusOr<std::unique_ptr<StepDriver>> StepDriver::Start(
    frugal::Transport& t, frugal::GradientReducer& reducer, frugal::Strategy& strategy,
    torch::nn::Module& module, torch::optim::Optimizer& optimizer, StepDriverOptions options) {
  std::unique_ptr<StepDriver> self(new StepDriver(t, strategy, module, optimizer, options));
  DistributedOptimizerOptions dist_options;
  dist_options.bucket_cap_bytes = options.bucket_cap_bytes;
  dist_options.timeout = options.timeout;
  FRUGAL_ASSIGN_OR_RETURN(
      self->dist_, DistributedOptimizer::Create(t, reducer, module, optimizer, dist_options));
  {
    frugal::ModelBuffers model = ModelBuffersOf(module, optimizer);
    FRUGAL_RETURN_IF_ERROR(strategy.Begin(model));
  }
  if (options.nan_policy == NanPolicy::kSkip && options.overlap &&
      (options.overlap->mode != frugal::OverlapMode::kNone || options.overlap->od_sgd)) {
    return frugal::InvalidArgumentError(
        "--nan-policy skip needs --overlap none without --od-sgd: the ranks agree on a step "
        "before any of its gradients is sent");
  }
  // Before the engine's hooks, so that a gradient is checked before it is submitted.
  FRUGAL_ASSIGN_OR_RETURN(
      self->nan_guard_, internal::NanGuard::Create(module, options.nan_policy == NanPolicy::kAbort,
                                                   options.inject_nan));
  // A strategy with an exchange of its own (a parameter server's client) always starts it.
  if (options.overlap || strategy.traits().own_exchange) {
    FRUGAL_ASSIGN_OR_RETURN(self->session_,
                            EngineSession::Start(t, reducer, module, optimizer,
                                                 options.overlap.value_or(OverlapOptions{}),
                                                 options.timeout, &strategy));
  }
  return self;
}

StepDriver::StepDriver(frugal::Transport& t, frugal::Strategy& strategy, torch::nn::Module& module,
                       torch::optim::Optimizer& optimizer, StepDriverOptions options)
    : t_(t), strategy_(strategy), module_(module), optimizer_(optimizer), options_(options) {}

StepDriver::~StepDriver() = default;

// Whether the step's update is applied, after its backward (see step_driver.h, 5b).
StatusOr<bool> StepDriver::CheckGradients(const frugal::StepPoint& p, bool exchange) {
  const std::string* bad = nan_guard_->bad_tensor();
  const int rank = t_.rank();
  if (options_.nan_policy == NanPolicy::kAbort) {
    if (bad == nullptr) return true;
    return frugal::FailedPreconditionError(
        fmt::format("step {}: the gradient of '{}' on rank {} is not finite (--nan-policy abort: "
                    "it was not sent to any rank)",
                    p.step, *bad, rank));
  }
  if (!exchange) {
    if (bad == nullptr) return true;
    skipped_ = fmt::format(
        "step {}: the gradient of '{}' on rank {} is not finite: the rank "
        "skipped its local update",
        p.step, *bad, rank);
    return false;
  }
  std::string mine = bad == nullptr ? std::string("0") : "1" + *bad;
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(Run("nan check", [&](frugal::Transport& t) {
    frugal::CollectiveOptions collective;
    collective.timeout = options_.timeout;
    return frugal::Allgatherv(t, std::as_bytes(std::span<const char>(mine.data(), mine.size())),
                              all, sizes, collective);
  }));
  size_t at = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    const char* report = reinterpret_cast<const char*>(all.data() + at);
    if (sizes[r] > 0 && report[0] == '1') {
      skipped_ = fmt::format(
          "step {}: the gradient of '{}' on rank {} is not finite: every rank "
          "skipped the update",
          p.step, std::string(report + 1, sizes[r] - 1), r);
      return false;
    }
    at += sizes[r];
  }
  return true;
}

StatusOr<torch::Tensor> StepDriver::Step(const frugal::StepPoint& p,
                                         const std::function<torch::Tensor()>& forward) {
  if (strategy_.ActsBeforeForward(p)) {
    FRUGAL_RETURN_IF_ERROR(Synchronize());
    frugal::ModelBuffers model = ModelBuffersOf(module_, optimizer_);
    const frugal::Stopwatch watch;
    FRUGAL_RETURN_IF_ERROR(strategy_.BeforeForward(p, model, *this));
    exchange_seconds_ += watch.Seconds();
  }
  const bool exchange = strategy_.AveragesGradients(p);
  skipped_.reset();
  nan_guard_->BeginStep(static_cast<int64_t>(p.step), p.epoch + 1, p.step_in_epoch);
  const double blocked_before = blocked_seconds();
  const auto begin = Clock::now();
  torch::Tensor loss;
  auto straggle = [&] {
    if (options_.straggler_factor > 1 && last_compute_seconds_ > 0) {
      std::this_thread::sleep_for(
          std::chrono::duration<double>((options_.straggler_factor - 1) * last_compute_seconds_));
    }
  };
  double slept = 0;
  if (session_) {
    EngineOptimizer& eo = session_->optimizer();
    eo.BeginStep(exchange);
    loss = forward();
    const auto sleep_begin = Clock::now();
    straggle();
    slept = std::chrono::duration<double>(Clock::now() - sleep_begin).count();
    FRUGAL_RETURN_IF_ERROR(eo.Backward(loss));
    last_compute_seconds_ = std::chrono::duration<double>(Clock::now() - begin).count() - slept -
                            (blocked_seconds() - blocked_before);
    FRUGAL_ASSIGN_OR_RETURN(const bool apply, CheckGradients(p, exchange));
    if (apply) FRUGAL_RETURN_IF_ERROR(eo.Step());
  } else {
    dist_->ZeroGrad();
    loss = forward();
    const auto sleep_begin = Clock::now();
    straggle();
    slept = std::chrono::duration<double>(Clock::now() - sleep_begin).count();
    loss.backward();
    last_compute_seconds_ = std::chrono::duration<double>(Clock::now() - begin).count() - slept;
    FRUGAL_ASSIGN_OR_RETURN(const bool apply, CheckGradients(p, exchange));
    if (apply && exchange) FRUGAL_RETURN_IF_ERROR(dist_->Step());
    if (apply && !exchange) optimizer_.step();
  }
  if (strategy_.ExchangesAfterStep(p)) {
    FRUGAL_RETURN_IF_ERROR(Synchronize());
    frugal::ModelBuffers model = ModelBuffersOf(module_, optimizer_);
    const frugal::Stopwatch watch;
    FRUGAL_RETURN_IF_ERROR(strategy_.AfterOptimizerStep(p, model, *this));
    exchange_seconds_ += watch.Seconds();
  }
  return loss;
}

Status StepDriver::Synchronize() {
  return session_ ? session_->optimizer().Synchronize() : Status::Ok();
}

Status StepDriver::Settle() {
  FRUGAL_RETURN_IF_ERROR(Synchronize());
  frugal::ModelBuffers model = ModelBuffersOf(module_, optimizer_);
  // Strategies whose replicas stay identical have nothing to settle.
  if (strategy_.traits().identical_replicas) return strategy_.Settle(model, *this);
  const frugal::Stopwatch watch;
  Status status = strategy_.Settle(model, *this);
  exchange_seconds_ += watch.Seconds();
  return status;
}

Status StepDriver::Run(std::string_view what, const std::function<Status(frugal::Transport&)>& fn) {
  return RunAllowing(what, fn, frugal::Duration::zero());
}

Status StepDriver::RunAllowing(std::string_view what,
                               const std::function<Status(frugal::Transport&)>& fn,
                               frugal::Duration allowance) {
  return session_ ? session_->Collective(std::string(what), fn, allowance) : fn(t_);
}

std::unique_ptr<frugal::Work> StepDriver::RunInBackground(
    std::string_view what, std::function<Status(frugal::Transport&)> fn) {
  if (!session_) return nullptr;
  return session_->Background(std::string(what), std::move(fn));
}

void StepDriver::VisitState(frugal::StateVisitor& visitor) {
  {
    frugal::StateVisitor::Scope scope(visitor, "dist");
    dist_->VisitState(visitor);
  }
  if (session_) {
    frugal::StateVisitor::Scope scope(visitor, "engine");
    session_->optimizer().VisitState(visitor);
  }
}

double StepDriver::blocked_seconds() const {
  return (session_ ? session_->optimizer().wait_seconds() : dist_->comm_seconds()) +
         exchange_seconds_;
}

double StepDriver::comm_seconds() const {
  return (session_ ? session_->comm_seconds() : dist_->comm_seconds()) + exchange_seconds_;
}

double StepDriver::hidden_fraction() const { return session_ ? session_->hidden_fraction() : 0; }

uint64_t StepDriver::negotiation_bytes() const {
  return session_ ? session_->negotiation_bytes() : 0;
}

StatusOr<std::string> StepDriver::Finish() {
  if (!session_) return std::string();
  return session_->Finish();
}

}  // namespace frugal_torch
