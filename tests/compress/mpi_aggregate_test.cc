// Tier 2: the aggregation paths of the quantizers over the MPI transport across real processes,
// against the serial references of reference.h. Every rank computes every rank's input. The
// world is also split into (n - 1) + 1, so an odd group and a single rank run in the same job.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compress/reference.h"
#include "frugal/compressed_reducer.h"
#include "mpi/mpi_test_main.h"

namespace frugal {
namespace {

using mpitest::TestWorld;
using testing_compress::GatherReference;
using testing_compress::Grid;
using testing_compress::Inputs;
using testing_compress::kSeed;
using testing_compress::TwoPhaseReference;

constexpr Duration kTimeout = std::chrono::seconds(60);

template <typename Body>
void OnWorldAndSplit(Transport& world, Body body) {
  body(world);
  const int k = world.size() - 1;
  if (k < 1) return;
  auto group = world.Split(world.rank() < k ? 0 : 1, world.rank(), kTimeout);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  body(**group);
}

struct Case {
  const char* spec;
  AggregationPath path;
};

TEST(MpiAggregateTest, EveryPathMatchesItsSerialReference) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  OnWorldAndSplit(*world, [&](Transport& t) {
    const int n = t.size();
    for (Case c :
         {Case{"qsgd:levels=7,bucket=128", AggregationPath::kAllgather},
          Case{"qsgd:levels=7,bucket=128", AggregationPath::kTwoPhase},
          Case{"efsign", AggregationPath::kTwoPhase}, Case{"polar:n=6", AggregationPath::kTwoPhase},
          Case{"minmax8:chunk=100", AggregationPath::kTwoPhase},
          Case{"onebit:ef=1", AggregationPath::kAllgather},
          Case{"natural", AggregationPath::kAllgather}, Case{"sign", AggregationPath::kSignVote},
          Case{"fp16", AggregationPath::kAuto}}) {
      TensorInfo tensor("layer", 3001);
      Grid in = Inputs(n, tensor.numel, 2);
      auto made = DefaultCompressorRegistry().Create(c.spec);
      ASSERT_TRUE(made.ok());
      const Compressor& compressor = **made;
      CompressContext ctx(kSeed, t.rank(), n);
      AggregateOptions options;
      options.path = c.path;
      options.timeout = kTimeout;
      AggregationPath path = ResolveAggregationPath(compressor, c.path);
      Grid ref =
          path == AggregationPath::kTwoPhase
              ? TwoPhaseReference(c.spec, in, tensor, options.op)
              : GatherReference(c.spec, in, tensor, options.op, path == AggregationPath::kSignVote);
      for (size_t s = 0; s < in.size(); ++s) {
        ctx.set_step(s);
        std::vector<float> data = in[s][t.rank()];
        Status status = AggregateCompressed(t, compressor, data, tensor, ctx, options);
        ASSERT_TRUE(status.ok()) << c.spec << ": " << status.ToString();
        ASSERT_EQ(data, ref[s][t.rank()]) << c.spec << " on " << n << " ranks, step " << s;
      }
    }
  });
}

TEST(MpiAggregateTest, NoneAllreduceAndTernGradScaleSharing) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  OnWorldAndSplit(*world, [&](Transport& t) {
    const int n = t.size();
    TensorInfo tensor("w", 999);
    Grid in = Inputs(n, tensor.numel, 1);
    AggregateOptions options;
    options.timeout = kTimeout;
    options.op = ReduceOp::kSum;
    auto none = DefaultCompressorRegistry().Create("none");
    CompressContext ctx(kSeed, t.rank(), n);
    std::vector<float> data = in[0][t.rank()];
    ASSERT_TRUE(AggregateCompressed(t, **none, data, tensor, ctx, options).ok());
    for (size_t i = 0; i < tensor.numel; ++i) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += in[0][r][i];
      ASSERT_NEAR(data[i], sum, 1e-4 * (1 + std::fabs(sum)));
    }
    auto terngrad = DefaultCompressorRegistry().Create("terngrad");
    data = in[0][t.rank()];
    ASSERT_TRUE(AggregateCompressed(t, **terngrad, data, tensor, ctx, options).ok());
    float s = 0;
    for (int r = 0; r < n; ++r) {
      double ss = 0;
      float m = 0;
      for (float v : in[0][r]) {
        ss += double{v} * v;
        m = std::max(m, std::fabs(v));
      }
      s = std::max(s, std::min(static_cast<float>(2.5 * std::sqrt(ss / tensor.numel)), m));
    }
    for (size_t i = 0; i < tensor.numel; ++i) {
      double k = data[i] / s;
      ASSERT_NEAR(k, std::round(k), 1e-4) << i;
    }
  });
}

// The compressed reducer over MPI: the same average on every rank, close to the dense one.
TEST(MpiAggregateTest, CompressedReducerAveragesEveryBucket) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  const int n = world->size();
  CompressedReducerOptions options;
  options.spec = "fp16";
  options.min_bytes = 4096;
  options.timeout = kTimeout;
  auto reducer = MakeCompressedReducer(*world, DefaultCompressorRegistry(), options);
  ASSERT_TRUE(reducer.ok()) << reducer.status().ToString();
  BucketInfo bucket;
  bucket.name = "bucket0";
  bucket.entries = {BucketEntry{"bias", 0, 100, {}}, BucketEntry{"weight", 100, 5000, {}}};
  bucket.count = 5100;
  Grid in = Inputs(n, bucket.count, 1);
  std::vector<float> data = in[0][world->rank()];
  ASSERT_TRUE((*reducer)->Reduce(bucket, data).ok());
  for (size_t i = 0; i < bucket.count; ++i) {
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += in[0][r][i];
    ASSERT_NEAR(data[i], sum / n, (i < 100 ? 1e-5 : 2e-3) * (1 + std::fabs(sum)));
  }
  if (n > 1) {
    EXPECT_GT((*reducer)->compression_ratio(), 1.5);
  }
}

}  // namespace
}  // namespace frugal
