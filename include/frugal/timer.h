// Monotonic clock helpers. Thread safe (stateless apart from the Stopwatch object itself).
#pragma once

#include <chrono>

namespace frugal {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void Reset() { start_ = Clock::now(); }
  double Seconds() const { return SecondsSince(start_); }

 private:
  Clock::time_point start_;
};

}  // namespace frugal
