// Tier 2: the sparsification, gTop-k, PowerSGD and sketch aggregations over the MPI transport
// across real processes. Every rank computes every rank's (deterministic) input, so each checks
// its result against a serial reference. The world of 4 ranks is also split into 3 + 1, so a
// non-power-of-two group (gTop-k's fold) and a single rank are covered in one job.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compress/gtopk_merge.h"
#include "compress/lowrank_linalg.h"
#include "compress/sparse_select.h"
#include "frugal/compressor.h"
#include "frugal/random.h"
#include "mpi/mpi_test_main.h"

namespace frugal {
namespace {

using mpitest::TestWorld;
using sparse::ReferenceTopK;
using sparse::SparseVector;

constexpr Duration kTimeout = std::chrono::seconds(30);

std::vector<float> Input(int rank, size_t n, uint64_t salt) {
  RngStream rng({.seed = salt, .rank = rank});
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng.Below(2001)) - 1000);
  return x;
}

std::unique_ptr<Compressor> Make(std::string_view spec) {
  auto c = DefaultCompressorRegistry().Create(spec);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

template <typename Body>
void OnWorldAndSplit(Transport& world, Body body) {
  body(world);
  const int k = world.size() - 1;
  if (k < 1) return;
  auto group = world.Split(world.rank() < k ? 0 : 1, world.rank(), kTimeout);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  body(**group);
}

Status AggregateOnce(Transport& t, const Compressor& c, std::vector<float>& data,
                     const TensorInfo& tensor, CompressContext& ctx, ReduceOp op) {
  AggregateOptions options;
  options.op = op;
  options.timeout = kTimeout;
  return AggregateCompressed(t, c, data, tensor, ctx, options);
}

TEST(MpiSparseTest, GTopKMatchesTheSerialTree) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  OnWorldAndSplit(*world, [&](Transport& t) {
    const int p = t.size();
    const size_t n = 20000, k = 200;
    TensorInfo tensor("w", n);
    auto c = Make("gtopk:k=200,ef=0");
    CompressContext ctx(1, t.rank(), p);
    std::vector<float> data = Input(t.rank(), n, 7);
    Status s = AggregateOnce(t, *c, data, tensor, ctx, ReduceOp::kSum);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<SparseVector> sets;
    for (int r = 0; r < p; ++r) sets.push_back(ReferenceTopK(Input(r, n, 7), k));
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    sparse::TopKSelector selector;
    SparseVector scratch, merged;
    for (int j = 0; j + p2 < p; ++j) {
      sparse::MergeTopK(sets[j], sets[j + p2], k, &scratch, selector, &merged);
      sets[j] = merged;
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
      std::vector<SparseVector> next(p2);
      for (int i = 0; i < p2; ++i) {
        sparse::MergeTopK(sets[i], sets[i ^ mask], k, &scratch, selector, &next[i]);
      }
      for (int i = 0; i < p2; ++i) sets[i] = next[i];
    }
    std::vector<float> want(n, 0.0f);
    for (size_t i = 0; i < sets[0].size(); ++i) want[sets[0].indices[i]] = sets[0].values[i];
    EXPECT_EQ(data, want) << "group of " << p;
  });
}

TEST(MpiSparseTest, PowerSgdRecoversTheAverageOfRankTwoMatrices) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  OnWorldAndSplit(*world, [&](Transport& t) {
    const size_t rows = 80, cols = 60;
    TensorInfo tensor("fc", rows * cols, {80, 60});
    RngStream rng({.seed = 3});
    std::vector<float> u(rows * 2), v(cols * 2), base(rows * cols, 0.0f);
    for (float& x : u) x = static_cast<float>(rng.Normal());
    for (float& x : v) x = static_cast<float>(rng.Normal());
    lowrank::AddOuterProducts(u, v, rows, cols, 2, 1.0f, base);
    auto c = Make("powersgd:rank=2,start_iter=0");
    CompressContext ctx(5, t.rank(), t.size());
    std::vector<float> data = base;
    for (float& x : data) x *= static_cast<float>(t.rank() + 1);
    Status s = AggregateOnce(t, *c, data, tensor, ctx, ReduceOp::kAverage);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const double scale = (t.size() + 1) / 2.0;  // mean of 1..p
    double err = 0, norm = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      double want = scale * base[i];
      err += (data[i] - want) * (data[i] - want);
      norm += want * want;
    }
    EXPECT_LT(std::sqrt(err / norm), 1e-5) << "group of " << t.size();
  });
}

TEST(MpiSparseTest, SketchAndRandomKAgreeWithTheExactSum) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  OnWorldAndSplit(*world, [&](Transport& t) {
    const int p = t.size();
    const size_t n = 30000;
    TensorInfo tensor("w", n);
    std::vector<float> sum(n, 0.0f);
    auto input = [&](int r) {
      std::vector<float> x = Input(r, n, 11);
      for (float& v : x) v *= 1e-4f;
      for (size_t j = 0; j < 8; ++j) x[j * 3001 + 5] += 10.0f + static_cast<float>(j);
      return x;
    };
    for (int r = 0; r < p; ++r) {
      std::vector<float> x = input(r);
      for (size_t i = 0; i < n; ++i) sum[i] += x[i];
    }
    CompressContext ctx(9, t.rank(), p);
    std::vector<float> data = input(t.rank());
    ASSERT_TRUE(
        AggregateOnce(t, *Make("sketch:k=8,cols=1000"), data, tensor, ctx, ReduceOp::kSum).ok());
    for (size_t i = 0; i < n; ++i) {
      bool heavy = i % 3001 == 5 && i / 3001 < 8;
      EXPECT_NEAR(data[i], heavy ? sum[i] : 0.0f, 1e-3) << i;
    }
    // random-k: the all-reduced values at the shared indices are the exact sums there.
    data = input(t.rank());
    ASSERT_TRUE(
        AggregateOnce(t, *Make("randomk:ratio=0.01"), data, tensor, ctx, ReduceOp::kSum).ok());
    size_t nonzero = 0;
    for (size_t i = 0; i < n; ++i) {
      if (data[i] != 0) {
        ++nonzero;
        EXPECT_NEAR(data[i], sum[i], 1e-3);
      }
    }
    EXPECT_LE(nonzero, 300u);
    EXPECT_GE(nonzero, 290u);
  });
}

}  // namespace
}  // namespace frugal
