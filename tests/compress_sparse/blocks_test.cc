// Count sketch and PowerSGD linear algebra against plain serial references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compress/lowrank_linalg.h"
#include "compress/sketch_count.h"
#include "compress_sparse/sparse_test_util.h"
#include "frugal/check.h"
#include "frugal/random.h"

namespace frugal {
namespace {

using sparse_test::Gaussian;

// ----- Count sketch -----

TEST(CountSketchTest, MatchesTheDefinition) {
  sketch::CountSketch s(5, 37, 99);
  std::vector<float> x = Gaussian(1000, 1);
  std::vector<float> table(s.table_size(), 0.0f);
  s.Accumulate(x, table);
  std::vector<double> want(s.table_size(), 0.0);
  for (int r = 0; r < 5; ++r) {
    for (size_t i = 0; i < x.size(); ++i) {
      want[static_cast<size_t>(r) * 37 + s.Column(r, i)] += s.Sign(r, i) * x[i];
    }
  }
  for (size_t c = 0; c < table.size(); ++c) EXPECT_NEAR(table[c], want[c], 1e-4);
  // Columns spread over the whole row, signs are balanced.
  std::vector<int> hits(37, 0);
  int negative = 0;
  for (uint64_t i = 0; i < 37000; ++i) {
    ++hits[s.Column(2, i)];
    negative += s.Sign(2, i) < 0;
  }
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);
  EXPECT_NEAR(negative, 18500, 500);
}

// S(a + b) = S(a) + S(b): exact for integer-valued inputs (no rounding anywhere).
TEST(CountSketchTest, IsLinear) {
  sketch::CountSketch s(4, 64, 7);
  RngStream rng({.seed = 3});
  std::vector<float> a(5000), b(5000), sum(5000);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(static_cast<int>(rng.Below(201)) - 100);
    b[i] = static_cast<float>(static_cast<int>(rng.Below(201)) - 100);
    sum[i] = a[i] + b[i];
  }
  std::vector<float> sa(s.table_size()), sb(s.table_size()), ssum(s.table_size());
  s.Accumulate(a, sa);
  s.Accumulate(b, sb);
  s.Accumulate(sum, ssum);
  for (size_t c = 0; c < ssum.size(); ++c) EXPECT_EQ(ssum[c], sa[c] + sb[c]);
}

TEST(CountSketchTest, SameSeedSameHashesOtherSeedOtherHashes) {
  sketch::CountSketch a(3, 1000, 5), b(3, 1000, 5), c(3, 1000, 6);
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a.Column(1, i), b.Column(1, i));
    same += a.Column(1, i) == c.Column(1, i);
  }
  EXPECT_LT(same, 20);
}

TEST(CountSketchTest, RecoversAOneSparseVectorExactly) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    sketch::CountSketch s(5, 1000, seed);
    const size_t n = 100000;
    std::vector<float> x(n, 0.0f);
    size_t hot = (seed * 7919) % n;
    x[hot] = -3.25f * static_cast<float>(seed);
    std::vector<float> table(s.table_size(), 0.0f);
    s.Accumulate(x, table);
    EXPECT_EQ(s.Estimate(table, hot), x[hot]);
    std::vector<float> estimates(n);
    sparse::TopKSelector selector;
    sparse::SparseVector top;
    s.HeavyHitters(table, 1, estimates, selector, &top);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top.indices[0], hot);
    EXPECT_EQ(top.values[0], x[hot]);
  }
}

// k spikes over small noise: the heavy hitters are the spikes, estimated within the noise.
TEST(CountSketchTest, RecoversHeavyHitters) {
  const size_t n = 200000, k = 20;
  sketch::CountSketch s(5, 2000, 11);
  std::vector<float> x = Gaussian(n, 5);
  for (float& v : x) v *= 0.01f;
  std::vector<uint32_t> spikes;
  for (size_t j = 0; j < k; ++j) {
    uint32_t i = static_cast<uint32_t>((j * 9973 + 17) % n);
    x[i] = (j % 2 ? 1.0f : -1.0f) * (10.0f + static_cast<float>(j));
    spikes.push_back(i);
  }
  std::sort(spikes.begin(), spikes.end());
  std::vector<float> table(s.table_size(), 0.0f);
  s.Accumulate(x, table);
  std::vector<float> estimates(n);
  sparse::TopKSelector selector;
  sparse::SparseVector top;
  s.HeavyHitters(table, k, estimates, selector, &top);
  EXPECT_EQ(top.indices, spikes);
  for (size_t j = 0; j < top.size(); ++j) EXPECT_NEAR(top.values[j], x[top.indices[j]], 0.5);
}

TEST(CountSketchTest, RejectsBadShapes) {
  EXPECT_THROW(sketch::CountSketch(0, 10, 1), CheckError);
  EXPECT_THROW(sketch::CountSketch(65, 10, 1), CheckError);
  EXPECT_THROW(sketch::CountSketch(3, 0, 1), CheckError);
  sketch::CountSketch s(2, 8, 1);
  std::vector<float> x(4), wrong(15);
  EXPECT_THROW(s.Accumulate(x, wrong), CheckError);
}

// ----- PowerSGD linear algebra -----

TEST(LowRankTest, ProductsMatchNaiveLoops) {
  const size_t rows = 13, cols = 29;
  const int r = 3;
  std::vector<float> m = Gaussian(rows * cols, 1), q = Gaussian(cols * r, 2);
  std::vector<float> p(rows * r);
  lowrank::MultiplyMQ(m, rows, cols, q, r, p);
  for (size_t i = 0; i < rows; ++i) {
    for (int c = 0; c < r; ++c) {
      double s = 0;
      for (size_t j = 0; j < cols; ++j) s += static_cast<double>(m[i * cols + j]) * q[c * cols + j];
      EXPECT_NEAR(p[c * rows + i], s, 1e-5);
    }
  }
  std::vector<float> q2(cols * r);
  lowrank::MultiplyMtP(m, rows, cols, p, r, q2);
  for (size_t j = 0; j < cols; ++j) {
    for (int c = 0; c < r; ++c) {
      double s = 0;
      for (size_t i = 0; i < rows; ++i) s += static_cast<double>(m[i * cols + j]) * p[c * rows + i];
      EXPECT_NEAR(q2[c * cols + j], s, 1e-4);
    }
  }
  std::vector<float> out(rows * cols, 1.0f);
  lowrank::AddOuterProducts(p, q2, rows, cols, r, 0.5f, out);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      double s = 1.0;
      for (int c = 0; c < r; ++c) s += 0.5 * p[c * rows + i] * q2[c * cols + j];
      EXPECT_NEAR(out[i * cols + j], s, 1e-3);
    }
  }
}

TEST(LowRankTest, GramSchmidtGivesOrthonormalColumns) {
  const size_t length = 500;
  for (int r : {1, 2, 4, 8}) {
    std::vector<float> a = Gaussian(length * r, static_cast<uint64_t>(r));
    lowrank::OrthonormalizeColumns(a, length, r);
    for (int c = 0; c < r; ++c) {
      for (int d = 0; d < r; ++d) {
        double dot = 0;
        for (size_t i = 0; i < length; ++i)
          dot += static_cast<double>(a[c * length + i]) * a[d * length + i];
        EXPECT_NEAR(dot, c == d ? 1.0 : 0.0, 1e-5) << "r=" << r << " c=" << c << " d=" << d;
      }
    }
  }
}

// A zero column stays zero; a column parallel to an earlier one keeps only rounding noise, which
// is normalised (as PyTorch does), so the columns stay orthonormal.
TEST(LowRankTest, GramSchmidtHandlesDependentColumns) {
  const size_t length = 10;
  std::vector<float> a(length * 3, 0.0f);
  for (size_t i = 0; i < length; ++i) {
    a[i] = static_cast<float>(i + 1);
    a[length + i] = 2.0f * static_cast<float>(i + 1);  // parallel to column 0
  }
  lowrank::OrthonormalizeColumns(a, length, 3);
  double dot01 = 0, norm1 = 0;
  for (size_t i = 0; i < length; ++i) {
    ASSERT_TRUE(std::isfinite(a[i]) && std::isfinite(a[length + i]));
    dot01 += static_cast<double>(a[i]) * a[length + i];
    norm1 += static_cast<double>(a[length + i]) * a[length + i];
    EXPECT_EQ(a[2 * length + i], 0.0f);
  }
  EXPECT_NEAR(dot01, 0.0, 1e-5);
  EXPECT_TRUE(std::fabs(norm1 - 1.0) < 1e-5 || norm1 == 0.0) << norm1;
}

// A rank-r matrix is recovered exactly (to float rounding) by one power iteration from a random
// Q: P = M Q spans the column space, Q = M^T P, and P Q^T = P P^T M = M.
TEST(LowRankTest, OnePowerIterationRecoversARankRMatrix) {
  const size_t rows = 40, cols = 60;
  for (int r : {1, 2, 4}) {
    std::vector<float> u = Gaussian(rows * r, 10 + r), v = Gaussian(cols * r, 20 + r);
    std::vector<float> m(rows * cols, 0.0f);
    lowrank::AddOuterProducts(u, v, rows, cols, r, 1.0f, m);
    std::vector<float> q(cols * r), p(rows * r);
    RngStream rng({.seed = 5});
    lowrank::FillNormal(q, rng);
    lowrank::MultiplyMQ(m, rows, cols, q, r, p);
    lowrank::OrthonormalizeColumns(p, rows, r);
    lowrank::MultiplyMtP(m, rows, cols, p, r, q);
    std::vector<float> approx(rows * cols, 0.0f);
    lowrank::AddOuterProducts(p, q, rows, cols, r, 1.0f, approx);
    double err = 0, norm = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      err += (approx[i] - m[i]) * (approx[i] - m[i]);
      norm += m[i] * m[i];
    }
    EXPECT_LT(std::sqrt(err / norm), 1e-5) << "r=" << r;
  }
}

}  // namespace
}  // namespace frugal
