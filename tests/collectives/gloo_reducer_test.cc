// The Gloo reducer ("gloo", "gloo:halving_doubling") with ranks as threads over the in-process
// transport (each rank's Gloo context talks TCP over loopback): buckets of many lengths, some
// repeated, in one reducer against a serial average; a rank that stops taking part ends the
// others' Reduce within the timeout naming it, and the reducer keeps returning that error; host
// names that do not resolve are refused before Gloo sees them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "frugal/gloo.h"
#include "frugal/inproc_transport.h"
#include "frugal/random.h"
#include "frugal/reducer.h"

namespace frugal {
namespace {

using std::chrono::milliseconds;

std::vector<float> Values(int rank, size_t count, int bucket) {
  RngStream rng(
      RngKey{.seed = 3, .rank = rank, .step = 0, .tensor = static_cast<uint64_t>(bucket)});
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(rng.Normal());
  return v;
}

class GlooReducerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  }
};

// Lengths repeat (the staging buffer and all-reduce made for a length are reused) and the bucket
// buffers are new vectors each time.
TEST_P(GlooReducerTest, BucketsOfManyLengthsAverageLikeASerialSum) {
  const std::vector<size_t> lengths = {1000, 7, 1000, 1, 65543, 7, 1000};
  for (int n : {1, 2, 3, 4, 5}) {
    std::vector<std::vector<std::vector<float>>> results(static_cast<size_t>(n));
    auto statuses = RunRanks(n, [&](Transport& t) -> Status {
      DenseReducerOptions options;
      options.algorithm = GetParam();
      options.timeout = std::chrono::seconds(20);
      FRUGAL_ASSIGN_OR_RETURN(auto reducer, MakeDenseReducer(t, options));
      for (size_t b = 0; b < lengths.size(); ++b) {
        BucketInfo bucket;
        bucket.name = "bucket" + std::to_string(b);
        bucket.count = lengths[b];
        std::vector<float> data = Values(t.rank(), lengths[b], static_cast<int>(b));
        FRUGAL_RETURN_IF_ERROR(reducer->Reduce(bucket, data));
        results[static_cast<size_t>(t.rank())].push_back(std::move(data));
      }
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << GetParam() << " n=" << n << ": " << statuses[r].ToString();
    }
    for (size_t b = 0; b < lengths.size(); ++b) {
      std::vector<double> expected(lengths[b], 0.0);
      for (int r = 0; r < n; ++r) {
        const std::vector<float> v = Values(r, lengths[b], static_cast<int>(b));
        for (size_t i = 0; i < v.size(); ++i) expected[i] += v[i];
      }
      for (int r = 0; r < n; ++r) {
        const std::vector<float>& got = results[static_cast<size_t>(r)][b];
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], expected[i] / n, 1e-5)
              << GetParam() << " n=" << n << " bucket " << b << " rank " << r << " i=" << i;
        }
        EXPECT_EQ(got, results[0][b]) << "every rank holds the same bits";
      }
    }
  }
}

// The last rank makes the reducer and never reduces: the others return kTimeout within a few
// timeouts, naming it, and their next Reduce returns the same error at once.
TEST_P(GlooReducerTest, StoppedRankEndsTheOthersReduceNamingIt) {
  const int n = 3;
  const int stopped = n - 1;
  const milliseconds timeout(1000);
  std::promise<void> others_done;
  std::shared_future<void> gate = others_done.get_future().share();
  std::vector<Status> first(n), second(n);
  std::vector<milliseconds> elapsed(n);
  std::atomic<int> finished{0};
  auto statuses = RunRanks(n, [&](Transport& t) -> Status {
    DenseReducerOptions options;
    options.algorithm = GetParam();
    options.timeout = timeout;
    FRUGAL_ASSIGN_OR_RETURN(auto reducer, MakeDenseReducer(t, options));
    if (t.rank() == stopped) {
      if (gate.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
        return TimeoutError("the other ranks did not finish");
      }
      return Status::Ok();
    }
    BucketInfo bucket;
    bucket.name = "grad";
    bucket.count = 4096;
    bucket.step = 3;
    std::vector<float> data(bucket.count, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    const size_t r = static_cast<size_t>(t.rank());
    first[r] = reducer->Reduce(bucket, data);
    elapsed[r] = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    second[r] = reducer->Reduce(bucket, data);
    if (++finished == n - 1) others_done.set_value();
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].ok()) << statuses[r].ToString();
  // Every rank that took part fails by its timeout; at least one of them waited for the stopped
  // rank itself and names it (the others may have waited for a rank that waited for it).
  bool named = false;
  for (int r = 0; r < stopped; ++r) {
    EXPECT_EQ(first[r].code(), StatusCode::kTimeout) << "rank " << r << ": " << first[r].ToString();
    EXPECT_NE(first[r].message().find("of grad (step 3)"), std::string::npos) << first[r].message();
    named = named || first[r].message().find("no progress from rank " + std::to_string(stopped)) !=
                         std::string::npos;
    EXPECT_LT(elapsed[r], 3 * timeout) << "rank " << r;
    EXPECT_EQ(second[r].ToString(), first[r].ToString()) << "rank " << r;
  }
  EXPECT_TRUE(named) << first[0].message();
}

// Ranks on hosts whose names do not resolve ("inproc0", "inproc1"): every rank says so, Gloo is
// never asked to bind to them.
TEST_P(GlooReducerTest, HostNamesThatDoNotResolveAreRefused) {
  InProcOptions world_options;
  world_options.ranks_per_host = 1;
  auto statuses = RunRanks(
      2,
      [&](Transport& t) -> Status {
        DenseReducerOptions options;
        options.algorithm = GetParam();
        options.timeout = std::chrono::seconds(10);
        return MakeDenseReducer(t, options).status();
      },
      world_options);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kIoError) << statuses[r].ToString();
    EXPECT_NE(
        statuses[r].message().find("host name 'inproc" + std::to_string(r) + "' does not resolve"),
        std::string::npos)
        << statuses[r].message();
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, GlooReducerTest,
                         ::testing::Values("gloo", "gloo:halving_doubling"), [](const auto& info) {
                           return info.param == "gloo" ? std::string("ring_chunked")
                                                       : std::string("halving_doubling");
                         });

}  // namespace
}  // namespace frugal
