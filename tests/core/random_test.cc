#include "frugal/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace frugal {
namespace {

TEST(RandomTest, SameKeySameStream) {
  RngKey key{.seed = 42, .rank = 3, .step = 7, .tensor = TensorId("fc1.weight")};
  RngStream a(key), b(key);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.NextU64(), b.NextU64());
}

TEST(RandomTest, EachKeyFieldChangesTheStream) {
  RngKey base{.seed = 42, .rank = 3, .step = 7, .tensor = TensorId("w")};
  std::vector<RngKey> variants = {base, base, base, base};
  variants[0].seed = 43;
  variants[1].rank = 4;
  variants[2].step = 8;
  variants[3].tensor = TensorId("v");
  uint64_t first = RngStream(base).NextU64();
  for (const RngKey& k : variants) EXPECT_NE(RngStream(k).NextU64(), first);
}

TEST(RandomTest, TensorIdIsStable) {
  // FNV-1a of "a" is a fixed constant: ids must not change between runs or platforms.
  EXPECT_EQ(TensorId("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_NE(TensorId("fc1.weight"), TensorId("fc1.bias"));
}

TEST(RandomTest, UniformMomentsAndRange) {
  RngStream rng({.seed = 5});
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    float u = rng.Uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum2 += u * u;
  }
  double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
}

TEST(RandomTest, BelowIsUniform) {
  RngStream rng({.seed = 9});
  std::vector<int> counts(7, 0);
  const int n = 70000;
  for (int i = 0; i < n; ++i) {
    uint64_t v = rng.Below(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, n / 7.0, 5 * std::sqrt(n / 7.0));
}

TEST(RandomTest, NormalMoments) {
  RngStream rng({.seed = 11});
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    double x = rng.Normal();
    sum += x;
    sum2 += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.02);
}

}  // namespace
}  // namespace frugal
