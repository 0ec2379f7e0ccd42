// See runtime.h.
#include "runtime.h"

#include <fmt/format.h>

#include <algorithm>

#include "frugal/collectives.h"

namespace frugal_py {

frugal::StatusOr<std::unique_ptr<Runtime>> Runtime::Start(frugal::MpiRuntime& mpi,
                                                          RuntimeOptions options) {
  if (options.timeout <= frugal::Duration::zero()) {
    return frugal::InvalidArgumentError("timeout must be positive");
  }
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->options_ = options;
  FRUGAL_ASSIGN_OR_RETURN(rt->world_, mpi.World());
  frugal::Transport& world = *rt->world_;
  rt->rank_ = world.rank();
  rt->size_ = world.size();
  // Local rank and size: among the ranks whose host name is this rank's (emulated hosts have
  // names of their own).
  FRUGAL_ASSIGN_OR_RETURN(std::vector<int> hosts,
                          frugal::HostOfEachRank(world, 0, options.timeout));
  const int mine = hosts[static_cast<size_t>(rt->rank_)];
  rt->local_size_ = static_cast<int>(std::count(hosts.begin(), hosts.end(), mine));
  rt->local_rank_ = static_cast<int>(std::count(hosts.begin(), hosts.begin() + rt->rank_, mine));
  auto dense = std::make_shared<GradientPath>();
  frugal::DenseReducerOptions dense_options;
  dense_options.timeout = options.timeout;
  FRUGAL_ASSIGN_OR_RETURN(dense->reducer, frugal::MakeDenseReducer(world, dense_options));
  rt->dispatch_ = std::make_unique<DispatchReducer>(world, options.timeout, std::move(dense));
  FRUGAL_RETURN_IF_ERROR(rt->StartEngine());
  return rt;
}

Runtime::~Runtime() { (void)Stop(); }

frugal::Duration Runtime::wait_timeout() const {
  return 2 * options_.timeout + std::chrono::seconds(5);
}

frugal::Status Runtime::StartEngine() {
  frugal::EngineOptions options;
  options.timeout = options_.timeout;
  options.logger = frugal::Logger(options_.log_level, size_ > 1 ? rank_ : -1);
  frugal::ApplyOverlapMode(mode_.overlap, options, mode_.fusion);
  FRUGAL_ASSIGN_OR_RETURN(auto engine, frugal::Engine::Start(*world_, *dispatch_, options));
  std::lock_guard<std::mutex> lock(engine_mutex_);
  engine_ = std::move(engine);
  return frugal::Status::Ok();
}

std::unique_ptr<frugal::Work> Runtime::SubmitOp(const std::shared_ptr<OpRecord>& record) {
  dispatch_->Register(record);
  frugal::TensorRequest request;
  request.name = OpName(record->op.kind, record->op.name);
  request.shape = {1};
  request.dtype = Descriptor(record->op);
  std::lock_guard<std::mutex> lock(engine_mutex_);
  FRUGAL_CHECK(engine_ != nullptr, "frugal.torch is not initialised");
  return engine_->Submit(std::move(request), std::span<float>(&record->carrier, 1));
}

std::unique_ptr<frugal::Work> Runtime::SubmitGradient(frugal::TensorRequest request,
                                                      std::span<float> data) {
  std::lock_guard<std::mutex> lock(engine_mutex_);
  FRUGAL_CHECK(engine_ != nullptr, "frugal.torch is not initialised");
  return engine_->Submit(std::move(request), data);
}

frugal::Status Runtime::RunOnEngine(std::string what,
                                    std::function<frugal::Status(frugal::Transport&)> fn) {
  std::unique_ptr<frugal::Work> work;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    if (!engine_) return frugal::FailedPreconditionError("frugal.torch is not initialised");
    work = engine_->Call(std::move(what), std::move(fn));
  }
  frugal::Status status = work->Wait(wait_timeout());
  if (status.code() == frugal::StatusCode::kTimeout) {
    // `fn` may refer to the caller's frames: it must never run after this returns.
    (void)Stop();
  }
  return status;
}

frugal::Status Runtime::Configure(const EngineMode& mode) {
  if (mode == mode_) return frugal::Status::Ok();
  std::unique_ptr<frugal::Engine> old;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    old = std::move(engine_);
  }
  if (old) FRUGAL_RETURN_IF_ERROR(old->Shutdown());
  mode_ = mode;
  return StartEngine();
}

frugal::Status Runtime::Stop() {
  std::unique_ptr<frugal::Engine> engine;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    engine = std::move(engine_);
  }
  if (!engine) return frugal::Status::Ok();
  return engine->Shutdown();
}

}  // namespace frugal_py
