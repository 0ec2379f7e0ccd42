// The memcpy baseline of `frugal bench compress`: its summary against hand-computed quantiles, and
// the benchmark's ratios, which it prints against a baseline that held still and refuses, with the
// reason, against one that moved or has too few copies. Copy times come from an injected timer.
#include "compress_bench.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "memcpy_baseline.h"

namespace frugal::bench {
namespace {

// Copy times cycling through `seconds`.
std::function<double()> Cycle(std::vector<double> seconds) {
  auto next = std::make_shared<size_t>(0);
  return [seconds = std::move(seconds), next] { return seconds[(*next)++ % seconds.size()]; };
}

TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  const std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(Quantile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.1), 1.4);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.5), Median(v));
  EXPECT_DOUBLE_EQ(Quantile(v, 0.9), 4.6);
  EXPECT_DOUBLE_EQ(Quantile(v, 1.0), 5);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4}, 0.5), Median({1, 2, 3, 4}));
}

TEST(MemcpyBaseline, SummaryOfTheCopiesTimes) {
  // Ten copies of 1e9 bytes taking 1..10 s: p10 1.9 s, median 5.5 s, p90 9.1 s.
  MemcpyBaseline baseline({.bytes = 1'000'000'000,
                           .copies_per_sample = 5,
                           .copy_timer = Cycle({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})});
  baseline.Sample();
  baseline.Sample();
  ASSERT_EQ(baseline.seconds().size(), 10u);
  const BaselineSummary s = baseline.Summary();
  EXPECT_EQ(s.copies, 10u);
  EXPECT_DOUBLE_EQ(s.median_gbps, 1 / 5.5);
  EXPECT_DOUBLE_EQ(s.p10_gbps, 1 / 9.1);
  EXPECT_DOUBLE_EQ(s.p90_gbps, 1 / 1.9);
  EXPECT_NEAR(s.spread, (9.1 - 1.9) / 5.5, 1e-12);
  ASSERT_TRUE(baseline.RatioRefusal().has_value());
  EXPECT_NE(baseline.RatioRefusal()->find("spread of 131%"), std::string::npos)
      << *baseline.RatioRefusal();
}

TEST(MemcpyBaseline, OneSlowCopyDoesNotMoveIt) {
  std::vector<double> times(30, 1e-3);
  times[7] = 10e-3;
  MemcpyBaseline baseline({.bytes = 4096, .copies_per_sample = 30, .copy_timer = Cycle(times)});
  baseline.Sample();
  EXPECT_DOUBLE_EQ(baseline.Summary().spread, 0);
  EXPECT_FALSE(baseline.RatioRefusal().has_value());
}

TEST(MemcpyBaseline, RefusesFewCopies) {
  MemcpyBaseline baseline({.bytes = 4096, .copies_per_sample = 3, .copy_timer = Cycle({1e-3})});
  for (int i = 0; i < 3; ++i) baseline.Sample();
  ASSERT_TRUE(baseline.RatioRefusal().has_value());
  EXPECT_NE(baseline.RatioRefusal()->find("9 timed copies, fewer than the 10"), std::string::npos)
      << *baseline.RatioRefusal();
  baseline.Sample();
  EXPECT_FALSE(baseline.RatioRefusal().has_value());
}

TEST(MemcpyBaseline, RealCopiesAreTimed) {
  MemcpyBaseline baseline({.bytes = 1 << 20, .copies_per_sample = 4, .copy_timer = {}});
  baseline.Sample();
  ASSERT_EQ(baseline.seconds().size(), 4u);
  for (double s : baseline.seconds()) EXPECT_GT(s, 0);
  EXPECT_GT(baseline.Summary().median_gbps, 0);
}

CompressBenchOptions SmallBench(std::function<double()> timer) {
  CompressBenchOptions options;
  options.numel = 1000;
  options.compressors = {"none", "fp16"};
  options.iters = 3;
  options.warmup = 0;
  options.memcpy_copies = 2;
  options.memcpy_timer = std::move(timer);
  return options;
}

TEST(CompressBench, RatiosDivideByTheRunsBaseline) {
  // 4000 bytes in 1 or 1.02 us: 4 GB/s or a little less; spread 2%.
  auto result = RunCompressBench(SmallBench(Cycle({1e-6, 1.02e-6})));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_FALSE(result->refusal.has_value());
  EXPECT_EQ(result->baseline.copies, 12u);  // 2 compressors x 3 rounds x 2 copies
  EXPECT_NEAR(result->baseline.median_gbps, 4000 / 1.01e-6 / 1e9, 1e-9);
  ASSERT_EQ(result->rows.size(), 2u);
  for (const CompressBenchRow& row : result->rows) {
    ASSERT_TRUE(row.encode_vs_memcpy.has_value());
    ASSERT_TRUE(row.decode_vs_memcpy.has_value());
    EXPECT_DOUBLE_EQ(*row.encode_vs_memcpy, row.encode_gbps / result->baseline.median_gbps);
    EXPECT_DOUBLE_EQ(*row.decode_vs_memcpy, row.decode_gbps / result->baseline.median_gbps);
  }
  const std::vector<nlohmann::json> json = CompressJson(*result);
  ASSERT_EQ(json.size(), 2u);
  EXPECT_TRUE(json[0].contains("encode_vs_memcpy"));
  EXPECT_FALSE(json[0].contains("ratio_refused"));
  EXPECT_EQ(json[0]["memcpy_baseline_copies"], 12);
  EXPECT_EQ(CompressTable(*result).find("no enc/memcpy"), std::string::npos);
}

// The first row's copies at 20 GB/s, the second's at 10 GB/s: the shape of a baseline that moved
// within one run. No ratio, and the table says why.
TEST(CompressBench, RefusesRatiosWhenTheBaselineMoved) {
  std::vector<double> times(6, 0.2e-6);
  times.resize(12, 0.4e-6);
  auto result = RunCompressBench(SmallBench(Cycle(times)));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_TRUE(result->refusal.has_value());
  EXPECT_NE(result->refusal->find("moved while it was measured"), std::string::npos)
      << *result->refusal;
  EXPECT_NEAR(result->rows[0].memcpy_gbps, 20, 1e-9);
  EXPECT_NEAR(result->rows[1].memcpy_gbps, 10, 1e-9);
  for (const CompressBenchRow& row : result->rows) {
    EXPECT_FALSE(row.encode_vs_memcpy.has_value());
    EXPECT_FALSE(row.decode_vs_memcpy.has_value());
  }
  const std::string table = CompressTable(*result);
  EXPECT_NE(table.find("no enc/memcpy, dec/memcpy: the memcpy baseline moved"), std::string::npos)
      << table;
  const std::vector<nlohmann::json> json = CompressJson(*result);
  EXPECT_FALSE(json[0].contains("encode_vs_memcpy"));
  EXPECT_EQ(json[0]["ratio_refused"], *result->refusal);
}

TEST(CompressBench, RefusesBadBaselineOptions) {
  CompressBenchOptions options = SmallBench({});
  options.memcpy_copies = 0;
  EXPECT_EQ(RunCompressBench(options).status().code(), StatusCode::kInvalidArgument);
  options.memcpy_copies = 1;
  options.max_baseline_spread = 0;
  EXPECT_EQ(RunCompressBench(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace frugal::bench
