// The memcpy baseline (see memcpy_baseline.h).
//
// The source and destination are allocated once, filled (every page written, so no copy pays for
// a page fault) and copied options.warm_copies times before any timed copy. Each Sample() times
// options.copies_per_sample copies one by one; the summary is taken over every copy of the run,
// so a baseline that drifted between the first and the last row of a benchmark shows as a large
// spread instead of moving the rows' ratios apart. Spread = (p90 - p10) / median of the copy
// times: the width of the middle 80% of the times relative to their middle, insensitive to one
// outlier but not to a drift that lasts for a fifth of the run.
#include "memcpy_baseline.h"

#include <fmt/format.h>

#include <cstring>

#include "bench_util.h"
#include "frugal/status.h"
#include "frugal/timer.h"

namespace frugal::bench {

MemcpyBaseline::MemcpyBaseline(MemcpyBaselineOptions options) : options_(std::move(options)) {
  FRUGAL_CHECK(options_.bytes > 0, "memcpy baseline of 0 bytes");
  FRUGAL_CHECK(options_.copies_per_sample >= 1, "copies per sample ", options_.copies_per_sample);
  FRUGAL_CHECK(options_.warm_copies >= 0, "warm copies ", options_.warm_copies);
  if (options_.copy_timer) return;
  const size_t floats = (options_.bytes + sizeof(float) - 1) / sizeof(float);
  source_.assign(floats, 1.0f);
  destination_.assign(floats, 0.0f);
  for (int i = 0; i < options_.warm_copies; ++i) TimedCopy();
}

double MemcpyBaseline::TimedCopy() {
  if (options_.copy_timer) return options_.copy_timer();
  Stopwatch watch;
  std::memcpy(destination_.data(), source_.data(), options_.bytes);
  const double seconds = watch.Seconds();
  // Keeps the copy from being optimised away and checks that it happened.
  FRUGAL_INTERNAL_ASSERT(destination_[destination_.size() / 2] == 1.0f, "memcpy did not copy");
  return seconds;
}

void MemcpyBaseline::Sample() {
  for (int i = 0; i < options_.copies_per_sample; ++i) seconds_.push_back(TimedCopy());
}

BaselineSummary MemcpyBaseline::Summary() const {
  BaselineSummary summary;
  summary.copies = seconds_.size();
  if (seconds_.empty()) return summary;
  const double bytes = static_cast<double>(options_.bytes);
  const double median = Median(seconds_);
  const double p10 = Quantile(seconds_, 0.1);
  const double p90 = Quantile(seconds_, 0.9);
  summary.median_gbps = bytes / median / 1e9;
  summary.p10_gbps = bytes / p90 / 1e9;
  summary.p90_gbps = bytes / p10 / 1e9;
  summary.spread = (p90 - p10) / median;
  return summary;
}

std::optional<std::string> MemcpyBaseline::RatioRefusal() const {
  const BaselineSummary summary = Summary();
  if (summary.copies < kMinBaselineCopies) {
    return fmt::format(
        "the memcpy baseline has {} timed copies, fewer than the {} that tell its spread (use "
        "more --iters)",
        summary.copies, kMinBaselineCopies);
  }
  if (summary.spread > options_.max_spread) {
    return fmt::format(
        "the memcpy baseline moved while it was measured: {} copies between {:.2f} and {:.2f} "
        "GB/s (p10-p90), a spread of {:.0f}% of the median {:.2f} GB/s, above the {:.0f}% "
        "allowed; run again on a quiet machine",
        summary.copies, summary.p10_gbps, summary.p90_gbps, 100 * summary.spread,
        summary.median_gbps, 100 * options_.max_spread);
  }
  return std::nullopt;
}

}  // namespace frugal::bench
