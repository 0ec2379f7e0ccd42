// Tier 2: the Gloo reducers ("gloo", "gloo:halving_doubling") under mpirun, over the MPI
// transport's ranks, against frugal's ring reducer on the same buckets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frugal/gloo.h"
#include "frugal/random.h"
#include "frugal/reducer.h"
#include "mpi_test_main.h"

namespace frugal {
namespace {

using mpitest::TestWorld;

using mpitest::kTimeout;

std::vector<float> Values(int rank, size_t count, size_t bucket) {
  RngStream rng(RngKey{.seed = 11, .rank = rank, .step = 0, .tensor = bucket});
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(rng.Normal());
  return v;
}

class GlooReducerMpi : public ::testing::TestWithParam<std::string> {};

TEST_P(GlooReducerMpi, EqualsTheRingReducer) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  DenseReducerOptions ring_options;
  ring_options.timeout = kTimeout;
  ring_options.allreduce.check_lengths = false;  // as in training: no bytes but the ring's
  auto ring = MakeDenseReducer(*t, ring_options);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  DenseReducerOptions gloo_options;
  gloo_options.algorithm = GetParam();
  gloo_options.timeout = kTimeout;
  auto gloo = MakeDenseReducer(*t, gloo_options);
  ASSERT_TRUE(gloo.ok()) << gloo.status().ToString();
  // 4 MB, 4 MB and a little (no multiple of the ranks), small, one element, a length again.
  const std::vector<size_t> lengths = {size_t{1} << 20, (size_t{1} << 20) + 3, 1000, 1,
                                       (size_t{1} << 20) + 3};
  for (size_t b = 0; b < lengths.size(); ++b) {
    BucketInfo bucket;
    bucket.name = "bucket" + std::to_string(b);
    bucket.count = lengths[b];
    std::vector<float> by_ring = Values(t->rank(), lengths[b], b);
    std::vector<float> by_gloo = by_ring;
    const uint64_t ring_before = (*ring)->bytes_sent(), gloo_before = (*gloo)->bytes_sent();
    ASSERT_TRUE((*ring)->Reduce(bucket, by_ring).ok());
    const Status status = (*gloo)->Reduce(bucket, by_gloo);
    ASSERT_TRUE(status.ok()) << status.ToString();
    // Gloo's bytes are the ring's modelled on equal blocks; frugal's ring spreads a remainder
    // otherwise, so only lengths the ranks divide give the same bytes on every rank.
    if (lengths[b] % static_cast<size_t>(t->size()) == 0) {
      EXPECT_EQ((*gloo)->bytes_sent() - gloo_before, (*ring)->bytes_sent() - ring_before)
          << "bucket " << b << " rank " << t->rank();
    }
    for (size_t i = 0; i < lengths[b]; ++i) {
      ASSERT_NEAR(by_gloo[i], by_ring[i], 1e-5) << GetParam() << " bucket " << b << " i=" << i;
    }
  }
  EXPECT_EQ((*gloo)->bytes_counted_by(), "model:ring");
}

INSTANTIATE_TEST_SUITE_P(Algorithms, GlooReducerMpi,
                         ::testing::Values("gloo", "gloo:halving_doubling"), [](const auto& info) {
                           return info.param == "gloo" ? std::string("ring_chunked")
                                                       : std::string("halving_doubling");
                         });

}  // namespace
}  // namespace frugal
