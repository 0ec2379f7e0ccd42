#include "ps/client_commands.h"

#include <fmt/format.h>

namespace frugal::ps_internal {

Status ClientWork::Wait(Duration timeout) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (state_->done) return state_->status;
  if (book_) book_->Begin();
  const Clock::time_point begin = Clock::now();
  const bool done = state_->cv.wait_for(lock, timeout, [&] { return state_->done; });
  if (book_) book_->End();
  if (timeline_ != nullptr) timeline_->Span("ps wait", what_, begin, Clock::now());
  if (!done) {
    return TimeoutError(
        fmt::format("parameter server: {} not answered within {} ms", what_, timeout.count()));
  }
  return state_->status;
}

void CommandQueue::Enqueue(Command c) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.ok() || stop_) {
    c.state->Complete(error_.ok() ? CancelledError("parameter-server client shut down") : error_);
    return;
  }
  commands_.push_back(std::move(c));
}

std::optional<Command> CommandQueue::Take(bool hold, bool& stopped) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_) {
    stopped = true;
    return std::nullopt;
  }
  if (commands_.empty() || hold) return std::nullopt;
  const bool submit = commands_.front().kind == CommandKind::kSubmit;
  if (!submit && pending_ > 0) return std::nullopt;
  Command c = std::move(commands_.front());
  commands_.pop_front();
  if (submit) ++pending_;
  return c;
}

void CommandQueue::SubmissionDone() {
  std::lock_guard<std::mutex> lock(mutex_);
  --pending_;
}

void CommandQueue::Stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_ = true;
}

void CommandQueue::SetError(const Status& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_.ok()) error_ = status;
}

Status CommandQueue::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void CommandQueue::CancelAll(const Status& status) {
  std::deque<Command> commands;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    commands.swap(commands_);
    pending_ = 0;
  }
  for (Command& c : commands) c.state->Complete(status);
}

}  // namespace frugal::ps_internal
