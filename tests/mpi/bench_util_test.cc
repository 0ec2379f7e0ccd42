// The benchmark helpers of bench/ (no MPI needed): size lists, medians, tables, fits, busbw.
#include "bench_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "allreduce_bench.h"
#include "pingpong.h"

namespace frugal::bench {
namespace {

TEST(BenchUtil, ParsesSizesWithBinarySuffixes) {
  EXPECT_EQ(*ParseByteSize("512"), 512u);
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("4kb"), 4096u);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseByteSize("64M"), size_t{64} << 20);
  EXPECT_EQ(*ParseByteSize("1G"), size_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("7B"), 7u);
  for (const char* bad : {"", "K", "4X", "-4K", "4.5M", "4 K", "99999999999999999999G"}) {
    auto parsed = ParseByteSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(BenchUtil, ParsesLists) {
  auto sizes = ParseByteSizeList("4K, 64K,1M");
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(*sizes, (std::vector<size_t>{4096, 65536, 1 << 20}));
  auto names = ParseNameList("ring,mpi");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"ring", "mpi"}));
  EXPECT_FALSE(ParseNameList("ring,,mpi").ok());
  EXPECT_FALSE(ParseNameList("").ok());
  EXPECT_FALSE(ParseByteSizeList("4K,").ok());
}

TEST(BenchUtil, FormatsBytes) {
  EXPECT_EQ(FormatBytes(4096), "4K");
  EXPECT_EQ(FormatBytes(size_t{64} << 20), "64M");
  EXPECT_EQ(FormatBytes(size_t{2} << 30), "2G");
  EXPECT_EQ(FormatBytes(1000), "1000");
  EXPECT_EQ(FormatBytes(1536), "1536");
}

TEST(BenchUtil, Median) {
  EXPECT_EQ(Median({3.0}), 3.0);
  EXPECT_EQ(Median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_THROW(Median({}), CheckError);
}

TEST(BenchUtil, TableAlignsColumns) {
  Table table({"name", "value"}, {true});
  table.AddRow({"ring", "1.5"});
  table.AddRow({"rabenseifner", "10.25"});
  EXPECT_EQ(table.Render(),
            "name          value\n"
            "-------------------\n"
            "ring            1.5\n"
            "rabenseifner  10.25\n");
  EXPECT_THROW(table.AddRow({"only one cell"}), CheckError);
}

TEST(BenchUtil, FitByRangeSeparatesLatencyAndBandwidth) {
  // one_way = 2 us + bytes / 10 GB/s for large messages, 0.5 us + bytes / 2 GB/s for small.
  std::vector<PingPongSample> samples;
  for (size_t b : {size_t{8}, size_t{64}, size_t{1024}, size_t{4096}}) {
    samples.push_back({b, 0.5e-6 + static_cast<double>(b) / 2e9, 10, std::nullopt});
  }
  samples.push_back({size_t{64} << 10, 1.0, 10, std::nullopt});  // in neither range
  for (size_t b : {size_t{256} << 10, size_t{1} << 20, size_t{4} << 20}) {
    samples.push_back({b, 2e-6 + static_cast<double>(b) / 10e9, 10, std::nullopt});
  }
  RangeFits fits = FitByRange(samples);
  ASSERT_TRUE(fits.latency.has_value());
  ASSERT_TRUE(fits.bandwidth.has_value());
  EXPECT_NEAR(fits.latency->alpha, 0.5e-6, 1e-9);
  EXPECT_NEAR(fits.latency->beta, 1 / 2e9, 1e-14);
  EXPECT_NEAR(fits.bandwidth->alpha, 2e-6, 1e-9);
  EXPECT_NEAR(fits.bandwidth->beta, 1 / 10e9, 1e-15);
  EXPECT_FALSE(FitByRange({samples.front()}).latency.has_value());
}

TEST(BenchUtil, BusBandwidthOfAllreduce) {
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(1.0, 1), 0.0);
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(1.0, 2), 1.0);
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(2.0, 4), 3.0);
}

TEST(BenchUtil, AllreduceOptionsAreValidatedBeforeAnythingRuns) {
  AllreduceBenchOptions options;
  options.sizes = {4096};
  options.algorithms = {"ring", "mpi"};
  EXPECT_TRUE(ValidateAllreduceBenchOptions(options).ok());
  options.algorithms = {"ring", "nccl"};
  Status s = ValidateAllreduceBenchOptions(options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'nccl'"), std::string::npos) << s.message();
  options.algorithms = {"ring", "ring"};
  EXPECT_FALSE(ValidateAllreduceBenchOptions(options).ok());
  // Any of frugal's algorithms may also run staged; the peers may not, unknown names neither.
  options.algorithms = {"ring", "ring:staged", "dbtree:staged", "mpi"};
  EXPECT_TRUE(ValidateAllreduceBenchOptions(options).ok());
  for (const char* bad : {"mpi:staged", "nccl:staged", "ring:stage", ":staged"}) {
    options.algorithms = {bad};
    s = ValidateAllreduceBenchOptions(options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(fmt::format("'{}'", bad)), std::string::npos) << s.message();
  }
  // A case may name its own segment, staged or not; the peers may not.
  options.algorithms = {"ring@256K", "ring@1M", "tree@64K:staged", "ring", "mpi"};
  EXPECT_TRUE(ValidateAllreduceBenchOptions(options).ok());
  for (const char* bad : {"ring@0", "ring@", "ring@big", "nccl@1M", "mpi@1M", "@1M"}) {
    options.algorithms = {bad};
    s = ValidateAllreduceBenchOptions(options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(fmt::format("'{}'", bad)), std::string::npos) << s.message();
  }
  options.algorithms = {"ring"};
  options.segment_bytes = 0;
  EXPECT_FALSE(ValidateAllreduceBenchOptions(options).ok());
  options.segment_bytes.reset();
  options.sizes = {4098};
  EXPECT_FALSE(ValidateAllreduceBenchOptions(options).ok());
  options.sizes = {4096};
  options.iters = 0;
  EXPECT_FALSE(ValidateAllreduceBenchOptions(options).ok());
}

}  // namespace
}  // namespace frugal::bench
