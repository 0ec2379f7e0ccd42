// The state behind `frugal.torch.init()`: MPI (initialised here, or adopted from another library
// such as mpi4py and then left initialised), the world transport, the ranks' hosts, and the one
// communication engine (frugal/engine.h) whose thread owns the transport from start-up on. The
// engine's reducer is a DispatchReducer, so that gradients and the script's own collectives
// share the engine and its negotiation.
//
// Thread safety: the methods may be called from any thread; Start, Configure and Stop are
// collective (every rank calls them at the same point). Waits do not hold the Python GIL (the
// bindings release it). Nothing here calls MpiRuntime::Abort: failures are returned.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "dispatch_reducer.h"
#include "frugal/engine.h"
#include "frugal/mpi_transport.h"
#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal/transport.h"

namespace frugal_py {

struct RuntimeOptions {
  frugal::Duration timeout = frugal::kDefaultTimeout;
  frugal::LogLevel log_level = frugal::LogLevel::kWarning;
};

// How the engine schedules (chosen by DistributedOptimizer's overlap=).
struct EngineMode {
  frugal::OverlapMode overlap = frugal::OverlapMode::kWfbp;
  frugal::FusionPolicy fusion = frugal::FusionPolicy::kMgWfbp;
  bool operator==(const EngineMode&) const = default;
};

class Runtime {
 public:
  // Collective. `mpi` must outlive the runtime.
  static frugal::StatusOr<std::unique_ptr<Runtime>> Start(frugal::MpiRuntime& mpi,
                                                          RuntimeOptions options);
  ~Runtime();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const RuntimeOptions& options() const { return options_; }
  // How long a caller waits for a handle: twice the engine's timeout and a margin, so that the
  // engine's own error (naming the peers) arrives first.
  frugal::Duration wait_timeout() const;

  // Submits a collective (validated by the caller) and returns its handle.
  std::unique_ptr<frugal::Work> SubmitOp(const std::shared_ptr<OpRecord>& record);
  void ForgetOp(uint32_t id) { dispatch_->Forget(id); }
  std::unique_ptr<frugal::Work> SubmitGradient(frugal::TensorRequest request,
                                               std::span<float> data);
  // Runs `fn` with the transport on the engine thread and waits for it.
  frugal::Status RunOnEngine(std::string what,
                             std::function<frugal::Status(frugal::Transport&)> fn);
  // Collective: restarts the engine if it runs in another mode. Nothing may be in flight.
  frugal::Status Configure(const EngineMode& mode);
  const EngineMode& mode() const { return mode_; }
  DispatchReducer& dispatch() { return *dispatch_; }
  // Stops the engine; returns the first error it met. Idempotent.
  frugal::Status Stop();

 private:
  Runtime() = default;
  frugal::Status StartEngine();

  RuntimeOptions options_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  EngineMode mode_;
  std::unique_ptr<frugal::Transport> world_;
  std::unique_ptr<DispatchReducer> dispatch_;
  std::mutex engine_mutex_;
  std::unique_ptr<frugal::Engine> engine_;
};

}  // namespace frugal_py
