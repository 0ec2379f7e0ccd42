// Tier 2: the MPI_Allreduce reducer ("mpi") under mpirun.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "frugal/reducer.h"
#include "mpi_test_main.h"

namespace frugal {
namespace {

using mpitest::TestWorld;

using mpitest::kTimeout;
constexpr int kGaveUpTag = 60;
constexpr int kReducerDoneTag = 61;
constexpr size_t kCount = size_t{1} << 20;  // 4 MB of floats

// Rank r's input at i: small integers, so the average is exact in float for 4 ranks.
float ReducerInput(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 3 + static_cast<size_t>(rank) * 5) % 17) - 8);
}

TEST(MpiReducer, AveragesExactly) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  DenseReducerOptions options;
  options.algorithm = "mpi";
  options.timeout = kTimeout;
  auto reducer = MakeDenseReducer(*t, options);
  ASSERT_TRUE(reducer.ok()) << reducer.status().ToString();
  const int n = t->size();
  std::vector<float> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = ReducerInput(t->rank(), i);
  BucketInfo bucket;
  bucket.name = "bucket0";
  bucket.count = kCount;
  ASSERT_TRUE((*reducer)->Reduce(bucket, data).ok());
  for (size_t i = 0; i < kCount; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += ReducerInput(r, i);
    ASSERT_EQ(data[i], sum / static_cast<float>(n)) << i;
  }
}

// Every rank but the last gives up on a bucket (its timeout expires while the last rank is
// away), overwrites it and frees it. Then the last rank joins: the all-reduce that the others
// abandoned still completes, with the values it started with, and never writes into the
// memory the others have reused.
TEST(MpiReducer, TimedOutBucketIsNeverTouchedAgain) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const int n = t->size();
  const int late = n - 1;
  DenseReducerOptions options;
  options.algorithm = "mpi";
  options.timeout = t->rank() == late ? kTimeout : std::chrono::milliseconds(200);
  auto made = MakeDenseReducer(*t, options);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  GradientReducer& reducer = **made;
  BucketInfo bucket;
  bucket.name = "bucket0";
  bucket.count = kCount;
  bucket.step = 7;
  if (t->rank() != late) {
    std::vector<float> reused;
    {
      std::vector<float> data(kCount);
      for (size_t i = 0; i < kCount; ++i) data[i] = ReducerInput(t->rank(), i);
      Status s = reducer.Reduce(bucket, data);
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
      EXPECT_NE(s.message().find("bucket0 (step 7)"), std::string::npos) << s.message();
      std::fill(data.begin(), data.end(), 1e9f);
    }
    reused.assign(kCount, -1e9f);
    std::byte b{1};
    ASSERT_TRUE(Send(*t, late, kGaveUpTag, {&b, 1}, kTimeout).ok());
    EXPECT_EQ(mpitest::Runtime().abandoned_operations(), 1u);
    // Waiting here keeps MPI progressing on this rank, so the abandoned all-reduce can finish.
    ASSERT_TRUE(Recv(*t, late, kReducerDoneTag, {&b, 1}, kTimeout).ok());
    EXPECT_TRUE(mpitest::AbandonedOperationsComplete(kTimeout));
    EXPECT_TRUE(std::all_of(reused.begin(), reused.end(), [](float v) { return v == -1e9f; }))
        << "memory reused after the timeout was written by the abandoned all-reduce";
  } else {
    std::byte b{0};
    for (int r = 0; r < late; ++r) ASSERT_TRUE(Recv(*t, r, kGaveUpTag, {&b, 1}, kTimeout).ok());
    std::vector<float> data(kCount);
    for (size_t i = 0; i < kCount; ++i) data[i] = ReducerInput(t->rank(), i);
    Status s = reducer.Reduce(bucket, data);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < kCount; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += ReducerInput(r, i);
      ASSERT_EQ(data[i], sum / static_cast<float>(n)) << "element " << i;
    }
    for (int r = 0; r < late; ++r)
      ASSERT_TRUE(Send(*t, r, kReducerDoneTag, {&b, 1}, kTimeout).ok());
  }
}

}  // namespace
}  // namespace frugal
