// Tier-1 tests of how the engine fails: an exception on the engine thread (a compressor's check,
// a throwing stall callback, bad_alloc in a reducer) fails the engine on every rank with the cause;
// a peer's malformed negotiation message is kMalformed; dead ranks, corrupted and delayed messages
// (injected by the in-process transport); the notice of a failure reaches every peer at once,
// bounded overall; options that cannot work are refused at Start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <set>

#include "collectives/internal.h"
#include "engine/negotiation.h"
#include "engine_test_util.h"
#include "frugal/compressed_reducer.h"
#include "frugal/engine.h"
#include "frugal/forwarding_transport.h"
#include "frugal/timer.h"

namespace frugal::testing {
namespace {

using ::testing::HasSubstr;

// Forwards to a reducer; `before` runs first on every call (to throw, or to hold the call).
class HookedReducer final : public GradientReducer {
 public:
  explicit HookedReducer(std::unique_ptr<GradientReducer> inner) : inner_(std::move(inner)) {}
  Status Reduce(const BucketInfo& bucket, std::span<float> data) override {
    if (before) before(bucket);
    return inner_->Reduce(bucket, data);
  }
  std::string name() const override { return inner_->name(); }
  uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
  std::string bytes_counted_by() const override { return inner_->bytes_counted_by(); }

  std::function<void(const BucketInfo&)> before;

 private:
  std::unique_ptr<GradientReducer> inner_;
};

std::unique_ptr<GradientReducer> RingReducerWithTimeout(Transport& t, Duration timeout) {
  DenseReducerOptions options;
  options.algorithm = "ring";
  options.timeout = timeout;
  return std::move(MakeDenseReducer(t, options)).value();
}

// Every rank resubmits a name with another size: the error-feedback state of the compressor
// refuses it with a check failure on the engine thread. Every pending and later Work fails with
// the cause, and Shutdown reports it.
TEST(EngineFailure, ACompressorCheckFailureFailsTheEngineNamingTheCause) {
  const int n = 3;
  std::vector<std::string> later(n), shutdown(n);
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    CompressedReducerOptions reducer_options;
    reducer_options.spec = "onebit:ef=1";
    reducer_options.min_bytes = 0;
    reducer_options.timeout = std::chrono::seconds(20);
    const CompressorRegistry registry = DefaultCompressorRegistry();
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<CompressedReducer> reducer,
                            MakeCompressedReducer(t, registry, reducer_options));
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, {}));
    std::vector<float> big(64, 1.0f);
    std::vector<float> small(32, 1.0f);
    FRUGAL_RETURN_IF_ERROR(engine->Submit(Req("w"), big)->Wait(kWait));
    Status status = engine->Submit(Req("w"), small)->Wait(kWait);
    later[t.rank()] = engine->Submit(Req("v"), big)->Wait(kWait).ToString();
    shutdown[t.rank()] = engine->Shutdown().ToString();
    return status;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kInvalidArgument) << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("engine thread"));
    EXPECT_THAT(statuses[r].message(), HasSubstr("tensor 'w"));
    EXPECT_THAT(statuses[r].message(), HasSubstr("changed size"));
    EXPECT_EQ(later[r], statuses[r].ToString()) << "a submission after the failure";
    EXPECT_EQ(shutdown[r], statuses[r].ToString());
  }
}

// Rank 0's stall callback throws while its engine waits for rank 1. Rank 0 fails with the cause;
// rank 2, waiting in the same negotiation, learns it from rank 0 and fails with the same code and
// cause before rank 1 has submitted anything (so not by its own timeout); rank 1 then fails with
// it at its first submission.
TEST(EngineFailure, AThrowingStallCallbackFailsEveryRankWithTheCause) {
  const int n = 3;
  Gate ranks_0_and_2_failed;
  std::atomic<int> failed{0};
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.timeout = std::chrono::seconds(20);
    options.stall_warning = std::chrono::milliseconds(100);
    const int rank = t.rank();
    options.on_stall = [rank](const StallReport&) {
      if (rank == 0) throw std::runtime_error("the stall callback broke");
    };
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> a(16, 1.0f);
    if (rank == 1 && !ranks_0_and_2_failed.Wait(kWait)) return TimeoutError("ranks 0 and 2");
    Status status = engine->Submit(Req("grad.a"), a)->Wait(kWait);
    if (rank != 1 && ++failed == 2) ranks_0_and_2_failed.Open();
    (void)engine->Shutdown();
    return status;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kInternal) << r << ": " << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("the stall callback broke")) << r;
  }
  for (int r : {1, 2}) EXPECT_THAT(statuses[r].message(), HasSubstr("rank 0")) << r;
}

// Rank 1's reducer throws bad_alloc; ranks 0 and 2 enter the same reduction only once rank 1's
// engine has failed, so their ring times out waiting for rank 1. They report rank 1's cause, not
// only their own timeout.
TEST(EngineFailure, APeerThatFailsInsideAReductionIsNamedWithItsCause) {
  const int n = 3;
  Gate rank1_failed;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    HookedReducer reducer(RingReducerWithTimeout(t, std::chrono::milliseconds(300)));
    const int rank = t.rank();
    reducer.before = [&, rank](const BucketInfo&) {
      if (rank == 1) throw std::bad_alloc();
      if (!rank1_failed.Wait(kWait)) throw std::runtime_error("rank 1 did not fail");
    };
    EngineOptions options;
    options.timeout = std::chrono::seconds(20);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, options));
    std::vector<float> a(16, 1.0f);
    Status status = engine->Submit(Req("grad.a"), a)->Wait(kWait);
    if (rank == 1) rank1_failed.Open();
    (void)engine->Shutdown();
    return status;
  });
  EXPECT_EQ(statuses[1].code(), StatusCode::kInternal) << statuses[1].ToString();
  EXPECT_THAT(statuses[1].message(), HasSubstr("bad_alloc"));
  for (int r : {0, 2}) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kInternal) << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("rank 1"));
    EXPECT_THAT(statuses[r].message(), HasSubstr("bad_alloc"));
  }
}

// Rank 1 runs a Call on its engine thread that sends rank 0 a negotiation message of a cycle rank
// 0 is not in: rank 0 fails with kMalformed naming rank 1.
TEST(EngineFailure, APeersMessageOfAnotherCycleIsMalformed) {
  const int n = 2;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.timeout = std::chrono::seconds(20);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    if (t.rank() == 1) {
      Status sent = engine
                        ->Call("forge",
                               [](Transport& tt) {
                                 engine_internal::CycleMessage m;
                                 m.cycle = 7;
                                 const std::vector<std::byte> bytes =
                                     engine_internal::EncodeCycleMessage(m);
                                 return Send(tt, 0, kEngineTags[0], bytes, kWait);
                               })
                        ->Wait(kWait);
      (void)engine->Shutdown();
      return sent;
    }
    std::vector<float> a(4, 1.0f);
    Status status = engine->Submit(Req("x"), a)->Wait(kWait);
    (void)engine->Shutdown();
    return status;
  });
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].ToString();
  EXPECT_EQ(statuses[0].code(), StatusCode::kMalformed) << statuses[0].ToString();
  EXPECT_THAT(statuses[0].message(), HasSubstr("rank 1"));
  EXPECT_THAT(statuses[0].message(), HasSubstr("cycle 7"));
}

// ---- faults injected by the in-process transport ----

// Every rank submits "a", then "b" (on its own engine), and returns the first failure.
Status SubmitTwo(Transport& t, Duration reducer_timeout) {
  std::unique_ptr<GradientReducer> reducer = RingReducerWithTimeout(t, reducer_timeout);
  EngineOptions options;
  options.timeout = std::chrono::seconds(20);
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
  std::vector<float> a(16, static_cast<float>(t.rank()));
  std::vector<float> b(8, static_cast<float>(t.rank()));
  Status status = engine->Submit(Req("a"), a)->Wait(kWait);
  if (status.ok()) status = engine->Submit(Req("b"), b)->Wait(kWait);
  if (status.ok() && (a[0] != 1.0f || b[0] != 1.0f)) status = InternalError("not the average");
  (void)engine->Shutdown();
  return status;
}

InProcOptions WithFault(InProcFault fault) {
  InProcOptions options;
  options.faults.push_back(fault);
  return options;
}

// Rank 2 dies before sending its second report: the coordinator learns from the transport that
// it is gone (kPeerLost) instead of waiting out the timeout, and tells rank 1.
TEST(EngineFaults, ARankThatDiesFailsTheOthersWithPeerLostNamingIt) {
  const Stopwatch watch;
  std::vector<Status> statuses = RunRanks(
      3, [&](Transport& t) { return SubmitTwo(t, std::chrono::seconds(20)); },
      WithFault({.kind = InProcFaultKind::kKill, .src = 2, .tag = kEngineTags[0], .first = 1}));
  EXPECT_LT(watch.Seconds(), 10.0) << "not the 20 s timeout";
  for (int r : {0, 1}) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kPeerLost) << r << ": " << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("rank 2")) << r;
  }
  EXPECT_FALSE(statuses[2].ok());
}

// A bit of rank 1's first report flips: the coordinator refuses it (kMalformed, naming rank 1),
// and every rank fails with that.
TEST(EngineFaults, ACorruptedReportFailsEveryRankNamingTheSender) {
  std::vector<Status> statuses = RunRanks(
      3, [&](Transport& t) { return SubmitTwo(t, std::chrono::seconds(20)); },
      WithFault({.kind = InProcFaultKind::kCorrupt, .src = 1, .tag = kEngineTags[0], .seed = 7}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kMalformed) << r << ": " << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("from rank 1")) << r;
  }
}

// A bit of the coordinator's first decision to rank 2 flips: rank 2 refuses it and fails; the
// others, waiting for rank 2 in the reduction the decision started, get its notice.
TEST(EngineFaults, ACorruptedDecisionFailsEveryRankNamingTheRankThatReadIt) {
  std::vector<Status> statuses = RunRanks(
      3, [&](Transport& t) { return SubmitTwo(t, std::chrono::milliseconds(500)); },
      WithFault({.kind = InProcFaultKind::kCorrupt,
                 .src = 0,
                 .dst = 2,
                 .tag = kEngineTags[2],
                 .seed = 7}));
  EXPECT_EQ(statuses[2].code(), StatusCode::kMalformed) << statuses[2].ToString();
  EXPECT_THAT(statuses[2].message(), HasSubstr("decision"));
  for (int r : {0, 1}) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kMalformed) << r << ": " << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("rank 2 failed")) << r;
  }
}

// Delayed reports and decisions change nothing but the time.
TEST(EngineFaults, DelayedMessagesStillGiveTheAverages) {
  for (int tag : {kEngineTags[0], kEngineTags[2]}) {
    ExpectAllOk(RunRanks(
        3, [&](Transport& t) { return SubmitTwo(t, std::chrono::seconds(20)); },
        WithFault({.kind = InProcFaultKind::kDelay,
                   .tag = tag,
                   .count = 4,
                   .delay = std::chrono::milliseconds(30)})));
  }
}

// Forwards to a transport; once `recording` is set, logs every send (destination) and every wait
// on a send (with the time it was called and its timeout). `before_send`, if set, runs first on
// every send with its tag (to hold the rank there).
class RecordingTransport final : public ForwardingTransport {
 public:
  struct Event {
    bool wait = false;  // else: a send
    int peer = -1;
    Clock::time_point at;
    Duration timeout{};
  };

  using ForwardingTransport::ForwardingTransport;

  std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) override {
    if (before_send) before_send(tag);
    std::unique_ptr<Work> work = inner_.ISend(dst, tag, data);
    if (!recording.load()) return work;
    Record({false, dst, Clock::now(), {}});
    return std::make_unique<RecordingWork>(std::move(work), *this, dst);
  }

  std::vector<Event> events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

  std::atomic<bool> recording{false};
  std::function<void(int tag)> before_send;

 private:
  class RecordingWork final : public Work {
   public:
    RecordingWork(std::unique_ptr<Work> inner, RecordingTransport& owner, int peer)
        : inner_(std::move(inner)), owner_(owner), peer_(peer) {}
    Status Wait(Duration timeout) override {
      owner_.Record({true, peer_, Clock::now(), timeout});
      return inner_->Wait(timeout);
    }
    bool IsCompleted() override { return inner_->IsCompleted(); }
    int peer() const override { return inner_->peer(); }
    size_t bytes() const override { return inner_->bytes(); }

   private:
    std::unique_ptr<Work> inner_;
    RecordingTransport& owner_;
    int peer_;
  };

  void Record(Event e) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(e);
  }

  std::mutex mutex_;
  std::vector<Event> events_;
};

// Rank 2 freezes inside a ring all-reduce, after its length check, at its first send of the
// reduce-scatter (until the others are done): rank 0 waits for rank 2 and rank 1 waits for rank 0.
// Every rank's reducer has its own timeout, so the order in which the waits expire is fixed.
// Returns every rank's failure.
std::vector<Status> FreezeRankTwoInARing(Duration rank0_timeout, Duration rank1_timeout) {
  Gate others_done;
  std::atomic<int> done{0};
  return RunRanks(3, [&](Transport& base) -> Status {
    RecordingTransport t(base);
    const int rank = t.rank();
    if (rank == 2) {
      t.before_send = [&](int tag) {
        if (tag == coll::kTagRingReduceScatter && !others_done.Wait(kWait)) {
          throw std::runtime_error("ranks 0 and 1 hang");
        }
      };
    }
    const Duration timeout = rank == 0   ? rank0_timeout
                             : rank == 1 ? rank1_timeout
                                         : Duration(std::chrono::milliseconds(300));
    std::unique_ptr<GradientReducer> reducer = RingReducerWithTimeout(t, timeout);
    EngineOptions options;
    options.timeout = std::chrono::seconds(20);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> a(64, 1.0f);
    Status status = engine->Submit(Req("grad.a"), a)->Wait(kWait);
    if (rank != 2 && ++done == 2) others_done.Open();
    (void)engine->Shutdown();
    return status;
  });
}

// Rank 1 times out first (naming rank 0) and its notice reaches rank 0 before rank 0's own wait
// for rank 2 expires: rank 0 still reports its own wait, which names the frozen rank.
TEST(EngineFailure, ARankWaitingForAFrozenRankNamesItDespiteAPeersEarlierNotice) {
  const std::vector<Status> statuses =
      FreezeRankTwoInARing(std::chrono::milliseconds(2500), std::chrono::milliseconds(300));
  for (int r : {0, 1})
    EXPECT_EQ(statuses[r].code(), StatusCode::kTimeout) << statuses[r].ToString();
  EXPECT_THAT(statuses[0].message(), HasSubstr("no message from rank 2"));
  EXPECT_THAT(statuses[1].message(), HasSubstr("no message from rank 0"));
}

// Rank 1 times out first; rank 0's wait for rank 2 expires soon after, within the time rank 1
// gives the rank it waited for to report: rank 1's failure carries rank 0's, naming rank 2.
TEST(EngineFailure, ARankThatTimesOutWaitsForTheSilentPeersOwnWait) {
  const std::vector<Status> statuses =
      FreezeRankTwoInARing(std::chrono::milliseconds(500), std::chrono::milliseconds(300));
  for (int r : {0, 1}) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kTimeout) << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("no message from rank 2")) << r;
  }
  EXPECT_THAT(statuses[1].message(), HasSubstr("no message from rank 0"));
}

// Rank 0's stall inspector shuts the engine down while its peers never submit: rank 0 tells every
// peer at once (every send started before the first wait) and the waits end within one bound of
// 200 ms counted from the first send, not 200 ms per peer.
TEST(EngineFailure, TheFailureNoticeGoesToEveryPeerAtOnceWithinOneBound) {
  const int n = 6;
  std::vector<RecordingTransport::Event> events;
  std::vector<Status> statuses = RunRanks(n, [&](Transport& base) -> Status {
    RecordingTransport t(base);
    std::unique_ptr<GradientReducer> reducer = RingReducer(t);
    EngineOptions options;
    options.timeout = std::chrono::seconds(20);
    options.stall_warning = std::chrono::milliseconds(50);
    options.stall_shutdown = std::chrono::milliseconds(100);
    options.on_stall = [&t](const StallReport& report) {
      if (report.shutdown) t.recording = true;
    };
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    if (t.rank() != 0) return engine->Shutdown();
    std::vector<float> a(4, 1.0f);
    Status status = engine->Submit(Req("only_here"), a)->Wait(kWait);
    (void)engine->Shutdown();
    events = t.events();
    return status;
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimeout) << statuses[0].ToString();
  ASSERT_FALSE(events.empty());
  std::set<int> sent_to;
  bool waited = false;
  const Clock::time_point first = events.front().at;
  for (const auto& e : events) {
    if (!e.wait) {
      EXPECT_FALSE(waited) << "a send to rank " << e.peer << " after a wait";
      sent_to.insert(e.peer);
      continue;
    }
    waited = true;
    EXPECT_LE(e.at + e.timeout - first, std::chrono::milliseconds(210))
        << "wait on rank " << e.peer;
  }
  EXPECT_EQ(sent_to, (std::set<int>{1, 2, 3, 4, 5}));
}

// The stall warning must come before the timeout ends the job: Start refuses a warning (or a
// shutdown) that is not shorter than the timeout on every rank; by default the warning comes at
// half the timeout, whatever the timeout.
TEST(EngineFailure, StartRefusesAStallWarningNotShorterThanTheTimeout) {
  for (bool shutdown : {false, true}) {
    std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
      std::unique_ptr<GradientReducer> reducer = RingReducer(t);
      EngineOptions options;
      options.timeout = std::chrono::seconds(5);
      options.stall_warning = std::chrono::seconds(shutdown ? 1 : 5);
      if (shutdown) options.stall_shutdown = std::chrono::seconds(6);
      return Engine::Start(t, *reducer, options).status();
    });
    for (const Status& s : statuses) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr(shutdown ? "stall shutdown" : "stall warning"));
      EXPECT_THAT(s.message(), HasSubstr("timeout (5000 ms)"));
    }
  }
  for (Duration timeout : {kDefaultTimeout, Duration(std::chrono::seconds(2))}) {
    ExpectAllOk(RunRanks(2, [&](Transport& t) -> Status {
      std::unique_ptr<GradientReducer> reducer = RingReducer(t);
      EngineOptions options;
      options.timeout = timeout;
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
      if (engine->options().stall_warning != timeout / 2) {
        return InternalError("the default stall warning is not half the timeout");
      }
      return engine->Shutdown();
    }));
  }
}

}  // namespace
}  // namespace frugal::testing
