// gTop-k merge and the pairwise merge tree over the in-process transport.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#include "compress/gtopk_merge.h"
#include "compress_sparse/sparse_test_util.h"
#include "frugal/inproc_transport.h"
#include "frugal/random.h"

namespace frugal::sparse {
namespace {

using namespace std::chrono_literals;

using sparse_test::Gaussian;

std::vector<float> Dense(const SparseVector& v, size_t n) {
  std::vector<float> x(n, 0.0f);
  for (size_t i = 0; i < v.size(); ++i) x[v.indices[i]] += v.values[i];
  return x;
}

TEST(MergeTopKTest, IsTheTopKOfTheSumAndSymmetric) {
  const size_t n = 3000;
  TopKSelector selector;
  SparseVector scratch, ab, ba;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SparseVector a = ReferenceTopK(Gaussian(n, seed), 200);
    SparseVector b = ReferenceTopK(Gaussian(n, seed + 100), 300);
    for (size_t k : {size_t{1}, size_t{150}, size_t{400}, size_t{600}}) {
      MergeTopK(a, b, k, &scratch, selector, &ab);
      MergeTopK(b, a, k, &scratch, selector, &ba);
      std::vector<float> sum = Dense(a, n), db = Dense(b, n);
      for (size_t i = 0; i < n; ++i) sum[i] += db[i];
      // When k exceeds the union, the reference also lists zeros from outside it: compare densely.
      SparseVector want = ReferenceTopK(sum, k);
      EXPECT_EQ(Dense(ab, n), Dense(want, n)) << "k=" << k;
      std::vector<float> da = Dense(a, n);
      size_t union_size = 0;
      for (size_t i = 0; i < n; ++i) union_size += da[i] != 0 || db[i] != 0;
      EXPECT_EQ(ab.size(), std::min(k, union_size));
      EXPECT_EQ(ab.indices, ba.indices);
      EXPECT_EQ(ab.values, ba.values);
    }
  }
}

TEST(SparseVectorWireTest, RoundTripAndRejects) {
  SparseVector v = ReferenceTopK(Gaussian(1000, 3), 50);
  std::vector<std::byte> buf;
  AppendSparseVector(v, 1000, &buf);
  SparseVector back;
  ASSERT_TRUE(ReadSparseVector(buf, 1000, 50, &back).ok());
  EXPECT_EQ(back.indices, v.indices);
  EXPECT_EQ(back.values, v.values);
  EXPECT_FALSE(ReadSparseVector(buf, 1000, 49, &back).ok());
  EXPECT_FALSE(ReadSparseVector(std::span(buf).first(buf.size() - 1), 1000, 50, &back).ok());
  buf.push_back(std::byte{0});
  EXPECT_FALSE(ReadSparseVector(buf, 1000, 50, &back).ok());
}

struct RankResult {
  SparseVector local, global;
  std::vector<uint8_t> alive;
};

// Runs GlobalTopK on `world` ranks; rank r brings the top-k of inputs[r].
std::vector<RankResult> RunGlobalTopK(const std::vector<std::vector<float>>& inputs, size_t k) {
  const int world = static_cast<int>(inputs.size());
  const uint64_t n = inputs[0].size();
  std::vector<RankResult> results(world);
  std::vector<Status> statuses = RunRanks(world, [&](Transport& t) {
    RankResult& mine = results[t.rank()];
    mine.local = ReferenceTopK(inputs[t.rank()], k);
    return GlobalTopK(t, mine.local, n, k, {.timeout = 10s, .tag = 100}, &mine.global, &mine.alive);
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
  return results;
}

// The serial reference of the merge tree, in the same order as GlobalTopK.
SparseVector ReferenceTree(std::vector<SparseVector> sets, size_t k) {
  const int world = static_cast<int>(sets.size());
  int p2 = 1;
  while (p2 * 2 <= world) p2 *= 2;
  TopKSelector selector;
  SparseVector scratch, merged;
  for (int j = 0; j + p2 < world; ++j) {
    MergeTopK(sets[j], sets[j + p2], k, &scratch, selector, &merged);
    sets[j] = merged;
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    std::vector<SparseVector> next(p2);
    for (int i = 0; i < p2; ++i) {
      MergeTopK(sets[i], sets[i ^ mask], k, &scratch, selector, &next[i]);
    }
    for (int i = 0; i < p2; ++i) sets[i] = next[i];
  }
  return sets[0];
}

TEST(GlobalTopKTest, TwoRanksGiveTheExactTopKOfTheSum) {
  // Inputs that are k-sparse: the local top-k is the whole input, so gTop-k is exactly the top-k
  // of the sum of the inputs.
  const size_t n = 5000, k = 100;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<std::vector<float>> inputs(2, std::vector<float>(n, 0.0f));
    RngStream rng({.seed = seed});
    for (auto& x : inputs) {
      for (size_t j = 0; j < k; ++j) x[rng.Below(n / 2)] = static_cast<float>(rng.Normal());
    }
    std::vector<float> sum(n);
    for (size_t i = 0; i < n; ++i) sum[i] = inputs[0][i] + inputs[1][i];
    std::vector<RankResult> results = RunGlobalTopK(inputs, k);
    SparseVector want = ReferenceTopK(sum, k);
    for (const RankResult& r : results) {
      // Indices where the sum is exactly zero may or may not be listed; compare densely.
      EXPECT_EQ(Dense(r.global, n), Dense(want, n));
    }
    // Dense inputs: the top-k of the sum of the two local top-k.
    inputs = {Gaussian(n, seed), Gaussian(n, seed + 50)};
    results = RunGlobalTopK(inputs, k);
    SparseVector want2 =
        ReferenceTree({ReferenceTopK(inputs[0], k), ReferenceTopK(inputs[1], k)}, k);
    for (const RankResult& r : results) {
      EXPECT_EQ(r.global.indices, want2.indices);
      EXPECT_EQ(r.global.values, want2.values);
    }
  }
}

// Every world size, power of two or not: all ranks agree with the serial tree, and the values of
// the surviving local entries add up exactly to the global values (nothing counted twice, nothing
// lost: the rest goes back to the residuals).
TEST(GlobalTopKTest, AgreesWithTheSerialTreeAndConservesMass) {
  const size_t n = 2000, k = 64;
  for (int world = 1; world <= 8; ++world) {
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < world; ++r) {
      // Integer values: sums are exact in any order, so conservation is checked exactly.
      RngStream rng({.seed = static_cast<uint64_t>(world * 100 + r)});
      std::vector<float> x(n);
      for (float& v : x) v = static_cast<float>(static_cast<int>(rng.Below(2001)) - 1000);
      inputs.push_back(x);
    }
    std::vector<RankResult> results = RunGlobalTopK(inputs, k);
    std::vector<SparseVector> locals;
    for (auto& x : inputs) locals.push_back(ReferenceTopK(x, k));
    SparseVector want = ReferenceTree(locals, k);
    std::vector<float> survived(n, 0.0f);
    for (int r = 0; r < world; ++r) {
      SCOPED_TRACE(testing::Message() << "world=" << world << " rank=" << r);
      EXPECT_EQ(results[r].global.indices, want.indices);
      EXPECT_EQ(results[r].global.values, want.values);
      ASSERT_EQ(results[r].alive.size(), results[r].local.size());
      for (size_t i = 0; i < results[r].local.size(); ++i) {
        if (results[r].alive[i])
          survived[results[r].local.indices[i]] += results[r].local.values[i];
      }
    }
    EXPECT_EQ(survived, Dense(want, n)) << "world=" << world;
  }
}

TEST(GlobalTopKTest, MissingPeerTimesOut) {
  std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
    if (t.rank() == 1) return Status::Ok();  // never joins
    SparseVector local = ReferenceTopK(Gaussian(100, 1), 5), global;
    std::vector<uint8_t> alive;
    return GlobalTopK(t, local, 100, 5, {.timeout = 200ms, .tag = 100}, &global, &alive);
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimeout) << statuses[0].ToString();
}

TEST(GlobalTopKTest, OversizedPeerVectorIsMalformed) {
  std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
    // Rank 1 sends 10 entries where k = 5.
    size_t k = t.rank() == 1 ? 10 : 5;
    SparseVector local = ReferenceTopK(Gaussian(100, t.rank()), k), global;
    std::vector<uint8_t> alive;
    return GlobalTopK(t, local, 100, k, {.timeout = 2s, .tag = 100}, &global, &alive);
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kMalformed) << statuses[0].ToString();
}

}  // namespace
}  // namespace frugal::sparse
