// A TransportRunner for tests of strategies with ranks as threads: calls run on the rank's thread,
// background calls (RunInBackground) on a thread of their own, as the engine's thread runs them
// while the training thread computes; or, with background = false, nowhere (nullptr: the strategy
// runs them itself), as a runner without a thread of its own.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string_view>

#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal/work.h"

namespace frugal::strategy_test {

// A background call on a thread of its own; the strategy never uses the transport from two
// threads at once (it ends the background call before its next exchange).
class ThreadWork final : public Work {
 public:
  ThreadWork(Transport& t, std::function<Status(Transport&)> fn)
      : result_(std::async(std::launch::async, [&t, fn = std::move(fn)] { return fn(t); })) {}
  Status Wait(Duration timeout) override {
    if (result_.wait_for(timeout) != std::future_status::ready) {
      return TimeoutError("background call still running");
    }
    if (!status_) status_ = result_.get();
    return *status_;
  }
  bool IsCompleted() override {
    return status_ || result_.wait_for(Duration(0)) == std::future_status::ready;
  }
  int peer() const override { return -1; }
  size_t bytes() const override { return 0; }

 private:
  std::future<Status> result_;
  std::optional<Status> status_;
};

class ThreadRunner final : public TransportRunner {
 public:
  explicit ThreadRunner(Transport& t, bool background = true) : t_(t), background_(background) {}
  Status Run(std::string_view, const std::function<Status(Transport&)>& fn) override {
    return fn(t_);
  }
  std::unique_ptr<Work> RunInBackground(std::string_view,
                                        std::function<Status(Transport&)> fn) override {
    if (!background_) return nullptr;
    ++background_calls;
    return std::make_unique<ThreadWork>(t_, std::move(fn));
  }
  int background_calls = 0;

 private:
  Transport& t_;
  bool background_;
};

}  // namespace frugal::strategy_test
