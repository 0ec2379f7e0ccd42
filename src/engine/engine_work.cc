// The engine's Work handle and the accounting of waits.
#include "engine/engine_work.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace frugal::engine_internal {

double OverlapSeconds(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double total = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const auto begin = std::max(a[i].begin, b[j].begin);
    const auto end = std::min(a[i].end, b[j].end);
    if (end > begin) total += std::chrono::duration<double>(end - begin).count();
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

void WaitBook::Begin() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (waiting_++ == 0) since_ = Clock::now();
}

void WaitBook::End() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--waiting_ == 0) intervals_.push_back({since_, Clock::now()});
}

std::vector<Interval> WaitBook::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Interval> copy = intervals_;
  if (waiting_ > 0) copy.push_back({since_, Clock::now()});
  return copy;
}

void WorkState::Complete(Status s) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (done) return;
    done = true;
    status = std::move(s);
  }
  cv.notify_all();
}

bool WorkState::IsDone() {
  std::lock_guard<std::mutex> lock(mutex);
  return done;
}

EngineWork::EngineWork(std::shared_ptr<WorkState> state, std::shared_ptr<WaitBook> book,
                       std::string what, size_t bytes)
    : state_(std::move(state)), book_(std::move(book)), what_(std::move(what)), bytes_(bytes) {}

Status EngineWork::Wait(Duration timeout) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (state_->done) return state_->status;
  state_->waiters.fetch_add(1);
  if (book_) book_->Begin();
  const bool done = state_->cv.wait_for(lock, timeout, [&] { return state_->done; });
  state_->waiters.fetch_sub(1);
  if (book_) book_->End();
  if (!done) {
    return TimeoutError(
        fmt::format("engine: {} not completed within {} ms", what_, timeout.count()));
  }
  return state_->status;
}

}  // namespace frugal::engine_internal
