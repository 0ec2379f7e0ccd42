#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "compress/sparse_select.h"
#include "compress_sparse/sparse_test_util.h"
#include "frugal/check.h"
#include "frugal/random.h"

namespace frugal::sparse {
namespace {

using sparse_test::Gaussian;

// Small integers: many ties at every magnitude.
std::vector<float> Ties(size_t n, uint64_t seed) {
  RngStream rng({.seed = seed});
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng.Below(9)) - 4);
  return x;
}

double SquaredNorm(std::span<const float> x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return s;
}

void ExpectSame(const SparseVector& got, const SparseVector& want) {
  ASSERT_EQ(got.indices, want.indices);
  ASSERT_EQ(got.values.size(), want.values.size());
  for (size_t i = 0; i < got.values.size(); ++i) {
    EXPECT_EQ(MagnitudeKey(got.values[i]), MagnitudeKey(want.values[i]));
    EXPECT_EQ(std::signbit(got.values[i]), std::signbit(want.values[i]));
  }
}

TEST(KFromRatioTest, RoundsAndClamps) {
  EXPECT_EQ(KFromRatio(0.01, 0), 0u);
  EXPECT_EQ(KFromRatio(0.01, 10), 1u);
  EXPECT_EQ(KFromRatio(0.01, 25000000), 250000u);
  EXPECT_EQ(KFromRatio(1.0, 7), 7u);
  EXPECT_THROW(KFromRatio(0.0, 7), CheckError);
  EXPECT_THROW(KFromRatio(1.5, 7), CheckError);
}

TEST(TopKExactTest, MatchesFullSortReference) {
  TopKSelector selector;
  SparseVector got;
  for (size_t n : {1, 2, 3, 17, 100, 1000, 4099}) {
    for (uint64_t seed : {1, 2}) {
      for (bool ties : {false, true}) {
        std::vector<float> x = ties ? Ties(n, seed) : Gaussian(n, seed);
        for (size_t k : {size_t{0}, size_t{1}, n / 3, n - 1, n, n + 5}) {
          selector.SelectExact(x, k, &got);
          SCOPED_TRACE(testing::Message() << "n=" << n << " k=" << k << " ties=" << ties);
          ExpectSame(got, ReferenceTopK(x, k));
        }
      }
    }
  }
}

TEST(TopKExactTest, OrdersSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -inf, 2.0f, nan, -3.0f, inf, 1e-40f};
  TopKSelector selector;
  SparseVector got;
  selector.SelectExact(x, 4, &got);
  ExpectSame(got, ReferenceTopK(x, 4));
  EXPECT_EQ(got.indices, (std::vector<uint32_t>{3, 5, 6, 7}));  // NaN > inf, then -3
  selector.SelectExact(x, 8, &got);
  // -0 ties 0: the smaller index, 0, is kept.
  EXPECT_EQ(got.indices, (std::vector<uint32_t>{0, 2, 3, 4, 5, 6, 7, 8}));
}

// ||x - C(x)||^2 <= (1 - k/d) ||x||^2: the top-k leaves at most the average share of the energy.
TEST(TopKExactTest, IsAContraction) {
  TopKSelector selector;
  SparseVector got;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    size_t d = 500 + seed * 37;
    std::vector<float> x = Gaussian(d, seed);
    for (float& v : x) v = v * v * v;  // heavy tails
    for (size_t k : {size_t{1}, d / 100, d / 10, d / 2}) {
      selector.SelectExact(x, k, &got);
      std::vector<float> rest = x;
      for (uint32_t i : got.indices) rest[i] = 0;
      double bound = (1.0 - static_cast<double>(k) / static_cast<double>(d)) * SquaredNorm(x);
      EXPECT_LE(SquaredNorm(rest), bound * (1 + 1e-12) + 1e-30) << "d=" << d << " k=" << k;
    }
  }
}

// A sampled selection is always the exact top-m of x for its own size m, with m in [0.8k, k].
TEST(TopKSampledTest, IsATopSetOfToleratedSize) {
  TopKSelector selector;
  SparseVector got;
  SampledSelectOptions options;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    for (size_t n : {size_t{5000}, size_t{200003}}) {
      for (bool ties : {false, true}) {
        std::vector<float> x = ties ? Ties(n, seed) : Gaussian(n, seed);
        for (double ratio : {0.1, 0.01, 0.001}) {
          size_t k = KFromRatio(ratio, n);
          RngStream rng({.seed = seed, .rank = 0, .step = 7});
          SelectStats stats = selector.SelectSampled(x, k, rng, options, &got);
          SCOPED_TRACE(testing::Message() << "n=" << n << " ratio=" << ratio << " ties=" << ties);
          EXPECT_LE(got.size(), k);
          EXPECT_GE(got.size(), static_cast<size_t>(std::ceil(0.8 * static_cast<double>(k))));
          ExpectSame(got, ReferenceTopK(x, got.size()));
          EXPECT_GE(stats.candidates, got.size());
        }
      }
    }
  }
}

TEST(TopKSampledTest, DeterministicFromTheStream) {
  std::vector<float> x = Gaussian(100000, 3);
  TopKSelector a, b;
  SparseVector ra, rb;
  RngStream s1({.seed = 9, .rank = 1, .step = 4});
  RngStream s2({.seed = 9, .rank = 1, .step = 4});
  a.SelectSampled(x, 100, s1, {}, &ra);
  b.SelectSampled(x, 100, s2, {}, &rb);
  EXPECT_EQ(ra.indices, rb.indices);
}

// A sample that sees only zeros sets the threshold to zero: every entry is a candidate and the
// exact top-k of the candidates is returned.
TEST(TopKSampledTest, MostlyZeroInput) {
  std::vector<float> x(300000, 0.0f);
  for (size_t i = 0; i < x.size(); i += 1000) x[i] = static_cast<float>(i % 7) + 1.0f;
  TopKSelector selector;
  SparseVector got;
  RngStream rng({.seed = 5});
  selector.SelectSampled(x, 3000, rng, {}, &got);
  ExpectSame(got, ReferenceTopK(x, 3000));
}

// A first threshold far too high is lowered by refine_factor until at least 0.8 k entries pass;
// when the refinements run out, exact selection takes over.
TEST(TopKSampledTest, RefinesATooHighThreshold) {
  std::vector<float> x = Gaussian(100000, 4);
  TopKSelector selector;
  SparseVector got;
  SampledSelectOptions options;
  SelectStats stats = selector.SelectFromThreshold(x, 1000, 4.0f, options, &got);
  EXPECT_GT(stats.refinements, 0);
  EXPECT_FALSE(stats.exact_fallback);
  EXPECT_GE(got.size(), 800u);
  EXPECT_LE(got.size(), 1000u);
  ExpectSame(got, ReferenceTopK(x, got.size()));

  options.max_refinements = 1;
  stats = selector.SelectFromThreshold(x, 1000, 1e6f, options, &got);
  EXPECT_EQ(stats.refinements, 1);
  EXPECT_TRUE(stats.exact_fallback);
  ExpectSame(got, ReferenceTopK(x, 1000));

  // Too low: everything passes and the exact top-k of the candidates is kept.
  stats = selector.SelectFromThreshold(x, 1000, 0.0f, options, &got);
  EXPECT_EQ(stats.candidates, x.size());
  ExpectSame(got, ReferenceTopK(x, 1000));

  stats = selector.SelectFromThreshold(x, 0, 1.0f, options, &got);
  EXPECT_EQ(got.size(), 0u);
}

TEST(TopKSampledTest, SmallInputsUseExactSelection) {
  std::vector<float> x = Gaussian(500, 1);
  TopKSelector selector;
  SparseVector got;
  RngStream rng({.seed = 1});
  SelectStats stats = selector.SelectSampled(x, 10, rng, {}, &got);
  EXPECT_TRUE(stats.exact_fallback);
  ExpectSame(got, ReferenceTopK(x, 10));
}

TEST(SelectAtLeastTest, MatchesBruteForce) {
  std::vector<float> x = Gaussian(10007, 2);
  TopKSelector selector;
  SparseVector got;
  for (float tau : {0.0f, 0.5f, 2.0f, 10.0f}) {
    selector.SelectAtLeast(x, tau, &got);
    std::vector<uint32_t> want;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) >= tau) want.push_back(static_cast<uint32_t>(i));
    }
    EXPECT_EQ(got.indices, want) << tau;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got.values[i], x[got.indices[i]]);
  }
  EXPECT_THROW(selector.SelectAtLeast(x, -1.0f, &got), CheckError);
}

}  // namespace
}  // namespace frugal::sparse
