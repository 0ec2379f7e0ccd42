// Cost models: the textbook orderings between algorithms, and the alpha-beta least-squares fit.
#include "frugal/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "frugal/random.h"

namespace frugal {
namespace {

CostTerms Cost(AllreduceAlgorithm a, int n, double bytes, double segment = 0, int per_host = 1,
               int rows = 1) {
  CostShape shape;
  shape.ranks = n;
  shape.bytes = bytes;
  shape.segment_bytes = segment;
  shape.ranks_per_host = per_host;
  shape.torus_rows = rows;
  return AllreduceCost(a, shape);
}

TEST(CostModel, TextbookFormulas) {
  const double N = 1e6;
  const CostTerms ring = Cost(AllreduceAlgorithm::kRing, 8, N);
  EXPECT_DOUBLE_EQ(ring.latency_terms, 14);
  EXPECT_DOUBLE_EQ(ring.bandwidth_bytes, 2 * 7.0 / 8 * N);
  EXPECT_DOUBLE_EQ(ring.compute_bytes, 7.0 / 8 * N);
  const CostTerms rd = Cost(AllreduceAlgorithm::kRecursiveDoubling, 8, N);
  EXPECT_DOUBLE_EQ(rd.latency_terms, 3);
  EXPECT_DOUBLE_EQ(rd.bandwidth_bytes, 3 * N);
  EXPECT_DOUBLE_EQ(rd.compute_bytes, 3 * N);
  const CostTerms rab = Cost(AllreduceAlgorithm::kRabenseifner, 8, N);
  EXPECT_DOUBLE_EQ(rab.latency_terms, 6);
  EXPECT_DOUBLE_EQ(rab.bandwidth_bytes, 2 * 7.0 / 8 * N);
  EXPECT_DOUBLE_EQ(rab.compute_bytes, 7.0 / 8 * N);
  // Non-powers of two pay the pre- and post-step.
  const CostTerms rd6 = Cost(AllreduceAlgorithm::kRecursiveDoubling, 6, N);
  EXPECT_DOUBLE_EQ(rd6.latency_terms, 2 + 2);
  EXPECT_DOUBLE_EQ(rd6.bandwidth_bytes, 4 * N);
  const CostTerms rab6 = Cost(AllreduceAlgorithm::kRabenseifner, 6, N);
  EXPECT_DOUBLE_EQ(rab6.latency_terms, 4 + 2);
  EXPECT_DOUBLE_EQ(rab6.bandwidth_bytes, 2 * 3.0 / 4 * N + 2 * N);
  // One rank or nothing to send costs nothing.
  for (AllreduceAlgorithm a : AllAllreduceAlgorithms()) {
    EXPECT_EQ(Cost(a, 1, N).Seconds({1, 1, 1}), 0);
    EXPECT_EQ(Cost(a, 8, 0).Seconds({1, 1, 1}), 0);
  }
}

TEST(CostModel, OrderingsBetweenAlgorithms) {
  for (int n : {8, 16, 64, 256}) {
    const double N = 64e6;
    const auto ring = Cost(AllreduceAlgorithm::kRing, n, N);
    const auto rd = Cost(AllreduceAlgorithm::kRecursiveDoubling, n, N);
    const auto rab = Cost(AllreduceAlgorithm::kRabenseifner, n, N);
    // Ring and Rabenseifner are bandwidth-optimal, recursive doubling latency-optimal.
    EXPECT_LT(ring.bandwidth_bytes, rd.bandwidth_bytes);
    EXPECT_LE(rab.bandwidth_bytes, ring.bandwidth_bytes + 1e-6);
    EXPECT_LT(rd.latency_terms, ring.latency_terms);
    EXPECT_LT(rab.latency_terms, ring.latency_terms);
    // Pipelined: one tree moves about 3 N on its busiest port, the double tree about 2 N.
    const auto tree = Cost(AllreduceAlgorithm::kBinaryTree, n, N, 64e3);
    const auto dbtree = Cost(AllreduceAlgorithm::kDoubleBinaryTree, n, N, 64e3);
    EXPECT_NEAR(tree.bandwidth_bytes / N, 3.0, 0.1);
    EXPECT_NEAR(dbtree.bandwidth_bytes / N, 2.0, 0.1);
    // Unsegmented, a tree needs 3 log2(n) latency terms, far fewer than the ring's 2 (n - 1).
    const auto tree_whole_latency = Cost(AllreduceAlgorithm::kBinaryTree, n, N).latency_terms;
    EXPECT_DOUBLE_EQ(tree_whole_latency, 3.0 * std::floor(std::log2(n)));
    EXPECT_LT(tree_whole_latency, ring.latency_terms);
    // Pipelining a tree cuts its bandwidth term from ~4 h N to ~4 N.
    const auto tree_whole = Cost(AllreduceAlgorithm::kBinaryTree, n, N);
    EXPECT_LT(tree.bandwidth_bytes, tree_whole.bandwidth_bytes);
    // A square torus has far fewer latency terms than a ring of the same ranks.
    const int rows = static_cast<int>(std::lround(std::sqrt(n)));
    if (rows * rows == n) {
      const auto torus = Cost(AllreduceAlgorithm::kTorus2D, n, N, 0, 1, rows);
      EXPECT_LT(torus.latency_terms, ring.latency_terms);
      EXPECT_DOUBLE_EQ(torus.latency_terms, 4.0 * (rows - 1));
    }
    // Hierarchical with 8 ranks per host sends across hosts only among the leaders.
    const auto hier = Cost(AllreduceAlgorithm::kHierarchical, n, N, 1e6, 8);
    EXPECT_GT(hier.bandwidth_bytes, 0);
  }
  // Two ranks: a pipelined tree or double tree moves N each way, like the ring.
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kBinaryTree, AllreduceAlgorithm::kDoubleBinaryTree}) {
    EXPECT_NEAR(Cost(a, 2, 64e6, 64e3).bandwidth_bytes / 64e6, 1.0, 0.01);
  }
  // Hierarchical on one host is the direct all-reduce (a host's ranks share memory); with one rank
  // per host, the ring.
  for (double segment : {1e5, 1e6}) {
    const CostTerms one_host = Cost(AllreduceAlgorithm::kHierarchical, 8, 1e6, segment, 8);
    const CostTerms direct = Cost(AllreduceAlgorithm::kDirect, 8, 1e6);
    EXPECT_DOUBLE_EQ(one_host.latency_terms, direct.latency_terms);
    EXPECT_DOUBLE_EQ(one_host.bandwidth_bytes, direct.bandwidth_bytes);
    EXPECT_DOUBLE_EQ(one_host.compute_bytes, direct.compute_bytes);
  }
  EXPECT_DOUBLE_EQ(Cost(AllreduceAlgorithm::kHierarchical, 8, 1e6, 1e5, 1).bandwidth_bytes,
                   Cost(AllreduceAlgorithm::kRing, 8, 1e6).bandwidth_bytes);
  // Two hosts of four: the leaders' ring carries N, plus the direct all-reduce inside each host
  // (3/4 N read twice) and the binomial broadcast of one unsegmented piece over 2 levels (2 N).
  const auto hier = Cost(AllreduceAlgorithm::kHierarchical, 8, 1e6, 1e6, 4);
  EXPECT_DOUBLE_EQ(hier.bandwidth_bytes,
                   Cost(AllreduceAlgorithm::kRing, 2, 1e6).bandwidth_bytes + 2 * 0.75e6 + 2e6);
  EXPECT_DOUBLE_EQ(hier.latency_terms,
                   Cost(AllreduceAlgorithm::kRing, 2, 1e6).latency_terms + 3 * 3 + 2);
  // Small messages: recursive doubling beats the ring when alpha dominates.
  const CostParams latency_bound{1e-5, 1e-10, 1e-11};
  EXPECT_LT(Cost(AllreduceAlgorithm::kRecursiveDoubling, 64, 1024).Seconds(latency_bound),
            Cost(AllreduceAlgorithm::kRing, 64, 1024).Seconds(latency_bound));
  // Large messages: the ring beats recursive doubling when beta dominates.
  const CostParams bandwidth_bound{1e-6, 1e-9, 1e-10};
  EXPECT_LT(Cost(AllreduceAlgorithm::kRing, 64, 1e8).Seconds(bandwidth_bound),
            Cost(AllreduceAlgorithm::kRecursiveDoubling, 64, 1e8).Seconds(bandwidth_bound));
}

// Unset, the segment is the algorithm's default (as in AllreduceOptions): the binary tree's 256
// KiB pipelines 4 MiB in 16 segments, 17 stages on 4 ranks (height 2), 2 segments each way per
// stage at the busiest rank (the root's two children); the double tree's 1 MiB cuts each 2 MiB
// half in 2.
TEST(CostModel, UnsetSegmentIsTheAlgorithmsDefault) {
  const double N = 4.0 * (1 << 20);
  CostShape shape;
  shape.ranks = 4;
  shape.bytes = N;
  const CostTerms tree = AllreduceCost(AllreduceAlgorithm::kBinaryTree, shape);
  EXPECT_DOUBLE_EQ(tree.latency_terms, 2 * (2 + 8 - 1));
  EXPECT_DOUBLE_EQ(tree.latency_terms,
                   Cost(AllreduceAlgorithm::kBinaryTree, 4, N, 512 * 1024).latency_terms);
  EXPECT_LT(Cost(AllreduceAlgorithm::kBinaryTree, 4, N, 1 << 20).latency_terms, tree.latency_terms);
  const CostTerms dbtree = AllreduceCost(AllreduceAlgorithm::kDoubleBinaryTree, shape);
  EXPECT_DOUBLE_EQ(dbtree.latency_terms,
                   Cost(AllreduceAlgorithm::kDoubleBinaryTree, 4, N, 512 * 1024).latency_terms);
  EXPECT_NE(dbtree.latency_terms,
            Cost(AllreduceAlgorithm::kDoubleBinaryTree, 4, N, 0).latency_terms);
}

TEST(FitAlphaBeta, RecoversKnownParameters) {
  const double alpha = 7.5e-6;
  const double beta = 1.0 / 3e9;
  std::vector<double> sizes, times;
  for (double m = 8; m <= (1 << 24); m *= 4) {
    sizes.push_back(m);
    times.push_back(alpha + beta * m);
  }
  auto fit = FitAlphaBeta(sizes, times);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->alpha, alpha, 1e-12);
  EXPECT_NEAR(fit->beta, beta, 1e-18);
  EXPECT_NEAR(fit->r2, 1.0, 1e-12);

  // With 1% multiplicative noise the fit stays close and r^2 drops a little below 1.
  RngStream rng(RngKey{.seed = 3});
  std::vector<double> noisy;
  for (size_t i = 0; i < sizes.size(); ++i) {
    noisy.push_back(times[i] * (1.0 + 0.01 * (2 * rng.UniformDouble() - 1)));
  }
  auto noisy_fit = FitAlphaBeta(sizes, noisy);
  ASSERT_TRUE(noisy_fit.ok());
  EXPECT_NEAR(noisy_fit->beta, beta, 0.02 * beta);
  EXPECT_LT(noisy_fit->r2, 1.0);
  EXPECT_GT(noisy_fit->r2, 0.99);
}

TEST(FitAlphaBeta, RejectsDegenerateInput) {
  const std::vector<double> one = {100};
  const std::vector<double> t1 = {1e-3};
  EXPECT_EQ(FitAlphaBeta(one, t1).status().code(), StatusCode::kInvalidArgument);
  const std::vector<double> same = {100, 100, 100};
  const std::vector<double> t3 = {1e-3, 2e-3, 3e-3};
  EXPECT_EQ(FitAlphaBeta(same, t3).status().code(), StatusCode::kInvalidArgument);
  const std::vector<double> two = {1, 2};
  EXPECT_EQ(FitAlphaBeta(two, t3).status().code(), StatusCode::kInvalidArgument);
  const std::vector<double> nan = {1, NAN};
  EXPECT_EQ(FitAlphaBeta(nan, std::vector<double>{1, 2}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace frugal
