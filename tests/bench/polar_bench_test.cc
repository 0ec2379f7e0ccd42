// The bounds of `frugal bench polar` against closed forms and the values the polar targets quote,
// and the benchmark's rows.
#include "polar_bench.h"

#include <gtest/gtest.h>

#include <cmath>

#include "frugal/random.h"

namespace frugal::bench {
namespace {

std::vector<float> Normal(size_t n, uint64_t seed, float scale = 1.0f) {
  RngStream rng(RngKey{.seed = seed});
  std::vector<float> v(n);
  for (float& x : v) x = scale * static_cast<float>(rng.Normal());
  return v;
}

TEST(PolarBench, BinarySymmetricBoundInvertsTheEntropy) {
  EXPECT_NEAR(BinarySymmetricBound(0.5), 0.1100, 1e-4);
  EXPECT_NEAR(BinarySymmetricBound(0.25), 0.2145, 1e-4);
  EXPECT_NEAR(BinarySymmetricBound(0.1), 0.3160, 1e-4);
  EXPECT_NEAR(BinarySymmetricBound(1.0), 0.0, 1e-9);
}

// Gaussian: the limits of +-alpha codes quoted with the polar targets (0.513 / 0.708 / 0.871),
// the sign code at R = 1 (1 - 2/pi) and nothing at R = 0.
TEST(PolarBench, PlusMinusAlphaLimitOfTheGaussian) {
  const std::vector<float> x = Normal(1 << 16, 1);
  EXPECT_NEAR(PlusMinusAlphaLimit(x, 0.5), 0.513, 0.003);
  EXPECT_NEAR(PlusMinusAlphaLimit(x, 0.25), 0.708, 0.003);
  EXPECT_NEAR(PlusMinusAlphaLimit(x, 0.1), 0.871, 0.003);
  EXPECT_NEAR(PlusMinusAlphaLimit(x, 1.0), 1 - 2 / M_PI, 0.003);
  EXPECT_NEAR(PlusMinusAlphaLimit(x, 0.0), 1.0, 1e-3);
}

// One alpha per block helps a source whose scale changes from block to block, not an i.i.d. one.
TEST(PolarBench, BlockBoundFollowsTheScaleOfEachBlock) {
  std::vector<float> iid = Normal(1 << 14, 2);
  EXPECT_NEAR(BlockBound(iid, 1024, 0.5), PlusMinusAlphaLimit(iid, 0.5), 0.01);
  std::vector<float> mixed = iid;
  for (size_t i = 0; i < 1024; ++i) mixed[i] *= 100.0f;
  EXPECT_NEAR(BlockBound(mixed, 1024, 0.5), 0.513, 0.02);
  EXPECT_GT(PlusMinusAlphaLimit(mixed, 0.5), 0.6);
}

TEST(PolarBench, RowsCoverEveryLengthAndRate) {
  PolarBenchOptions options;
  options.log_sizes = {6, 8};
  options.rates = {0.25, 0.5, 1.0};
  options.blocks = 20;
  options.iters = 1;
  auto rows = RunPolarBench(options);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 6u);
  for (const PolarBenchRow& r : *rows) {
    EXPECT_EQ(r.mode, "sign");
    EXPECT_EQ(r.blocks, 20u);
    EXPECT_GE(r.distortion, r.bound - 3 * r.stderr_mean) << r.n << " " << r.rate;
    if (r.rate == 1.0) {
      EXPECT_EQ(r.distortion, 0.0) << "R = 1 keeps every sign";
    }
  }
  EXPECT_EQ(PolarJson(*rows).size(), 6u);
  options.rates = {1.5};
  EXPECT_EQ(RunPolarBench(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace frugal::bench
