// Every aggregation path against a serial reference over world sizes 1..8 (ranks as threads over
// the in-process transport).
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <set>

#include "compress/reference.h"
#include "compress/test_util.h"
#include "frugal/inproc_transport.h"

namespace frugal {
namespace {

using testing_compress::EncodeOrDie;
using testing_compress::GatherReference;
using testing_compress::Gaussian;
using testing_compress::Grid;
using testing_compress::Inputs;
using testing_compress::kSeed;
using testing_compress::Make;
using testing_compress::TwoPhaseReference;

struct Distributed {
  Grid out;
  std::vector<Status> status;
  std::vector<AggregateStats> stats;  // of the last step, per rank
};

Distributed RunDistributed(const std::string& spec, const Grid& in, const TensorInfo& tensor,
                           AggregateOptions options) {
  const int steps = static_cast<int>(in.size());
  const int n = static_cast<int>(in[0].size());
  Distributed d;
  d.out = in;
  d.stats.resize(n);
  options.timeout = std::chrono::seconds(20);
  d.status = RunRanks(n, [&](Transport& t) -> Status {
    auto made = DefaultCompressorRegistry().Create(spec);
    FRUGAL_RETURN_IF_ERROR(made.status());
    const Compressor& c = **made;
    CompressContext ctx(kSeed, t.rank(), t.size());
    for (int s = 0; s < steps; ++s) {
      ctx.set_step(s);
      FRUGAL_RETURN_IF_ERROR(
          AggregateCompressed(t, c, d.out[s][t.rank()], tensor, ctx, options, &d.stats[t.rank()]));
    }
    return Status::Ok();
  });
  return d;
}

struct PathCase {
  const char* spec;
  AggregationPath path;
};

class AggregatePathTest : public ::testing::TestWithParam<std::tuple<PathCase, int, size_t>> {};

TEST_P(AggregatePathTest, MatchesSerialReference) {
  auto [pc, n, numel] = GetParam();
  TensorInfo tensor("layer.weight", numel);
  const int steps = 3;
  Grid in = Inputs(n, numel, steps);
  for (ReduceOp op : {ReduceOp::kAverage, ReduceOp::kSum}) {
    AggregateOptions options;
    options.path = pc.path;
    options.op = op;
    Distributed d = RunDistributed(pc.spec, in, tensor, options);
    for (int r = 0; r < n; ++r) ASSERT_TRUE(d.status[r].ok()) << d.status[r].ToString();
    auto c = Make(pc.spec);
    AggregationPath path = ResolveAggregationPath(*c, pc.path);
    EXPECT_EQ(d.stats[0].path, path);
    Grid ref;
    if (path == AggregationPath::kTwoPhase) {
      ref = TwoPhaseReference(pc.spec, in, tensor, op);
    } else if (path == AggregationPath::kAllgather || path == AggregationPath::kSignVote) {
      ref = GatherReference(pc.spec, in, tensor, op, path == AggregationPath::kSignVote);
    } else {
      FAIL() << "no reference for " << AggregationPathName(path);
    }
    for (int s = 0; s < steps; ++s) {
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(d.out[s][r], ref[s][r])
            << pc.spec << " n=" << n << " step " << s << " rank " << r;
      }
    }
    if (n > 1) {
      for (int r = 0; r < n; ++r) EXPECT_GT(d.stats[r].bytes_sent, 0u);
    }
    EXPECT_EQ(d.stats[0].dense_bytes, 4 * numel);
  }
}

const PathCase kPathCases[] = {
    {"qsgd:levels=3,bucket=64", AggregationPath::kAllgather},
    {"qsgd:levels=3,bucket=64", AggregationPath::kTwoPhase},
    {"fp16", AggregationPath::kAuto},
    {"fp16", AggregationPath::kAllgather},
    {"minmax8:chunk=50", AggregationPath::kTwoPhase},
    {"natural", AggregationPath::kAllgather},
    {"onebit:ef=1", AggregationPath::kTwoPhase},
    {"onebit:ef=1", AggregationPath::kAllgather},
    {"efsign", AggregationPath::kTwoPhase},
    {"terngrad:clip=0", AggregationPath::kAllgather},
    {"sign", AggregationPath::kAuto},
    {"signum", AggregationPath::kSignVote},
    {"sign", AggregationPath::kAllgather},
    {"polar:n=4,rate=0.4", AggregationPath::kTwoPhase},
    {"polar:n=4,rate=0.4", AggregationPath::kAllgather},
    {"topk:ratio=0.3|polar:n=4", AggregationPath::kAllgather},
};

INSTANTIATE_TEST_SUITE_P(Paths, AggregatePathTest,
                         ::testing::Combine(::testing::ValuesIn(kPathCases), ::testing::Range(1, 9),
                                            ::testing::Values(size_t{5}, size_t{333})),
                         [](const auto& info) {
                           std::string s =
                               std::string(std::get<0>(info.param).spec) + "_" +
                               std::string(AggregationPathName(std::get<0>(info.param).path)) +
                               "_n" + std::to_string(std::get<1>(info.param)) + "_" +
                               std::to_string(std::get<2>(info.param));
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// Two-phase on a shaped tensor: chunks are whole rows, so 1-bit SGD keeps its columns; also with
// fewer rows than ranks (empty chunks).
TEST(AggregateTwoPhase, ShapedTensorsAreSplitByRows) {
  for (int n = 1; n <= 8; ++n) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{13, 7}, {3, 40}}) {
      TensorInfo tensor("conv.weight", static_cast<size_t>(rows * cols), {rows, cols});
      Grid in = Inputs(n, tensor.numel, 2);
      AggregateOptions options;
      options.path = AggregationPath::kTwoPhase;
      Distributed d = RunDistributed("onebit:ef=1", in, tensor, options);
      for (int r = 0; r < n; ++r) ASSERT_TRUE(d.status[r].ok()) << d.status[r].ToString();
      Grid ref = TwoPhaseReference("onebit:ef=1", in, tensor, options.op);
      for (size_t s = 0; s < in.size(); ++s) {
        for (int r = 0; r < n; ++r) ASSERT_EQ(d.out[s][r], ref[s][r]) << n << " " << rows;
      }
    }
  }
}

// The all-reduce path of a summable payload against the exact sum and average.
TEST(AggregateAllreduce, NoneEqualsDenseAllreduce) {
  for (int n = 1; n <= 8; ++n) {
    for (size_t numel : {size_t{1}, size_t{7}, size_t{1000}}) {
      TensorInfo tensor("w", numel);
      Grid in = Inputs(n, numel, 2);
      for (AllreduceAlgorithm algorithm :
           {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling}) {
        AggregateOptions options;
        options.algorithm = algorithm;
        Distributed d = RunDistributed("none", in, tensor, options);
        for (int r = 0; r < n; ++r) ASSERT_TRUE(d.status[r].ok()) << d.status[r].ToString();
        EXPECT_EQ(d.stats[0].path, AggregationPath::kAllreduce);
        for (size_t s = 0; s < in.size(); ++s) {
          for (size_t i = 0; i < numel; ++i) {
            double sum = 0;
            for (int r = 0; r < n; ++r) sum += in[s][r][i];
            for (int r = 0; r < n; ++r) {
              ASSERT_NEAR(d.out[s][r][i], sum / n, 1e-5 * (1 + std::fabs(sum)));
              ASSERT_EQ(d.out[s][r][i], d.out[s][0][i]);  // identical on every rank
            }
          }
        }
      }
    }
  }
}

// Two-phase fp16 is close to the dense average.
TEST(AggregateTwoPhase, Fp16IsCloseToTheDenseAverage) {
  const int n = 5;
  TensorInfo tensor("w", 1001);
  Grid in = Inputs(n, tensor.numel, 1);
  AggregateOptions options;
  Distributed d = RunDistributed("fp16", in, tensor, options);
  for (int r = 0; r < n; ++r) ASSERT_TRUE(d.status[r].ok());
  for (size_t i = 0; i < tensor.numel; ++i) {
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += in[0][r][i];
    EXPECT_NEAR(d.out[0][0][i], sum / n, 2e-3 * (1 + std::fabs(sum)));
  }
}

// TernGrad's own aggregation: every rank uses s = the largest of the ranks' scales.
TEST(AggregateTernGrad, SharedScaleIsTheMaximum) {
  for (int n : {1, 2, 3, 6}) {
    TensorInfo tensor("w", 400);
    Grid in = Inputs(n, tensor.numel, 1);
    AggregateOptions options;
    options.op = ReduceOp::kSum;
    Distributed d = RunDistributed("terngrad", in, tensor, options);
    for (int r = 0; r < n; ++r) ASSERT_TRUE(d.status[r].ok()) << d.status[r].ToString();
    EXPECT_EQ(d.stats[0].path, AggregationPath::kCustom);
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
      double k = d.out[0][0][i] / s;
      ASSERT_NEAR(k, std::round(k), 1e-4) << i;
      ASSERT_LE(std::fabs(k), n + 1e-4);
      for (int r = 1; r < n; ++r) ASSERT_EQ(d.out[0][r][i], d.out[0][0][i]);
    }
  }
}

// With error feedback through a custom aggregation, the residual is kept per rank.
TEST(AggregateTernGrad, ErrorFeedbackKeepsTheResidual) {
  const int n = 3;
  TensorInfo tensor("w", 64);
  Grid in = Inputs(n, tensor.numel, 1);
  std::vector<std::vector<float>> residuals(n);
  std::vector<std::vector<float>> out = in[0];
  auto status = RunRanks(n, [&](Transport& t) -> Status {
    auto c = Make("terngrad:ef=1");
    CompressContext ctx(kSeed, t.rank(), n);
    AggregateOptions options;
    options.op = ReduceOp::kSum;
    FRUGAL_RETURN_IF_ERROR(AggregateCompressed(t, *c, out[t.rank()], tensor, ctx, options));
    residuals[t.rank()] = ctx.FindState<ResidualState>("w", kErrorFeedbackSlot)->residual;
    return Status::Ok();
  });
  for (const Status& s : status) ASSERT_TRUE(s.ok()) << s.ToString();
  // sum of (input - residual) over ranks = what was transmitted = the aggregate.
  for (size_t i = 0; i < tensor.numel; ++i) {
    double sent = 0;
    for (int r = 0; r < n; ++r) sent += in[0][r][i] - residuals[r][i];
    EXPECT_NEAR(out[0][i], sent, 1e-4);
  }
}

TEST(AggregateErrors, UnsuitedPathIsRejected) {
  TensorInfo tensor("w", 10);
  Grid in = Inputs(2, 10, 1);
  struct Bad {
    const char* spec;
    AggregationPath path;
  };
  for (Bad b : {Bad{"qsgd", AggregationPath::kAllreduce}, Bad{"sign", AggregationPath::kTwoPhase},
                Bad{"fp16", AggregationPath::kSignVote}, Bad{"none", AggregationPath::kCustom}}) {
    AggregateOptions options;
    options.path = b.path;
    Distributed d = RunDistributed(b.spec, in, tensor, options);
    for (const Status& s : d.status) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << b.spec << ": " << s.ToString();
    }
  }
}

TEST(AggregateErrors, DifferentLengthsFailOnEveryRank) {
  const int n = 4;
  std::vector<Status> status = RunRanks(n, [&](Transport& t) -> Status {
    auto c = Make("qsgd");
    size_t numel = t.rank() == 2 ? 11 : 10;
    TensorInfo tensor("w", numel);
    std::vector<float> data(numel, 1.0f);
    CompressContext ctx(1, t.rank(), n);
    AggregateOptions options;
    options.timeout = std::chrono::seconds(20);
    return AggregateCompressed(t, *c, data, tensor, ctx, options);
  });
  for (const Status& s : status) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

// A rank whose encoder fails (non-finite input) makes every rank fail promptly, on every path.
TEST(AggregateErrors, EncoderFailureOnOneRankFailsEveryRankWithoutHanging) {
  const int n = 4;
  for (PathCase pc :
       {PathCase{"qsgd", AggregationPath::kAllgather}, PathCase{"qsgd", AggregationPath::kTwoPhase},
        PathCase{"efsign", AggregationPath::kTwoPhase},
        PathCase{"terngrad", AggregationPath::kAuto},
        PathCase{"natural", AggregationPath::kAllgather}}) {
    auto start = std::chrono::steady_clock::now();
    std::vector<Status> status = RunRanks(n, [&](Transport& t) -> Status {
      auto c = Make(pc.spec);
      TensorInfo tensor("w", 100);
      std::vector<float> data = Gaussian(100, t.rank());
      if (t.rank() == 1) data[50] = NAN;
      CompressContext ctx(1, t.rank(), n);
      AggregateOptions options;
      options.path = pc.path;
      options.timeout = std::chrono::seconds(20);
      return AggregateCompressed(t, *c, data, tensor, ctx, options);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_FALSE(status[r].ok()) << pc.spec << " rank " << r;
      if (r != 1 && std::string(pc.spec) != "terngrad") {
        EXPECT_NE(status[r].message().find("rank 1"), std::string::npos) << status[r].ToString();
      }
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << pc.spec;
  }
}

}  // namespace
}  // namespace frugal
