// Tier-1 tests of the communication engine: ranks are threads over the in-process transport.
#include "frugal/engine.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>

#include "engine/merge_plan.h"
#include "engine_test_util.h"
#include "frugal/collectives.h"
#include "frugal/timer.h"

namespace frugal::testing {
namespace {

using ::testing::HasSubstr;

struct Mode {
  std::string name;
  OverlapMode overlap;
  FusionPolicy fusion;
  size_t partition_bytes;
};

std::vector<Mode> AllModes() {
  return {{"wfbp", OverlapMode::kWfbp, FusionPolicy::kOff, 0},
          {"fusion_cycle", OverlapMode::kFusion, FusionPolicy::kCycle, 0},
          {"fusion_mgwfbp", OverlapMode::kFusion, FusionPolicy::kMgWfbp, 0},
          {"priority", OverlapMode::kPriority, FusionPolicy::kOff, 256}};
}

EngineOptions OptionsFor(const Mode& mode) {
  EngineOptions options;
  ApplyOverlapMode(mode.overlap, options, mode.fusion);
  options.partition_bytes = mode.partition_bytes;
  options.fusion_threshold_bytes = 1024;
  options.timeout = std::chrono::seconds(20);
  options.mgwfbp_warmup_steps = 0;
  options.mgwfbp_profile_steps = 1;
  options.reduction_cost = CostParams{1.0, 0, 0};  // merge whatever arrives within a second
  return options;
}

// Sizes of the tensors of the tests (elements): small, odd and some larger than a partition.
const std::vector<size_t> kSizes = {1, 7, 64, 100, 3, 250, 17, 128};

// Each rank submits every tensor of kSizes, `steps` times, in a rank-dependent order with short
// pauses, and checks that every result equals the exact average.
Status SubmitAndCheck(Engine& engine, int rank, int n, int steps) {
  for (int step = 0; step < steps; ++step) {
    std::vector<size_t> order(kSizes.size());
    std::iota(order.begin(), order.end(), 0);
    RngStream rng(RngKey{.seed = 5, .rank = rank, .step = static_cast<uint64_t>(step)});
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
    std::vector<std::vector<float>> data(kSizes.size());
    std::vector<std::unique_ptr<Work>> works(kSizes.size());
    for (size_t k : order) {
      data[k] = DyadicInput(rank, kSizes[k], k * 100 + step);
      TensorRequest request;
      request.name = Indexed("t", k);
      request.priority = static_cast<int>(k);
      request.step = static_cast<uint64_t>(step);
      works[k] = engine.Submit(request, data[k]);
      if (rng.Below(3) == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    // Every Work is waited for before anything can return: the engine writes into `data`.
    Status first_error;
    for (auto& w : works) {
      Status s = w->Wait(kWait);
      if (first_error.ok() && !s.ok()) first_error = s;
    }
    FRUGAL_RETURN_IF_ERROR(first_error);
    for (size_t k = 0; k < kSizes.size(); ++k) {
      std::vector<double> want(kSizes[k], 0.0);
      for (int r = 0; r < n; ++r) {
        const std::vector<float> in = DyadicInput(r, kSizes[k], k * 100 + step);
        for (size_t i = 0; i < want.size(); ++i) want[i] += in[i];
      }
      for (size_t i = 0; i < want.size(); ++i) {
        // The sum is exact; the ring scales it by 1/n in float.
        const float expected = static_cast<float>(want[i]) * (1.0f / static_cast<float>(n));
        if (data[k][i] != expected) {
          return InternalError(fmt::format("rank {} tensor t{}[{}] = {}, expected {}", rank, k, i,
                                           data[k][i], expected));
        }
      }
    }
  }
  return Status::Ok();
}

// Eager sends, or (rendezvous) every send of 64 bytes or more completing only when its receive
// takes it, as MPI's rendezvous protocol does: a deadlock that needs it shows here.
class EngineModes : public ::testing::TestWithParam<std::tuple<Mode, int, bool>> {};

TEST_P(EngineModes, OutOfOrderSubmissionCompletesWithExactAverages) {
  // Not a structured binding: the lambda below captures them.
  const Mode mode = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  InProcOptions transport;
  if (std::get<2>(GetParam())) transport.rendezvous_bytes = 64;
  ExpectAllOk(RunRanks(
      n,
      [&](Transport& t) -> Status {
        std::unique_ptr<GradientReducer> reducer = RingReducer(t);
        FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                                Engine::Start(t, *reducer, OptionsFor(mode)));
        FRUGAL_RETURN_IF_ERROR(SubmitAndCheck(*engine, t.rank(), n, 4));
        return engine->Shutdown();
      },
      transport));
}

INSTANTIATE_TEST_SUITE_P(Engine, EngineModes,
                         ::testing::Combine(::testing::ValuesIn(AllModes()),
                                            ::testing::Values(1, 2, 3, 5), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_n" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_rendezvous" : "_eager");
                         });

// Arbitrary floats on two ranks (where a + b is exact in any order of the layout): every mode
// gives the same bits as reducing each tensor on its own without the engine.
TEST(Engine, ResultsEqualTheNonOverlappedPathBitForBit) {
  const int n = 2;
  for (const Mode& mode : AllModes()) {
    std::vector<std::vector<std::vector<float>>> engine_out(n), direct_out(n);
    ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
      std::unique_ptr<GradientReducer> reducer = RingReducer(t);
      const int rank = t.rank();
      for (size_t k = 0; k < kSizes.size(); ++k) {
        std::vector<float> v = UniformInput(rank, kSizes[k], k);
        BucketInfo bucket;
        bucket.name = Indexed("t", k);
        bucket.count = v.size();
        bucket.entries = {{bucket.name, 0, v.size(), {}}};
        FRUGAL_RETURN_IF_ERROR(reducer->Reduce(bucket, v));
        direct_out[rank].push_back(std::move(v));
      }
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                              Engine::Start(t, *reducer, OptionsFor(mode)));
      std::vector<std::vector<float>> data;
      for (size_t k = 0; k < kSizes.size(); ++k) data.push_back(UniformInput(rank, kSizes[k], k));
      std::vector<std::unique_ptr<Work>> works;
      for (size_t k = kSizes.size(); k-- > 0;) {
        works.push_back(engine->Submit(Req(Indexed("t", k), int(k)), data[k]));
      }
      for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
      engine_out[rank] = data;
      return engine->Shutdown();
    }));
    for (int r = 0; r < n; ++r) {
      for (size_t k = 0; k < kSizes.size(); ++k) {
        ASSERT_EQ(engine_out[r][k].size(), direct_out[r][k].size());
        EXPECT_EQ(0, std::memcmp(engine_out[r][k].data(), direct_out[r][k].data(),
                                 kSizes[k] * sizeof(float)))
            << mode.name << " rank " << r << " tensor " << k;
      }
    }
  }
}

// Three ranks, arbitrary floats, no fusion: each tensor is one reduction, the same as without
// the engine, so the bits agree for any world size.
TEST(Engine, UnfusedResultsEqualDirectReductionOnThreeRanks) {
  const int n = 3;
  std::vector<std::vector<std::vector<float>>> engine_out(n), direct_out(n);
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    const int rank = t.rank();
    for (size_t k = 0; k < kSizes.size(); ++k) {
      std::vector<float> v = UniformInput(rank, kSizes[k], k);
      BucketInfo bucket;
      bucket.name = Indexed("t", k);
      bucket.count = v.size();
      bucket.entries = {{bucket.name, 0, v.size(), {}}};
      FRUGAL_RETURN_IF_ERROR(reducer->Reduce(bucket, v));
      direct_out[rank].push_back(std::move(v));
    }
    EngineOptions options;
    ApplyOverlapMode(OverlapMode::kWfbp, options);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<std::vector<float>> data;
    for (size_t k = 0; k < kSizes.size(); ++k) data.push_back(UniformInput(rank, kSizes[k], k));
    std::vector<std::unique_ptr<Work>> works;
    for (size_t k = 0; k < kSizes.size(); ++k) {
      const size_t j = (k + static_cast<size_t>(rank) * 3) % kSizes.size();
      works.push_back(engine->Submit(Req(Indexed("t", j)), data[j]));
    }
    for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    engine_out[rank] = data;
    return engine->Shutdown();
  }));
  for (int r = 0; r < n; ++r) {
    for (size_t k = 0; k < kSizes.size(); ++k) {
      EXPECT_EQ(0, std::memcmp(engine_out[r][k].data(), direct_out[r][k].data(),
                               kSizes[k] * sizeof(float)))
          << "rank " << r << " tensor " << k;
    }
  }
}

TEST(Engine, ShapeMismatchFailsOnEveryRankNamingTensorRanksAndShapes) {
  const int n = 3;
  std::vector<std::string> messages(n);
  const Stopwatch watch;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.timeout = std::chrono::seconds(20);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> w(12, 1.0f);
    std::vector<float> b(4, 1.0f);
    TensorRequest request = Req("layer.weight");
    request.shape = {4, 3};
    if (t.rank() == 1) request.shape = {3, 4};
    std::unique_ptr<Work> bias = engine->Submit(Req("layer.bias"), b);
    std::unique_ptr<Work> weight = engine->Submit(request, w);
    FRUGAL_RETURN_IF_ERROR(bias->Wait(kWait));
    Status status = weight->Wait(kWait);
    messages[t.rank()] = status.ToString();
    (void)engine->Shutdown();
    return status;
  });
  EXPECT_LT(watch.Seconds(), 10.0);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kInvalidArgument) << statuses[r].ToString();
    EXPECT_THAT(messages[r], HasSubstr("'layer.weight'"));
    EXPECT_THAT(messages[r], HasSubstr("[4, 3] float32, priority 0 on ranks 0, 2"));
    EXPECT_THAT(messages[r], HasSubstr("[3, 4] float32, priority 0 on rank 1"));
    EXPECT_EQ(messages[r], messages[0]);
  }
}

TEST(Engine, DtypeMismatchFailsOnEveryRank) {
  const int n = 2;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, {}));
    std::vector<float> w(5, 1.0f);
    TensorRequest request = Req("w");
    request.dtype = t.rank() == 0 ? "float32" : "float16";
    Status status = engine->Submit(request, w)->Wait(kWait);
    (void)engine->Shutdown();
    return status;
  });
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("float16"));
    EXPECT_THAT(s.message(), HasSubstr("float32"));
  }
}

// Rank 2 names a tensor differently: once every rank waits, every rank fails, naming both names
// and the ranks that submitted each.
TEST(Engine, DifferentNamesFailOnEveryRankInsteadOfHanging) {
  const int n = 3;
  const Stopwatch watch;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.timeout = std::chrono::seconds(20);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> a(8, 1.0f);
    std::vector<float> b(8, 1.0f);
    std::unique_ptr<Work> wa = engine->Submit(Req("a"), a);
    std::unique_ptr<Work> wb = engine->Submit(Req(t.rank() == 2 ? "b_renamed" : "b"), b);
    FRUGAL_RETURN_IF_ERROR(wa->Wait(kWait));
    Status status = wb->Wait(kWait);
    (void)engine->Shutdown();
    return status;
  });
  EXPECT_LT(watch.Seconds(), 10.0);
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("'b' submitted by ranks 0, 1 but not by rank 2"));
    EXPECT_THAT(s.message(), HasSubstr("'b_renamed' submitted by rank 2 but not by ranks 0, 1"));
  }
}

TEST(Engine, StallInspectorNamesTheMissingRankAndTensor) {
  const int n = 3;
  std::mutex mutex;
  std::vector<std::pair<int, StallReport>> reports;
  Gate reported;
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.stall_warning = std::chrono::milliseconds(200);
    const int rank = t.rank();
    options.on_stall = [&, rank](const StallReport& report) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        reports.emplace_back(rank, report);
      }
      reported.Open();
    };
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> a(16, 1.0f);
    // Rank 1 submits once the stall has been reported.
    if (rank == 1 && !reported.Wait(kWait)) return TimeoutError("no stall report");
    FRUGAL_RETURN_IF_ERROR(engine->Submit(Req("grad.a"), a)->Wait(kWait));
    return engine->Shutdown();
  }));
  ASSERT_FALSE(reports.empty());
  for (const auto& [rank, report] : reports) {
    EXPECT_EQ(rank, 0) << "only the lowest submitting rank reports";
    EXPECT_EQ(report.tensor, "grad.a");
    EXPECT_EQ(report.missing, std::vector<int>{1});
    EXPECT_EQ(report.submitted, (std::vector<int>{0, 2}));
    EXPECT_FALSE(report.shutdown);
    EXPECT_THAT(report.ToString(),
                HasSubstr("tensor 'grad.a' submitted by ranks 0, 2 but not by rank 1"));
  }
}

TEST(Engine, StallShutdownFailsThePendingTensorsNamingTheRank) {
  const int n = 3;
  const Stopwatch watch;
  std::vector<double> seconds(n, 0);
  std::atomic<int> failed{0};
  Gate both_failed;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.stall_warning = std::chrono::milliseconds(100);
    options.stall_shutdown = std::chrono::milliseconds(500);
    options.on_stall = [](const StallReport&) {};
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> a(16, 1.0f);
    if (t.rank() == 1) {  // never submits
      if (!both_failed.Wait(kWait)) return TimeoutError("ranks 0 and 2 did not fail");
      return engine->Shutdown();
    }
    Status status = engine->Submit(Req("grad.a"), a)->Wait(kWait);
    seconds[t.rank()] = watch.Seconds();
    if (++failed == 2) both_failed.Open();
    (void)engine->Shutdown();
    return status;
  });
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].ToString();
  for (int r : {0, 2}) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kTimeout) << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("'grad.a'"));
    EXPECT_THAT(statuses[r].message(), HasSubstr("not by rank 1"));
    EXPECT_LT(seconds[r], 3.0);
  }
}

// With the default stall warning (half the timeout) the stall inspector names the silent rank
// first; then the negotiation times out naming it.
TEST(Engine, ASilentRankIsReportedAndThenTimesOutNamingIt) {
  const int n = 2;
  Gate timed_out;
  std::vector<StallReport> reports;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.timeout = std::chrono::milliseconds(600);
    options.on_stall = [&](const StallReport& report) { reports.push_back(report); };
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    if (t.rank() == 1) {  // silent until rank 0 has timed out
      if (!timed_out.Wait(kWait)) return TimeoutError("rank 0 did not time out");
      return engine->Shutdown();
    }
    std::vector<float> a(4, 1.0f);
    Status status = engine->Submit(Req("x"), a)->Wait(kWait);
    timed_out.Open();
    (void)engine->Shutdown();
    return status;
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimeout) << statuses[0].ToString();
  EXPECT_THAT(statuses[0].message(), HasSubstr("no answer from rank 1"));
  EXPECT_THAT(statuses[0].message(), HasSubstr("'x'"));
  ASSERT_EQ(reports.size(), 1u);  // from rank 0, the only rank that submitted
  EXPECT_EQ(reports[0].tensor, "x");
  EXPECT_EQ(reports[0].missing, std::vector<int>{1});
}

// Holds every rank's engine in a Call until all tensors are submitted, so they are agreed in one
// cycle; then the reduction order must follow the priorities, partition by partition.
TEST(Engine, PriorityOrderIsRespected) {
  const int n = 3;
  std::vector<std::vector<std::vector<std::string>>> order(n);
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    RecordingReducer reducer(RingReducer(t));
    EngineOptions options;
    ApplyOverlapMode(OverlapMode::kPriority, options);
    options.partition_bytes = 64 * sizeof(float);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, options));
    Gate gate;
    std::unique_ptr<Work> hold = engine->Call(
        "hold", [&](Transport&) { return gate.Wait(kWait) ? Status::Ok() : TimeoutError("gate"); });
    std::vector<std::vector<float>> data;
    for (int k = 0; k < 4; ++k) data.emplace_back(128, 1.0f);
    std::vector<std::unique_ptr<Work>> works;
    for (int k = 3; k >= 0; --k) {  // submitted in reverse priority (as backward would)
      works.push_back(engine->Submit(Req(Indexed("layer", k), k), data[k]));
    }
    gate.Open();
    FRUGAL_RETURN_IF_ERROR(hold->Wait(kWait));
    for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    order[t.rank()] = reducer.buckets();
    return engine->Shutdown();
  }));
  const std::vector<std::vector<std::string>> want = {
      {"layer0#0/2"}, {"layer0#1/2"}, {"layer1#0/2"}, {"layer1#1/2"},
      {"layer2#0/2"}, {"layer2#1/2"}, {"layer3#0/2"}, {"layer3#1/2"}};
  for (int r = 0; r < n; ++r) EXPECT_EQ(order[r], want) << "rank " << r;
}

// A tensor of a layer nearer the input that becomes ready while the partitions of a later layer
// are being reduced goes before the remaining partitions (priority), but after them in FIFO.
TEST(Engine, AHigherPriorityTensorOvertakesQueuedPartitions) {
  const int n = 2;
  for (bool priority : {true, false}) {
    std::vector<std::vector<std::vector<std::string>>> order(n);
    ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
      RecordingReducer reducer(RingReducer(t));
      EngineOptions options;
      ApplyOverlapMode(priority ? OverlapMode::kPriority : OverlapMode::kWfbp, options);
      options.partition_bytes = 32 * sizeof(float);
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, options));
      Gate in_first;
      Gate release;
      reducer.before_first = [&] {
        in_first.Open();
        release.Wait(kWait);
      };
      std::vector<float> late(128, 1.0f);
      std::vector<float> early(8, 1.0f);
      std::unique_ptr<Work> wl = engine->Submit(Req("late", 9), late);
      if (!in_first.Wait(kWait)) return TimeoutError("first reduction did not start");
      // Submitted while the engine is held inside the first reduction, so it is negotiated
      // after it, while the other partitions of "late" are queued.
      std::unique_ptr<Work> we = engine->Submit(Req("early", 0), early);
      release.Open();
      FRUGAL_RETURN_IF_ERROR(wl->Wait(kWait));
      FRUGAL_RETURN_IF_ERROR(we->Wait(kWait));
      order[t.rank()] = reducer.buckets();
      return engine->Shutdown();
    }));
    const std::vector<std::vector<std::string>> want =
        priority ? std::vector<std::vector<std::string>>{{"late#0/4"},
                                                         {"early"},
                                                         {"late#1/4"},
                                                         {"late#2/4"},
                                                         {"late#3/4"}}
                 : std::vector<std::vector<std::string>>{{"late"}, {"early"}};
    for (int r = 0; r < n; ++r) EXPECT_EQ(order[r], want) << "priority " << priority;
  }
}

TEST(Engine, CycleFusionPacksReadyTensorsUpToTheThreshold) {
  const int n = 2;
  std::vector<std::vector<size_t>> counts(n);
  std::vector<std::vector<bool>> shared(n);
  std::vector<std::vector<std::vector<float>>> results(n);
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    RecordingReducer reducer(RingReducer(t));
    EngineOptions options;
    ApplyOverlapMode(OverlapMode::kFusion, options, FusionPolicy::kCycle);
    options.fusion_threshold_bytes = 100 * sizeof(float);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, options));
    Gate gate;
    std::unique_ptr<Work> hold = engine->Call(
        "hold", [&](Transport&) { return gate.Wait(kWait) ? Status::Ok() : TimeoutError("gate"); });
    std::vector<std::vector<float>> data;
    for (size_t size : {30, 30, 30, 30, 150, 10}) {
      data.push_back(DyadicInput(t.rank(), size, data.size()));
    }
    std::vector<std::unique_ptr<Work>> works;
    for (size_t k = 0; k < data.size(); ++k) {
      works.push_back(engine->Submit(Req(Indexed("t", k)), data[k]));
    }
    gate.Open();
    for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    counts[t.rank()] = reducer.counts();
    shared[t.rank()] = reducer.shared();
    results[t.rank()] = data;
    return engine->Shutdown();
  }));
  // Ids follow first submission: t0..t5; FIFO packing up to 100 elements. The fused bucket is
  // gathered into the ring reducer's bucket memory (reduced without staging copies), the single
  // tensors are reduced where they are; every result is the exact average.
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(counts[r], (std::vector<size_t>{90, 30, 150, 10})) << "rank " << r;
    EXPECT_EQ(shared[r], (std::vector<bool>{true, false, false, false})) << "rank " << r;
    size_t k = 0;
    for (size_t size : {30, 30, 30, 30, 150, 10}) {
      std::vector<float> average(size, 0.0f);
      for (int q = 0; q < n; ++q) {
        const std::vector<float> input = DyadicInput(q, size, k);
        for (size_t i = 0; i < size; ++i) average[i] += input[i] / n;
      }
      EXPECT_EQ(results[r][k], average) << "rank " << r << " tensor " << k;
      ++k;
    }
  }
}

TEST(Engine, MgWfbpPlansFromTheCostModelAndThenReducesGroups) {
  const int n = 2;
  for (double alpha : {10.0, 0.0}) {
    std::vector<std::vector<std::vector<std::string>>> buckets(n);
    std::vector<EngineStats> stats(n);
    ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
      RecordingReducer reducer(RingReducer(t));
      EngineOptions options;
      ApplyOverlapMode(OverlapMode::kFusion, options, FusionPolicy::kMgWfbp);
      options.mgwfbp_warmup_steps = 1;
      options.mgwfbp_profile_steps = 2;
      options.reduction_cost = CostParams{alpha, 1e-9, 0};
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, options));
      for (int step = 0; step < 6; ++step) {
        std::vector<std::vector<float>> data;
        std::vector<std::unique_ptr<Work>> works;
        for (int k = 0; k < 4; ++k) data.emplace_back(10 + k, 1.0f);
        for (int k = 3; k >= 0; --k) {
          works.push_back(engine->Submit(Req(Indexed("p", k), k, uint64_t(step)), data[k]));
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
      }
      buckets[t.rank()] = reducer.buckets();
      stats[t.rank()] = engine->stats();
      return engine->Shutdown();
    }));
    for (int r = 0; r < n; ++r) {
      const auto& b = buckets[r];
      ASSERT_GE(b.size(), 4u);
      if (alpha > 0) {
        // Every tensor arrives within alpha of the first: one group, in backward order.
        ASSERT_EQ(stats[r].merge_plan.size(), 1u);
        EXPECT_EQ(stats[r].merge_plan[0], (std::vector<std::string>{"p3", "p2", "p1", "p0"}));
        EXPECT_EQ(b.back(), (std::vector<std::string>{"p3", "p2", "p1", "p0"})) << "rank " << r;
      } else {
        EXPECT_EQ(stats[r].merge_plan.size(), 4u);
        EXPECT_EQ(b.back().size(), 1u);
      }
      EXPECT_EQ(buckets[r], buckets[0]);
    }
  }
}

TEST(Engine, CallsRunInOrderWithTensors) {
  const int n = 3;
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, {}));
    std::vector<float> g(10, static_cast<float>(t.rank()));
    std::unique_ptr<Work> w = engine->Submit(Req("g"), g);
    float seen = -1;
    std::unique_ptr<Work> c = engine->Call("broadcast", [&](Transport& tt) {
      seen = g[0];  // the tensor submitted before has completed
      std::vector<float> x(3, tt.rank() == 0 ? 7.0f : 0.0f);
      FRUGAL_RETURN_IF_ERROR(Broadcast(tt, std::span<float>(x), 0, CollectiveOptions{}));
      return x[2] == 7.0f ? Status::Ok() : InternalError("broadcast");
    });
    FRUGAL_RETURN_IF_ERROR(c->Wait(kWait));
    FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    if (seen != 1.0f) return InternalError("call ran before the tensor completed");
    return engine->Shutdown();
  }));
}

TEST(Engine, DifferentSchedulingOptionsAreRejectedOnEveryRank) {
  std::vector<Status> statuses = RunRanks(3, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    if (t.rank() == 2) ApplyOverlapMode(OverlapMode::kPriority, options);
    return Engine::Start(t, *reducer, options).status();
  });
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("rank 2 differ from rank 0's"));
  }
}

// Rank 0's engine is inside a negotiation, waiting for rank 1 (its stall report proves it), when
// Shutdown stops it.
TEST(Engine, ShutdownCancelsPendingWorkAndLaterSubmissionsFail) {
  ExpectAllOk(RunRanks(2, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    Gate negotiating;
    EngineOptions options;
    options.stall_warning = std::chrono::milliseconds(1);
    options.on_stall = [&](const StallReport&) { negotiating.Open(); };
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> a(4, 1.0f);
    std::unique_ptr<Work> w;
    if (t.rank() == 0) {
      w = engine->Submit(Req("only_here"), a);
      if (!negotiating.Wait(kWait)) return TimeoutError("no stall report");
    }
    FRUGAL_RETURN_IF_ERROR(engine->Shutdown());
    if (w && w->Wait(kWait).code() != StatusCode::kCancelled) {
      return InternalError("pending work was not cancelled");
    }
    if (engine->Submit(Req("late"), a)->Wait(kWait).code() != StatusCode::kCancelled) {
      return InternalError("a submission after shutdown did not fail");
    }
    return Status::Ok();
  }));
}

TEST(Engine, ExposedTimeCountsOnlyWaitedCommunication) {
  ExpectAllOk(RunRanks(2, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, {}));
    std::vector<float> a(1 << 16, 1.0f);
    // Not waited while it runs: hidden. A Call runs once the tensor submitted before it has
    // completed, and waiting on a Call is not waiting on a tensor.
    std::unique_ptr<Work> w = engine->Submit(Req("a"), a);
    FRUGAL_RETURN_IF_ERROR(
        engine->Call("after", [](Transport&) { return Status::Ok(); })->Wait(kWait));
    if (!w->IsCompleted()) return InternalError("the call ran before the tensor completed");
    EngineStats s = engine->stats();
    if (s.reductions != 1 || s.comm_seconds <= 0 || s.exposed_seconds != 0) {
      return InternalError("unexpected stats after a hidden reduction");
    }
    FRUGAL_RETURN_IF_ERROR(engine->Submit(Req("a"), a)->Wait(kWait));
    s = engine->stats();
    if (s.exposed_seconds <= 0 || s.hidden_fraction() >= 1.0) {
      return InternalError("a waited reduction was not counted as exposed");
    }
    return engine->Shutdown();
  }));
}

TEST(Engine, TimelineIsValidJsonWithEveryRankAndThePhases) {
  const int n = 3;
  std::string trace;
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    Timeline timeline(t.rank());
    EngineOptions options;
    options.timeline = &timeline;
    ApplyOverlapMode(OverlapMode::kFusion, options, FusionPolicy::kCycle);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<std::vector<float>> data(3, std::vector<float>(100, 1.0f));
    std::vector<std::unique_ptr<Work>> works;
    for (int k = 0; k < 3; ++k) {
      works.push_back(engine->Submit(Req(Indexed("weird \"name\"\\", k)), data[k]));
    }
    for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    timeline.Span("compute", "forward", Clock::now(), Clock::now());
    StatusOr<std::string> merged = std::string();
    FRUGAL_RETURN_IF_ERROR(engine
                               ->Call("timeline",
                                      [&](Transport& tt) {
                                        merged = timeline.Gather(tt, kWait);
                                        return merged.status();
                                      })
                               ->Wait(kWait));
    if (t.rank() == 0) trace = *merged;
    return engine->Shutdown();
  }));
  nlohmann::json doc = nlohmann::json::parse(trace);  // throws if invalid
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::set<std::string> phases;
  std::set<int> pids;
  std::set<std::string> processes;
  for (const auto& e : doc["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "X") {
      phases.insert(e["name"].get<std::string>());
      EXPECT_GE(e["dur"].get<int64_t>(), 0);
    }
    if (e["ph"] == "M" && e["name"] == "process_name") {
      processes.insert(e["args"]["name"].get<std::string>());
    }
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0", "rank 1", "rank 2"}));
  for (const char* phase : {"queue", "negotiate", "communicate", "forward"}) {
    EXPECT_TRUE(phases.count(phase)) << phase;
  }
}

// ---- the merge plan ----

TEST(MergePlan, MergesOnlyTensorsThatArriveWithinAlphaOfTheGroupStart) {
  using engine_internal::PlanTensor;
  const CostParams cost{0.010, 1e-8, 0};  // 10 ms per reduction, 100 MB/s
  // Ready at 0, 2 ms, 4 ms (within alpha), then 50 ms and 51 ms.
  std::vector<PlanTensor> tensors = {
      {0, 1000, 0.000}, {1, 1000, 0.002}, {2, 1000, 0.004}, {3, 1000, 0.050}, {4, 1000, 0.051}};
  auto groups = engine_internal::PlanMerges(tensors, cost, 1e9);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].ids, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(groups[1].ids, (std::vector<uint32_t>{3, 4}));
  EXPECT_LT(groups.back().end, engine_internal::UnmergedEnd(tensors, cost));
  // With a byte cap, groups close early.
  auto capped = engine_internal::PlanMerges(tensors, cost, 2000);
  EXPECT_EQ(capped[0].ids, (std::vector<uint32_t>{0, 1}));
  // Without startup cost nothing is merged.
  EXPECT_EQ(engine_internal::PlanMerges(tensors, CostParams{0, 1e-8, 0}, 1e9).size(), 5u);
}

}  // namespace
}  // namespace frugal::testing
