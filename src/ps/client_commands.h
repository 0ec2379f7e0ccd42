// What the training thread hands a parameter-server worker's thread (internal): the commands, in
// the order it queued them, and the Work it waits on for each.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "engine/engine_work.h"
#include "frugal/parameter_server.h"
#include "frugal/timeline.h"
#include "frugal/transport.h"

namespace frugal::ps_internal {

enum class CommandKind { kSubmit, kCall, kRest, kStats, kCheckpoint };

struct Command {
  CommandKind kind = CommandKind::kSubmit;
  // A submission.
  uint32_t tensor = 0;
  int priority = 0;
  std::span<float> data;
  double weight = 0;  // under weighted pushes
  // A call; a checkpoint (fn with the world transport, after asking the servers for `step`).
  uint64_t step = 0;
  std::string name;
  std::function<Status(Transport&)> fn;
  // A stats request.
  ParameterServerStats* stats = nullptr;
  std::shared_ptr<engine_internal::WorkState> state;
};

// The Work of a submission or a call. With a book, its waits count as the training thread's
// waits; with a timeline, each is a span on the row "ps wait". `what` names it in the timeout.
class ClientWork final : public Work {
 public:
  ClientWork(std::shared_ptr<engine_internal::WorkState> state,
             std::shared_ptr<engine_internal::WaitBook> book, std::string what,
             Timeline* timeline = nullptr)
      : state_(std::move(state)),
        book_(std::move(book)),
        what_(std::move(what)),
        timeline_(timeline) {}

  Status Wait(Duration timeout) override;
  bool IsCompleted() override { return state_->IsDone(); }
  int peer() const override { return -1; }
  size_t bytes() const override { return 0; }

 private:
  std::shared_ptr<engine_internal::WorkState> state_;
  std::shared_ptr<engine_internal::WaitBook> book_;
  std::string what_;
  Timeline* timeline_;
};

// The commands between the two threads, and the client's fate: once it stopped or failed, a new
// command completes at once (with the failure, or kCancelled). Thread safe.
class CommandQueue {
 public:
  void Enqueue(Command c);
  // The next command the client's thread runs: a submission at once, any other command once
  // every submission taken before it completed; nothing while `hold` (a command still waiting for
  // its answers). Taking a submission counts it as pending until SubmissionDone. nullopt when
  // nothing may run, and after Stop (then `stopped` is set).
  std::optional<Command> Take(bool hold, bool& stopped);
  void SubmissionDone();
  void Stop();
  // Records the client's first failure.
  void SetError(const Status& status);
  Status error() const;
  // Completes every queued command with `status` and forgets the pending submissions.
  void CancelAll(const Status& status);

 private:
  mutable std::mutex mutex_;
  std::deque<Command> commands_;
  int pending_ = 0;  // submissions taken and not yet complete
  bool stop_ = false;
  Status error_;
};

}  // namespace frugal::ps_internal
