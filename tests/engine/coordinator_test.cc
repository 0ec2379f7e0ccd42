// The negotiation through a coordinator (rank 0): what a cycle costs, and that rank 0 is watched
// like any rank although it is the one that watches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "engine_test_util.h"
#include "frugal/engine.h"

namespace frugal::testing {
namespace {

using ::testing::HasSubstr;

// Messages this rank's transport has sent, read on the engine thread (which owns it).
StatusOr<uint64_t> MessagesSent(Engine& engine) {
  uint64_t messages = 0;
  FRUGAL_RETURN_IF_ERROR(engine
                             .Call("count",
                                   [&](Transport& t) {
                                     messages = t.messages_sent();
                                     return Status::Ok();
                                   })
                             ->Wait(kWait));
  return messages;
}

// Every rank reports to rank 0 and rank 0 answers every rank: 2 (n - 1) messages per cycle in
// all (all to all, it was n (n - 1)).
TEST(Coordinator, ACycleCostsTwoMessagesPerPeer) {
  for (int n : {2, 5}) {
    std::vector<uint64_t> messages(n), cycles(n);
    ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
      NoOpReducer reducer;
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, {}));
      FRUGAL_ASSIGN_OR_RETURN(const uint64_t before, MessagesSent(*engine));
      const uint64_t cycles_before = engine->stats().cycles;
      std::vector<float> g(4, 1.0f);
      for (uint64_t step = 0; step < 20; ++step) {
        FRUGAL_RETURN_IF_ERROR(engine->Submit(Req("g", 0, step), g)->Wait(kWait));
      }
      FRUGAL_ASSIGN_OR_RETURN(const uint64_t after, MessagesSent(*engine));
      messages[t.rank()] = after - before;
      cycles[t.rank()] = engine->stats().cycles - cycles_before;
      return engine->Shutdown();
    }));
    uint64_t total = 0;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(cycles[r], cycles[0]) << "every rank takes part in every cycle";
      total += messages[r];
    }
    EXPECT_GE(cycles[0], 20u);
    EXPECT_EQ(total, 2 * static_cast<uint64_t>(n - 1) * cycles[0]) << n << " ranks";
    EXPECT_EQ(messages[0], static_cast<uint64_t>(n - 1) * cycles[0]) << "rank 0's decisions";
  }
}

// Ranks 1 and 2 submit; rank 0, the coordinator, has nothing pending but joins their session:
// its stall inspector names it as the missing rank, and once it submits, every rank completes.
TEST(Coordinator, AnIdleCoordinatorInspectsItsPeersAndNamesItselfMissing) {
  const int n = 3;
  Gate reported;
  std::vector<StallReport> reports;
  std::vector<int> reporters;
  std::mutex mutex;
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.stall_warning = std::chrono::milliseconds(100);
    const int rank = t.rank();
    options.on_stall = [&, rank](const StallReport& report) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        reports.push_back(report);
        reporters.push_back(rank);
      }
      reported.Open();
    };
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> g(16, static_cast<float>(rank));
    if (rank == 0 && !reported.Wait(kWait)) return TimeoutError("no stall report");
    FRUGAL_RETURN_IF_ERROR(engine->Submit(Req("g"), g)->Wait(kWait));
    if (g[0] != 1.0f) return InternalError("not the average");
    return engine->Shutdown();
  }));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reporters[0], 0);
  EXPECT_EQ(reports[0].tensor, "g");
  EXPECT_EQ(reports[0].submitted, (std::vector<int>{1, 2}));
  EXPECT_EQ(reports[0].missing, std::vector<int>{0});
}

// Rank 0 never submits what ranks 1 and 2 wait for: it answers every cycle, so no wait for a
// report times out, but the tensor times out, naming rank 0, on every rank.
TEST(Coordinator, ATensorMissingOnlyOnTheCoordinatorTimesOutNamingIt) {
  const int n = 3;
  Gate others_failed;
  std::atomic<int> failed{0};
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.timeout = std::chrono::milliseconds(800);
    options.stall_warning = Duration::zero();
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    if (t.rank() == 0) {
      if (!others_failed.Wait(kWait)) return InternalError("ranks 1 and 2 did not fail");
      return engine->Shutdown();
    }
    std::vector<float> g(16, 1.0f);
    Status status = engine->Submit(Req("g"), g)->Wait(kWait);
    if (++failed == 2) others_failed.Open();
    (void)engine->Shutdown();
    return status;
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimeout) << statuses[0].ToString();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kTimeout) << r << ": " << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(),
                HasSubstr("tensor 'g' submitted by ranks 1, 2 but not by rank 0"));
  }
}

}  // namespace
}  // namespace frugal::testing
