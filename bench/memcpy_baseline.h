// The memcpy bandwidth that single-process benchmarks divide their throughputs by, made to hold
// still: one pair of buffers for the whole run, allocated and written before the first timed copy
// (warm pages), several copies at each point where the benchmark takes a sample (interleaved with
// the measured operation), and the spread of all copies reported. A ratio against a baseline
// whose spread is large says more about the machine than about the operation: RatioRefusal()
// then gives the reason, and the benchmark prints that instead of the ratio.
//
// Not thread safe. The buffers live as long as the object.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace frugal::bench {

// The spread of a baseline: (p90 - p10) / median of the times of its copies.
inline constexpr double kDefaultMaxBaselineSpread = 0.10;
// Fewer copies than this do not tell a spread: no ratio.
inline constexpr size_t kMinBaselineCopies = 10;

struct MemcpyBaselineOptions {
  size_t bytes = 0;           // of one copy; > 0
  int copies_per_sample = 3;  // timed copies at each Sample(); >= 1
  int warm_copies = 3;        // untimed copies when the buffers are made
  double max_spread = kDefaultMaxBaselineSpread;
  // Seconds of one copy. Empty: a timed std::memcpy between the baseline's own buffers. Tests
  // inject their own timings here.
  std::function<double()> copy_timer;
};

struct BaselineSummary {
  size_t copies = 0;
  double median_gbps = 0;  // bytes / median time, GB = 1e9 bytes
  double p10_gbps = 0;     // bytes / the 90th percentile of the times (the slow tail)
  double p90_gbps = 0;     // bytes / the 10th percentile of the times
  double spread = 0;       // (p90 - p10) / median of the times
};

class MemcpyBaseline {
 public:
  // Precondition: options.bytes > 0, options.copies_per_sample >= 1, options.warm_copies >= 0.
  explicit MemcpyBaseline(MemcpyBaselineOptions options);

  // Times options.copies_per_sample copies and keeps their times.
  void Sample();

  // The times kept so far, in the order they were taken.
  const std::vector<double>& seconds() const { return seconds_; }
  BaselineSummary Summary() const;

  // Why no ratio should be printed against this baseline (too few copies, or a spread above
  // options.max_spread), as one sentence; nothing when ratios are meaningful.
  std::optional<std::string> RatioRefusal() const;

 private:
  double TimedCopy();

  MemcpyBaselineOptions options_;
  std::vector<float> source_, destination_;
  std::vector<double> seconds_;
};

}  // namespace frugal::bench
