// See gradient_exchange.h.
#include "gradient_exchange.h"

#include <fmt/format.h>

#include "frugal/collectives.h"

namespace frugal_py {
namespace {

// The strategy's exchanges run on the engine thread.
class EngineRunner final : public frugal::TransportRunner {
 public:
  explicit EngineRunner(Runtime& runtime) : runtime_(runtime) {}
  frugal::Status Run(std::string_view what,
                     const std::function<frugal::Status(frugal::Transport&)>& fn) override {
    return runtime_.RunOnEngine(std::string(what), fn);
  }

 private:
  Runtime& runtime_;
};

std::span<float> FloatSpan(const torch::Tensor& t) {
  return {t.data_ptr<float>(), static_cast<size_t>(t.numel())};
}

frugal::Status CheckFloatTensor(const torch::Tensor& t, const std::string& what) {
  if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != c10::kFloat ||
      !t.is_contiguous()) {
    return frugal::InvalidArgumentError(
        fmt::format("{}: frugal exchanges contiguous float32 CPU tensors", what));
  }
  return frugal::Status::Ok();
}

}  // namespace

frugal::StatusOr<frugal::StrategyPlan> PlanExchange(const ExchangeOptions& options) {
  FRUGAL_ASSIGN_OR_RETURN(frugal::OverlapMode overlap, frugal::ParseOverlapMode(options.overlap));
  FRUGAL_ASSIGN_OR_RETURN(frugal::FusionPolicy fusion, frugal::ParseFusionPolicy(options.fusion));
  if (overlap == frugal::OverlapMode::kFusion && fusion == frugal::FusionPolicy::kOff) {
    return frugal::InvalidArgumentError("fusion must be mgwfbp or cycle (no fusion: overlap wfbp)");
  }
  if (options.names.size() != options.shapes.size()) {
    return frugal::InvalidArgumentError("one shape per parameter name");
  }
  FRUGAL_ASSIGN_OR_RETURN(frugal::StrategyPlan plan, frugal::PlanStrategy(options.strategy));
  if (plan.od_sgd) {
    return frugal::InvalidArgumentError("one-step delay (od_sgd) is not available from Python");
  }
  if (plan.arch.kind == frugal::ArchKind::kParameterServer) {
    return frugal::InvalidArgumentError(
        fmt::format("arch={} is not available from Python (use frugal train)",
                    frugal::ArchSpecName(plan.arch)));
  }
  if (plan.sync.kind == frugal::SyncKind::kLocal && plan.sync.start_epoch > 0 &&
      options.steps_per_epoch <= 0) {
    return frugal::InvalidArgumentError(
        fmt::format("sync={} starts after a number of epochs: give steps_per_epoch",
                    frugal::SyncSpecName(plan.sync)));
  }
  return plan;
}

frugal::StatusOr<std::unique_ptr<GradientExchange>> GradientExchange::Create(
    Runtime& runtime, ExchangeOptions options) {
  FRUGAL_ASSIGN_OR_RETURN(frugal::StrategyPlan plan, PlanExchange(options));
  std::unique_ptr<GradientExchange> ex(new GradientExchange(runtime, std::move(options)));
  ex->plan_ = std::move(plan);
  ex->mode_.overlap = *frugal::ParseOverlapMode(ex->options_.overlap);
  ex->mode_.fusion = *frugal::ParseFusionPolicy(ex->options_.fusion);
  FRUGAL_RETURN_IF_ERROR(runtime.Configure(ex->mode_));
  auto path = std::make_shared<GradientPath>();
  path->registry = frugal::DefaultCompressorRegistry();
  GradientExchange& self = *ex;
  // An engine call runs only while no rank has tensors pending: the barrier keeps every rank
  // from submitting gradients before every rank has made its strategy.
  FRUGAL_RETURN_IF_ERROR(runtime.RunOnEngine(
      "make the strategy", [&self, path](frugal::Transport& t) -> frugal::Status {
        frugal::CollectiveOptions barrier;
        barrier.timeout = self.plan_.timeout;
        FRUGAL_RETURN_IF_ERROR(frugal::Barrier(t, barrier));
        FRUGAL_ASSIGN_OR_RETURN(
            path->reducer, frugal::MakeStrategyReducer(self.plan_, t, self.options_.steps_per_epoch,
                                                       path->registry));
        FRUGAL_ASSIGN_OR_RETURN(self.strategy_,
                                frugal::MakeStrategy(self.plan_, t, *path->reducer));
        self.runtime_.dispatch().SetGradientPath(path);
        return frugal::Status::Ok();
      }));
  ex->path_ = std::move(path);
  ex->works_.resize(ex->options_.names.size());
  ex->in_flight_.resize(ex->options_.names.size());
  return ex;
}

frugal::StepPoint GradientExchange::Point(uint64_t step) const {
  frugal::StepPoint p;
  p.step = step;
  p.steps_per_epoch = options_.steps_per_epoch;
  if (options_.steps_per_epoch > 0) {
    p.epoch = static_cast<int64_t>(step) / options_.steps_per_epoch;
    p.step_in_epoch = static_cast<int64_t>(step) % options_.steps_per_epoch;
  } else {
    p.step_in_epoch = static_cast<int64_t>(step);
  }
  return p;
}

bool GradientExchange::AveragesGradients(uint64_t step) const {
  return !plan_.skip_comm && strategy_->AveragesGradients(Point(step));
}

void GradientExchange::Submit(size_t index, const torch::Tensor& grad, uint64_t step) {
  FRUGAL_CHECK_LT(index, works_.size(), "parameter index");
  const std::string& name = options_.names[index];
  const frugal::Status ok = CheckFloatTensor(grad, "the gradient of '" + name + "'");
  FRUGAL_CHECK(ok.ok(), ok.message());
  FRUGAL_CHECK(works_[index] == nullptr, "the gradient of '", name,
               "' was submitted twice before the optimizer step");
  frugal::TensorRequest request;
  request.name = name;
  request.shape = options_.shapes[index];
  request.priority = static_cast<int>(index);
  request.step = step;
  in_flight_[index] = grad;
  works_[index] = runtime_.SubmitGradient(std::move(request), FloatSpan(grad));
}

frugal::Status GradientExchange::Wait(const std::vector<size_t>& indices) {
  frugal::Status first;
  for (size_t i : indices) {
    if (i >= works_.size())
      return frugal::InvalidArgumentError("no parameter " + std::to_string(i));
    if (!works_[i]) continue;
    frugal::Status status = works_[i]->Wait(runtime_.wait_timeout());
    if (first.ok() && !status.ok()) first = status;
    works_[i].reset();
    in_flight_[i] = torch::Tensor();
  }
  return first;
}

frugal::Status GradientExchange::WaitAll() {
  std::vector<size_t> all(works_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return Wait(all);
}

frugal::ModelBuffers GradientExchange::Buffers(const std::vector<torch::Tensor>& params,
                                               const std::vector<torch::Tensor>& momenta) const {
  frugal::ModelBuffers model;
  for (size_t i = 0; i < params.size(); ++i) {
    model.parameters.push_back({options_.names[i], FloatSpan(params[i])});
  }
  for (size_t i = 0; i < momenta.size(); ++i) {
    if (momenta[i].defined()) {
      model.momenta.push_back({options_.names[i] + ".momentum", FloatSpan(momenta[i])});
    }
  }
  return model;
}

frugal::Status GradientExchange::Begin(const std::vector<torch::Tensor>& params,
                                       const std::vector<torch::Tensor>& momenta) {
  if (params.size() != options_.names.size()) {
    return frugal::InvalidArgumentError("one tensor per parameter");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    FRUGAL_RETURN_IF_ERROR(CheckFloatTensor(params[i], "parameter '" + options_.names[i] + "'"));
  }
  frugal::ModelBuffers model = Buffers(params, momenta);
  return strategy_->Begin(model);
}

frugal::Status GradientExchange::AfterStep(uint64_t step, const std::vector<torch::Tensor>& params,
                                           const std::vector<torch::Tensor>& momenta) {
  const frugal::StepPoint p = Point(step);
  if (!strategy_->ExchangesAfterStep(p)) return frugal::Status::Ok();
  frugal::ModelBuffers model = Buffers(params, momenta);
  EngineRunner runner(runtime_);
  return strategy_->AfterOptimizerStep(p, model, runner);
}

}  // namespace frugal_py
