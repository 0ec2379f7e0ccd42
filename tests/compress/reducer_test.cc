#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <mutex>
#include <string>

#include "compress/test_util.h"
#include "frugal/compressed_reducer.h"
#include "frugal/inproc_transport.h"

namespace frugal {
namespace {

using testing_compress::Gaussian;

// A bucket of a small tensor, a large one, a small one and another large one.
BucketInfo MixedBucket() {
  BucketInfo b;
  b.id = 0;
  b.name = "bucket0";
  size_t at = 0;
  for (auto [name, count] : std::vector<std::pair<std::string, size_t>>{
           {"bias1", 10}, {"w1", 5000}, {"bias2", 3}, {"w2", 20000}}) {
    b.entries.push_back(BucketEntry{name, at, count, {}});
    at += count;
  }
  b.count = at;
  return b;
}

struct Result {
  std::vector<std::vector<float>> out;
  std::vector<CompressedReducer::Stats> stats;
  std::vector<double> ratio;
  std::vector<Status> status;
  std::string name;
};

// Runs `steps` steps of a reducer on n ranks: input(step, rank) is reduced, then handed to
// output(step, rank, reduced).
Result RunReducerSteps(int n, const CompressedReducerOptions& options, int steps,
                       const std::function<std::vector<float>(int, int)>& input,
                       const std::function<void(int, int, std::vector<float>)>& output) {
  Result r;
  r.stats.resize(n);
  r.ratio.resize(n);
  std::mutex mu;
  r.status = RunRanks(n, [&](Transport& t) -> Status {
    CompressorRegistry registry = DefaultCompressorRegistry();
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<CompressedReducer> reducer,
                            MakeCompressedReducer(t, registry, options));
    BucketInfo bucket = MixedBucket();
    for (int s = 0; s < steps; ++s) {
      bucket.step = s;
      std::vector<float> data = input(s, t.rank());
      FRUGAL_RETURN_IF_ERROR(reducer->Reduce(bucket, data));
      output(s, t.rank(), std::move(data));
    }
    r.stats[t.rank()] = reducer->stats();
    r.ratio[t.rank()] = reducer->compression_ratio();
    std::lock_guard<std::mutex> lock(mu);
    r.name = reducer->name();
    return Status::Ok();
  });
  return r;
}

// The same input on every step; out holds the last step's result.
Result RunReducer(int n, const CompressedReducerOptions& options, int steps,
                  const std::vector<std::vector<float>>& in) {
  std::vector<std::vector<float>> out = in;
  Result r = RunReducerSteps(
      n, options, steps, [&](int, int rank) { return in[rank]; },
      [&](int, int rank, std::vector<float> data) { out[rank] = std::move(data); });
  r.out = std::move(out);
  return r;
}

std::vector<std::vector<float>> Inputs(int n) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < n; ++r) in.push_back(Gaussian(MixedBucket().count, 50 + r));
  return in;
}

TEST(CompressedReducer, NoneIsTheExactAverage) {
  for (int n = 1; n <= 5; ++n) {
    CompressedReducerOptions options;
    options.spec = "none";
    options.min_bytes = 1024;
    options.timeout = std::chrono::seconds(20);
    auto in = Inputs(n);
    Result r = RunReducer(n, options, 1, in);
    for (const Status& s : r.status) ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < in[0].size(); ++i) {
      double sum = 0;
      for (int k = 0; k < n; ++k) sum += in[k][i];
      for (int k = 0; k < n; ++k) ASSERT_NEAR(r.out[k][i], sum / n, 1e-5) << i;
    }
    EXPECT_EQ(r.stats[0].elements, in[0].size());
    EXPECT_EQ(r.stats[0].compressed_elements, 25000u);
    if (n > 1) {
      EXPECT_GT(r.stats[0].dense_bytes_sent, 0u);
      EXPECT_GT(r.stats[0].compressed_bytes_sent, 0u);
      EXPECT_EQ(r.stats[0].bytes_sent,
                r.stats[0].dense_bytes_sent + r.stats[0].compressed_bytes_sent);
      // none all-reduces float32 like the dense reducer: a ratio close to 1.
      EXPECT_NEAR(r.ratio[0], 1.0, 0.05) << n;
    }
  }
}

TEST(CompressedReducer, SmallTensorsStayDenseAndExact) {
  const int n = 3;
  CompressedReducerOptions options;
  options.spec = "qsgd:levels=3";
  options.min_bytes = 65536;  // w1 (20000 B) is small too; w2 (80000 B) is compressed
  options.timeout = std::chrono::seconds(20);
  auto in = Inputs(n);
  Result r = RunReducer(n, options, 1, in);
  for (const Status& s : r.status) ASSERT_TRUE(s.ok()) << s.ToString();
  BucketInfo b = MixedBucket();
  for (const BucketEntry& e : b.entries) {
    bool exact = e.name != "w2";
    double err = 0, norm = 0;
    for (size_t i = e.offset; i < e.offset + e.count; ++i) {
      double avg = (double{in[0][i]} + in[1][i] + in[2][i]) / 3;
      err += (r.out[0][i] - avg) * (r.out[0][i] - avg);
      norm += avg * avg;
      if (exact) {
        ASSERT_NEAR(r.out[0][i], avg, 1e-5) << e.name;
      }
      for (int k = 1; k < n; ++k) ASSERT_EQ(r.out[k][i], r.out[0][i]);
    }
    if (!exact) {
      EXPECT_GT(err, 1e-3 * norm) << "w2 went through QSGD";
    }
  }
  EXPECT_EQ(r.stats[0].compressed_elements, 20000u);
  EXPECT_GT(r.ratio[0], 2.0) << r.name;
}

TEST(CompressedReducer, ErrorFeedbackFlagWraps) {
  CompressedReducerOptions options;
  options.spec = "onebit";
  options.error_feedback = true;
  options.min_bytes = 0;
  options.timeout = std::chrono::seconds(20);
  auto in = Inputs(2);
  Result r = RunReducer(2, options, 3, in);
  for (const Status& s : r.status) ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(r.name.find("onebit:ef=1"), std::string::npos) << r.name;
  EXPECT_NE(r.name.find("twophase"), std::string::npos) << r.name;
  EXPECT_GT(r.ratio[0], 10.0);
}

// An entry with a shape is compressed with its matrix view: 1-bit SGD's means per column.
TEST(CompressedReducer, EntryShapeReachesTheCompressor) {
  BucketInfo bucket;
  bucket.name = "b";
  bucket.entries = {BucketEntry{"w", 0, 200, {4, 50}}, BucketEntry{"v", 200, 200, {}}};
  bucket.count = 400;
  std::vector<float> in = Gaussian(400, 9);
  std::vector<float> out = in;
  std::vector<Status> status = RunRanks(1, [&](Transport& t) -> Status {
    CompressedReducerOptions options;
    options.spec = "onebit";
    options.min_bytes = 0;
    options.path = AggregationPath::kAllgather;  // one encode and one decode on one rank
    FRUGAL_ASSIGN_OR_RETURN(auto reducer,
                            MakeCompressedReducer(t, DefaultCompressorRegistry(), options));
    return reducer->Reduce(bucket, out);
  });
  ASSERT_TRUE(status[0].ok()) << status[0].ToString();
  auto c = testing_compress::Make("onebit");
  CompressContext ctx;
  TensorInfo shaped("w", 200, {4, 50}), flat("v", 200);
  std::vector<float> w(in.begin(), in.begin() + 200), v(in.begin() + 200, in.end());
  std::vector<float> expected_w = testing_compress::RoundTrip(*c, w, shaped, ctx);
  std::vector<float> expected_v = testing_compress::RoundTrip(*c, v, flat, ctx);
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 200), expected_w);
  EXPECT_EQ(std::vector<float>(out.begin() + 200, out.end()), expected_v);
  EXPECT_NE(expected_w, testing_compress::RoundTrip(*c, w, TensorInfo("w", 200), ctx));
}

TEST(CompressedReducer, BadSpecOrPathIsRejected) {
  std::vector<Status> status = RunRanks(1, [](Transport& t) -> Status {
    CompressorRegistry registry = DefaultCompressorRegistry();
    CompressedReducerOptions options;
    options.spec = "qsgd:levels=0";
    EXPECT_EQ(MakeCompressedReducer(t, registry, options).status().code(),
              StatusCode::kInvalidArgument);
    options.spec = "nope";
    EXPECT_EQ(MakeCompressedReducer(t, registry, options).status().code(), StatusCode::kNotFound);
    options.spec = "qsgd";
    options.path = AggregationPath::kAllreduce;
    EXPECT_EQ(MakeCompressedReducer(t, registry, options).status().code(),
              StatusCode::kInvalidArgument);
    options.path = AggregationPath::kAuto;
    for (double mu : {-0.1, 1.0, std::nan("")}) {
      options.worker_momentum = mu;
      EXPECT_EQ(MakeCompressedReducer(t, registry, options).status().code(),
                StatusCode::kInvalidArgument)
          << mu;
    }
    return Status::Ok();
  });
  EXPECT_TRUE(status[0].ok()) << status[0].ToString();
}

// Worker-side momentum through a lossless compressor is momentum SGD's buffer of the averaged
// gradient (heavy ball: m = mu m + avg g; Nesterov: avg g + mu m), for the small (dense) entries
// and the compressed ones alike, with gradients that change from step to step.
TEST(CompressedReducer, WorkerMomentumOfALosslessCompressorIsTheMomentumOfTheAverage) {
  constexpr int kRanks = 3, kSteps = 5;
  constexpr double kMu = 0.9;
  const size_t count = MixedBucket().count;
  for (bool nesterov : {false, true}) {
    CompressedReducerOptions options;
    options.spec = "none";
    options.min_bytes = 1024;
    options.timeout = std::chrono::seconds(20);
    options.worker_momentum = kMu;
    options.worker_nesterov = nesterov;
    std::vector<std::vector<std::vector<float>>> out(kSteps,
                                                     std::vector<std::vector<float>>(kRanks));
    Result r = RunReducerSteps(
        kRanks, options, kSteps, [&](int s, int rank) { return Gaussian(count, 100 * s + rank); },
        [&](int s, int rank, std::vector<float> data) { out[s][rank] = std::move(data); });
    for (const Status& s : r.status) ASSERT_TRUE(s.ok()) << s.ToString();
    const std::string& name = r.name;
    EXPECT_NE(name.find("momentum 0.9"), std::string::npos) << name;
    std::vector<double> m(count, 0.0);
    for (int s = 0; s < kSteps; ++s) {
      std::vector<std::vector<float>> g;
      for (int r = 0; r < kRanks; ++r) g.push_back(Gaussian(count, 100 * s + r));
      for (size_t i = 0; i < count; ++i) {
        double avg = 0;
        for (int r = 0; r < kRanks; ++r) avg += g[r][i];
        avg /= kRanks;
        m[i] = kMu * m[i] + avg;
        const double expected = nesterov ? avg + kMu * m[i] : m[i];
        for (int r = 0; r < kRanks; ++r) {
          ASSERT_NEAR(out[s][r][i], expected, 1e-5 * (1 + std::abs(expected)))
              << "step " << s << " rank " << r << " element " << i << " nesterov " << nesterov;
        }
      }
    }
  }
}

}  // namespace
}  // namespace frugal
