// The Work handle of the engine and the accounting of the time threads wait on it (internal).
//
// A WorkState is completed once by the engine thread (Complete) and read by the Work handles,
// which may outlive the engine. WaitBook records the intervals during which at least one thread
// waited on a tensor that was not done; the engine's exposed communication time is the overlap of
// those intervals with its reductions (OverlapSeconds).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "frugal/timer.h"
#include "frugal/work.h"

namespace frugal::engine_internal {

struct Interval {
  Clock::time_point begin;
  Clock::time_point end;
};

// Sum of the lengths of the intersections of two sorted lists of disjoint intervals.
double OverlapSeconds(const std::vector<Interval>& a, const std::vector<Interval>& b);

// Shared by the engine and the Work handles of its tensors. Thread safe.
class WaitBook {
 public:
  void Begin();  // a thread starts waiting on a tensor that is not done
  void End();    // it stops
  // The merged, sorted intervals with at least one waiter, the current one included.
  std::vector<Interval> Snapshot() const;

 private:
  mutable std::mutex mutex_;
  int waiting_ = 0;
  Clock::time_point since_;
  std::vector<Interval> intervals_;
};

// The state behind one Work. Thread safe.
struct WorkState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::atomic<int> waiters{0};  // threads inside Wait

  void Complete(Status s);  // the first completion wins
  bool IsDone();
};

class EngineWork final : public Work {
 public:
  // `book` may be null (calls are not tensors); `what` names the request in timeout messages.
  EngineWork(std::shared_ptr<WorkState> state, std::shared_ptr<WaitBook> book, std::string what,
             size_t bytes);

  Status Wait(Duration timeout) override;
  bool IsCompleted() override { return state_->IsDone(); }
  int peer() const override { return -1; }
  size_t bytes() const override { return bytes_; }

 private:
  std::shared_ptr<WorkState> state_;
  std::shared_ptr<WaitBook> book_;
  std::string what_;
  size_t bytes_;
};

}  // namespace frugal::engine_internal
