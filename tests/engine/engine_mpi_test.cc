// Tier 2: the engine over the real MPI transport, one process per rank under mpirun. The engine
// thread is the only thread that calls MPI between Start and Shutdown.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "engine_test_util.h"
#include "frugal/engine.h"
#include "mpi/mpi_test_main.h"

namespace frugal::testing {
namespace {

using ::testing::HasSubstr;

constexpr Duration kMpiWait = std::chrono::seconds(60);

std::unique_ptr<GradientReducer> Reducer(Transport& t, const std::string& algorithm) {
  DenseReducerOptions options;
  options.algorithm = algorithm;
  options.timeout = std::chrono::seconds(60);
  return std::move(MakeDenseReducer(t, options)).value();
}

// 0 .. n-1 shuffled with `rng`: a rank's own order of submission.
std::vector<size_t> ShuffledOrder(size_t n, RngStream& rng) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  return order;
}

class EngineMpi : public ::testing::TestWithParam<std::tuple<OverlapMode, std::string>> {};

// Every rank submits 12 tensors in its own order with pauses; every average is exact.
TEST_P(EngineMpi, OutOfOrderSubmissionCompletesWithExactAverages) {
  const auto& [mode, algorithm] = GetParam();
  std::unique_ptr<Transport> t = mpitest::TestWorld();
  ASSERT_NE(t, nullptr);
  const int rank = t->rank();
  const int n = t->size();
  std::unique_ptr<GradientReducer> reducer = Reducer(*t, algorithm);
  EngineOptions options;
  ApplyOverlapMode(mode, options, FusionPolicy::kCycle);
  options.partition_bytes = 1024;
  options.timeout = std::chrono::seconds(60);
  auto engine = Engine::Start(*t, *reducer, options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const std::vector<size_t> sizes = {1, 5, 300, 64, 1000, 7, 2048, 33, 128, 9, 700, 16};
  for (int step = 0; step < 3; ++step) {
    RngStream rng(RngKey{.seed = 9, .rank = rank, .step = static_cast<uint64_t>(step)});
    const std::vector<size_t> order = ShuffledOrder(sizes.size(), rng);
    std::vector<std::vector<float>> data(sizes.size());
    std::vector<std::unique_ptr<Work>> works(sizes.size());
    for (size_t k : order) {
      data[k] = DyadicInput(rank, sizes[k], k * 10 + step);
      works[k] = (*engine)->Submit(Req(Indexed("g", k), static_cast<int>(k), step), data[k]);
      if (rng.Below(2) == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    for (auto& w : works) ASSERT_TRUE(w->Wait(kMpiWait).ok());
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<double> sum(sizes[k], 0.0);
      for (int r = 0; r < n; ++r) {
        const std::vector<float> in = DyadicInput(r, sizes[k], k * 10 + step);
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += in[i];
      }
      for (size_t i = 0; i < sum.size(); ++i) {
        // Both reducers scale the exact sum by 1/n in float.
        const float want = static_cast<float>(sum[i]) * (1.0f / static_cast<float>(n));
        ASSERT_EQ(data[k][i], want) << "tensor " << k << " element " << i;
      }
    }
  }
  EXPECT_TRUE((*engine)->Shutdown().ok());
}

INSTANTIATE_TEST_SUITE_P(
    Modes, EngineMpi,
    ::testing::Combine(::testing::Values(OverlapMode::kWfbp, OverlapMode::kFusion,
                                         OverlapMode::kPriority),
                       ::testing::Values(std::string("ring"), std::string("mpi"))),
    [](const auto& info) {
      return std::string(OverlapModeName(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
    });

// Inexact inputs, submitted in each rank's own order and fused as the engine finds them ready:
// each tensor still ends with the bits of a ring all-reduce of it alone (the engine lays fused
// buckets out block by block), so a run does not depend on the fusion.
// An overlap mode, and the priority partitions' size.
struct FusionCase {
  OverlapMode mode;
  size_t partition_bytes;
  const char* name;
};
class EngineMpiFusion : public ::testing::TestWithParam<FusionCase> {};

// UniformInput scaled element by element by powers of two from 2^-8 to 2^8: partial sums round,
// so their bits depend on the order of the additions (on 3 ranks, uniform values on one grid add
// up exactly in any order).
std::vector<float> SpreadInput(int rank, size_t length, uint64_t tensor) {
  std::vector<float> v = UniformInput(rank, length, tensor);
  RngStream rng(RngKey{.seed = 79, .rank = rank, .step = 0, .tensor = tensor});
  for (float& x : v) x = std::ldexp(x, static_cast<int>(rng.Below(17)) - 8);
  return v;
}

TEST_P(EngineMpiFusion, EveryTensorHasTheBitsOfItsOwnAllreduce) {
  const FusionCase c = GetParam();
  std::unique_ptr<Transport> t = mpitest::TestWorld();
  ASSERT_NE(t, nullptr);
  const int rank = t->rank();
  std::unique_ptr<GradientReducer> reducer = Reducer(*t, "ring");
  EngineOptions options;
  ApplyOverlapMode(c.mode, options, FusionPolicy::kCycle);
  options.partition_bytes = c.partition_bytes;
  options.timeout = std::chrono::seconds(60);
  auto engine = Engine::Start(*t, *reducer, options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const std::vector<size_t> sizes = {1, 5, 300, 64, 1000, 7, 2048, 33, 128, 9, 700, 16};
  constexpr int kSteps = 4;
  std::vector<std::vector<std::vector<float>>> results(kSteps);
  for (int step = 0; step < kSteps; ++step) {
    RngStream rng(RngKey{.seed = 11, .rank = rank, .step = static_cast<uint64_t>(step)});
    const std::vector<size_t> order = ShuffledOrder(sizes.size(), rng);
    auto& data = results[static_cast<size_t>(step)];
    data.resize(sizes.size());
    std::vector<std::unique_ptr<Work>> works(sizes.size());
    for (size_t k : order) {
      data[k] = SpreadInput(rank, sizes[k], k * 10 + static_cast<size_t>(step));
      works[k] = (*engine)->Submit(Req(Indexed("g", k), static_cast<int>(k), step), data[k]);
    }
    for (auto& w : works) ASSERT_TRUE(w->Wait(kMpiWait).ok());
  }
  const EngineStats stats = (*engine)->stats();
  ASSERT_TRUE((*engine)->Shutdown().ok());
  // Not vacuous: some buckets held several tensors; with partitions of 1 KiB (a bucket of
  // priority holds at most one partition's bytes) the 17 KB of a step took more reductions than
  // there are tensors, so tensors were cut.
  if (c.partition_bytes >= (64 << 10)) {
    EXPECT_LT(stats.reductions, stats.tensors);
  } else {
    EXPECT_GT(stats.reductions, stats.tensors);
  }
  AllreduceOptions alone;
  alone.op = ReduceOp::kAverage;
  alone.timeout = kMpiWait;
  for (int step = 0; step < kSteps; ++step) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<float> want = SpreadInput(rank, sizes[k], k * 10 + static_cast<size_t>(step));
      ASSERT_TRUE(Allreduce(*t, want, alone).ok());
      EXPECT_EQ(std::memcmp(want.data(), results[static_cast<size_t>(step)][k].data(),
                            want.size() * sizeof(float)),
                0)
          << "step " << step << " tensor " << k;
    }
  }
}

// 64 KiB partitions cut no tensor; 1 KiB ones cut the tensors of 300 floats and more, and the
// reference still reduces whole tensors.
INSTANTIATE_TEST_SUITE_P(Modes, EngineMpiFusion,
                         ::testing::Values(FusionCase{OverlapMode::kFusion, 64 << 10, "fusion"},
                                           FusionCase{OverlapMode::kPriority, 64 << 10, "priority"},
                                           FusionCase{OverlapMode::kPriority, 1 << 10,
                                                      "priority_partitioned"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(EngineMpiErrors, ShapeMismatchFailsOnEveryRank) {
  std::unique_ptr<Transport> t = mpitest::TestWorld();
  ASSERT_NE(t, nullptr);
  std::unique_ptr<GradientReducer> reducer = Reducer(*t, "ring");
  auto engine = Engine::Start(*t, *reducer, EngineOptions{});
  ASSERT_TRUE(engine.ok());
  std::vector<float> w(12, 1.0f);
  TensorRequest request = Req("fc.weight");
  request.shape =
      t->rank() == t->size() - 1 ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{4, 3};
  const Status status = (*engine)->Submit(request, w)->Wait(kMpiWait);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("'fc.weight'"));
  EXPECT_THAT(status.message(), HasSubstr("[3, 4]"));
  EXPECT_TRUE((*engine)->Shutdown().ok());
}

// The last rank's reducer throws: its engine fails with the cause and tells the others, whose
// reduction with it times out; every rank then fails with the same code, naming the rank and the
// cause. (Runs in a job of its own: see CMakeLists.txt.)
TEST(EngineMpiFailure, AnExceptionOnOneRankFailsEveryRankWithTheCause) {
  class ThrowingReducer final : public GradientReducer {
   public:
    explicit ThrowingReducer(std::unique_ptr<GradientReducer> inner) : inner_(std::move(inner)) {}
    Status Reduce(const BucketInfo& bucket, std::span<float> data) override {
      if (throws) throw std::runtime_error("reducer out of order");
      return inner_->Reduce(bucket, data);
    }
    std::string name() const override { return inner_->name(); }
    uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
    std::string bytes_counted_by() const override { return inner_->bytes_counted_by(); }
    bool throws = false;

   private:
    std::unique_ptr<GradientReducer> inner_;
  };
  std::unique_ptr<Transport> t = mpitest::TestWorld();
  ASSERT_NE(t, nullptr);
  const int last = t->size() - 1;
  DenseReducerOptions reducer_options;
  reducer_options.timeout = std::chrono::seconds(2);
  ThrowingReducer reducer(std::move(MakeDenseReducer(*t, reducer_options)).value());
  reducer.throws = t->rank() == last;
  auto engine = Engine::Start(*t, reducer, EngineOptions{});
  ASSERT_TRUE(engine.ok());
  std::vector<float> g(64, 1.0f);
  const Status status = (*engine)->Submit(Req("g"), g)->Wait(kMpiWait);
  EXPECT_EQ(status.code(), StatusCode::kInternal) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("reducer out of order"));
  if (t->rank() != last) {
    EXPECT_THAT(status.message(), HasSubstr("rank " + std::to_string(last) + " failed"));
  }
  EXPECT_EQ((*engine)->Shutdown().ToString(), status.ToString());
}

}  // namespace
}  // namespace frugal::testing
