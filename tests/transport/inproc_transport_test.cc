// Semantics of the in-process transport (transport.h): ordering, posted-order matching, any
// source, probes, split, timeouts naming the peer, oversized messages and byte counting.
#include "frugal/inproc_transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport_test_util.h"

namespace frugal {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using transport_test::Bytes;
using transport_test::ExpectAllOk;
using transport_test::kWait;
using transport_test::WBytes;

// The semantics of transport.h hold with eager sends and with rendezvous sends of every message
// (threshold 1 byte) or of large ones only.
class InProcSemantics : public ::testing::TestWithParam<size_t> {
 protected:
  std::vector<Status> Run(int size, const std::function<Status(Transport&)>& fn) {
    return RunRanks(size, fn, InProcOptions{.rendezvous_bytes = GetParam()});
  }
};

INSTANTIATE_TEST_SUITE_P(Protocols, InProcSemantics,
                         ::testing::Values(std::numeric_limits<size_t>::max(), size_t{1},
                                           size_t{4096}),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return info.param == std::numeric_limits<size_t>::max()
                                      ? std::string("Eager")
                                      : "Rendezvous" + std::to_string(info.param);
                         });

TEST(InProcTransport, SizeRankAndHostnames) {
  InProcWorld world(6, InProcOptions{.ranks_per_host = 4});
  EXPECT_EQ(world.size(), 6);
  std::vector<std::unique_ptr<Transport>> ts;
  for (int r = 0; r < 6; ++r) ts.push_back(world.Connect(r));
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(ts[r]->rank(), r);
    EXPECT_EQ(ts[r]->size(), 6);
    EXPECT_EQ(ts[r]->hostname(), r < 4 ? "inproc0" : "inproc1");
  }
  EXPECT_THROW(world.Connect(2), CheckError);
  EXPECT_THROW(world.Connect(6), CheckError);

  InProcWorld single_host(3);
  auto t = single_host.Connect(2);
  EXPECT_EQ(t->hostname(), "inproc0");
}

// The ranks are threads of one process: a core each while there are no more of them than the
// machine's cores, whatever the emulated hosts.
TEST(InProcTransport, CoreForEachRankCountsTheWorldsThreads) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  ASSERT_GT(cores, 0);
  InProcWorld fits(cores, InProcOptions{.ranks_per_host = 1});
  EXPECT_TRUE(fits.Connect(0)->CoreForEachRank());
  InProcWorld too_many(cores + 1);
  EXPECT_FALSE(too_many.Connect(cores)->CoreForEachRank());
}

TEST(InProcTransport, BadArgumentsThrow) {
  InProcWorld world(2);
  auto t = world.Connect(0);
  int v = 0;
  EXPECT_THROW(t->ISend(2, 0, Bytes(v)), CheckError);
  EXPECT_THROW(t->ISend(1, -1, Bytes(v)), CheckError);
  EXPECT_THROW(t->ISend(1, kMaxTag + 1, Bytes(v)), CheckError);
  EXPECT_THROW(t->IRecv(-2, 0, WBytes(v)), CheckError);
}

TEST_P(InProcSemantics, NonOvertakingPerSourceAndTag) {
  constexpr int kCount = 200;
  auto statuses = Run(2, [](Transport& t) -> Status {
    if (t.rank() == 0) {
      for (int i = 0; i < kCount; ++i) {
        FRUGAL_RETURN_IF_ERROR(Send(t, 1, 5, Bytes(i), kWait));
      }
      return Status::Ok();
    }
    // Half of the receives are posted before anything could have arrived, half afterwards.
    std::vector<int> got(kCount, -1);
    std::vector<std::unique_ptr<Work>> works;
    for (int i = 0; i < kCount / 2; ++i) works.push_back(t.IRecv(0, 5, WBytes(got[i])));
    for (int i = 0; i < kCount / 2; ++i) FRUGAL_RETURN_IF_ERROR(works[i]->Wait(kWait));
    for (int i = kCount / 2; i < kCount; ++i) {
      FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 5, WBytes(got[i]), kWait));
    }
    for (int i = 0; i < kCount; ++i) RANK_EXPECT(got[i] == i, "at " + std::to_string(i));
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, ReceivesMatchInPostOrder) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    int ready = 1;
    if (t.rank() == 1) {
      int a = -1, b = -1, c = -1;
      auto wa = t.IRecv(kAnySource, 3, WBytes(a));
      auto wb = t.IRecv(0, 3, WBytes(b));
      auto wc = t.IRecv(0, 3, WBytes(c));
      // Tell rank 0 the receives are posted, so its messages meet them posted.
      FRUGAL_RETURN_IF_ERROR(Send(t, 0, 9, Bytes(ready), kWait));
      FRUGAL_RETURN_IF_ERROR(wa->Wait(kWait));
      FRUGAL_RETURN_IF_ERROR(wb->Wait(kWait));
      FRUGAL_RETURN_IF_ERROR(wc->Wait(kWait));
      RANK_EXPECT(a == 10 && b == 11 && c == 12);
      RANK_EXPECT(wa->peer() == 0 && wa->bytes() == sizeof(int));
      return Status::Ok();
    }
    FRUGAL_RETURN_IF_ERROR(Recv(t, 1, 9, WBytes(ready), kWait));
    for (int v : {10, 11, 12}) FRUGAL_RETURN_IF_ERROR(Send(t, 1, 3, Bytes(v), kWait));
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, TagsAreMatchedSeparately) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    if (t.rank() == 0) {
      // Both sends are started before either is waited for: the receiver takes tag 2 first.
      int one = 1, two = 2;
      std::unique_ptr<Work> first = t.ISend(1, 1, Bytes(one));
      std::unique_ptr<Work> second = t.ISend(1, 2, Bytes(two));
      FRUGAL_RETURN_IF_ERROR(first->Wait(kWait));
      return second->Wait(kWait);
    }
    int x = 0, y = 0;
    FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 2, WBytes(x), kWait));
    FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 1, WBytes(y), kWait));
    RANK_EXPECT(x == 2 && y == 1);
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, AnySourceReportsThePeer) {
  constexpr int kRanks = 5;
  constexpr int kPerRank = 50;
  auto statuses = Run(kRanks, [](Transport& t) -> Status {
    if (t.rank() != 0) {
      for (int i = 0; i < kPerRank; ++i) {
        int v = t.rank() * 1000 + i;
        FRUGAL_RETURN_IF_ERROR(Send(t, 0, 4, Bytes(v), kWait));
      }
      return Status::Ok();
    }
    std::vector<int> next(kRanks, 0);
    for (int i = 0; i < (kRanks - 1) * kPerRank; ++i) {
      int v = -1;
      auto w = t.IRecv(kAnySource, 4, WBytes(v));
      FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
      const int src = w->peer();
      RANK_EXPECT(src >= 1 && src < kRanks);
      // Per source, messages still arrive in the order sent.
      RANK_EXPECT(v == src * 1000 + next[src], "from " + std::to_string(src));
      ++next[src];
    }
    for (int r = 1; r < kRanks; ++r) RANK_EXPECT(next[r] == kPerRank);
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, ReceiveBufferMayBeLargerThanMessage) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    if (t.rank() == 0) {
      std::vector<std::byte> msg(5, std::byte{7});
      FRUGAL_RETURN_IF_ERROR(Send(t, 1, 0, msg, kWait));
      std::vector<std::byte> short_msg(3);
      return Send(t, 1, 1, short_msg, kWait);
    }
    std::vector<std::byte> buf(64, std::byte{0});
    auto w = t.IRecv(0, 0, buf);
    FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    RANK_EXPECT(w->bytes() == 5 && buf[4] == std::byte{7} && buf[5] == std::byte{0});
    // SendRecv insists on the exact size.
    std::vector<std::byte> exact(64);
    Status s = SendRecv(t, -1, {}, 0, exact, 1, kWait);
    RANK_EXPECT(s.code() == StatusCode::kMalformed, s.ToString());
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

// The default ISendShared/IRecvShared: the bytes move as with ISend/IRecv, and each Work holds
// its memory until it is destroyed, even when the caller dropped its own reference.
TEST_P(InProcSemantics, SharedSendsAndReceivesHoldTheirMemory) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    const size_t size = 10000;
    if (t.rank() == 0) {
      SharedBytes out = t.NewShared(size);
      RANK_EXPECT(out.bytes.size() == size);
      for (size_t i = 0; i < size; ++i) out.bytes[i] = std::byte(static_cast<unsigned char>(i));
      std::weak_ptr<void> memory = out.owner;
      auto w = t.ISendShared(1, 0, std::move(out.owner), out.bytes);
      RANK_EXPECT(!memory.expired(), "the send dropped its memory");
      FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
      RANK_EXPECT(w->bytes() == size);
      w.reset();
      RANK_EXPECT(memory.expired(), "the destroyed send kept its memory");
      return Status::Ok();
    }
    SharedBytes in = t.NewShared(size);
    std::weak_ptr<void> memory = in.owner;
    const std::span<std::byte> bytes = in.bytes;
    std::shared_ptr<void> keep = in.owner;  // read after the Wait
    auto w = t.IRecvShared(0, 0, std::move(in.owner), bytes);
    RANK_EXPECT(keep.use_count() == 2, "the receive does not hold its memory");
    FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    RANK_EXPECT(w->bytes() == size && w->peer() == 0);
    for (size_t i = 0; i < size; ++i) {
      RANK_EXPECT(bytes[i] == std::byte(static_cast<unsigned char>(i)),
                  "byte " + std::to_string(i));
    }
    w.reset();
    RANK_EXPECT(keep.use_count() == 1, "the destroyed receive kept its memory");
    keep.reset();
    RANK_EXPECT(memory.expired());
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, OversizedMessageIsMalformedAndConsumed) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    if (t.rank() == 0) {
      std::vector<std::byte> big(16, std::byte{1});
      int after = 42;
      FRUGAL_RETURN_IF_ERROR(Send(t, 1, 6, big, kWait));
      return Send(t, 1, 6, Bytes(after), kWait);
    }
    std::vector<std::byte> small(8);
    Status s = Recv(t, 0, 6, small, kWait);
    RANK_EXPECT(s.code() == StatusCode::kMalformed, s.ToString());
    RANK_EXPECT(s.message().find("16 bytes") != std::string::npos, s.ToString());
    int after = 0;
    FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 6, WBytes(after), kWait));
    RANK_EXPECT(after == 42);
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, OversizedMessageIntoPostedReceive) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    int ready = 1;
    if (t.rank() == 1) {
      std::vector<std::byte> small(8);
      auto w = t.IRecv(0, 6, small);
      FRUGAL_RETURN_IF_ERROR(Send(t, 0, 9, Bytes(ready), kWait));
      Status s = w->Wait(kWait);
      RANK_EXPECT(s.code() == StatusCode::kMalformed, s.ToString());
      return Status::Ok();
    }
    FRUGAL_RETURN_IF_ERROR(Recv(t, 1, 9, WBytes(ready), kWait));
    std::vector<std::byte> big(16, std::byte{1});
    return Send(t, 1, 6, big, kWait);
  });
  ExpectAllOk(statuses);
}

TEST(InProcTransport, TimeoutNamesThePeer) {
  InProcWorld world(3);
  auto t0 = world.Connect(0);
  int v = 0;
  auto w = t0->IRecv(2, 11, WBytes(v));
  const auto start = std::chrono::steady_clock::now();
  Status s = w->Wait(50ms);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_THAT(s.message(), HasSubstr("no message from rank 2 within 50 ms"));
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 5s);
  EXPECT_TRUE(w->IsCompleted());
  // The timed-out receive was withdrawn: a later message is not written into its buffer.
  auto t2 = world.Connect(2);
  int payload = 99;
  ASSERT_TRUE(Send(*t2, 0, 11, Bytes(payload), kWait).ok());
  EXPECT_EQ(v, 0);
  int again = 0;
  ASSERT_TRUE(Recv(*t0, 2, 11, WBytes(again), kWait).ok());
  EXPECT_EQ(again, 99);

  Status any = t0->IRecv(kAnySource, 12, WBytes(v))->Wait(10ms);
  EXPECT_EQ(any.code(), StatusCode::kTimeout);
  EXPECT_THAT(any.message(), HasSubstr("any rank"));
}

TEST_P(InProcSemantics, HugeTimeoutsWaitForTheMessage) {
  // Duration::max() must not overflow the deadline into the past.
  auto statuses = Run(2, [](Transport& t) -> Status {
    if (t.rank() == 0) {
      const int first = 1, second = 2;
      std::this_thread::sleep_for(20ms);
      FRUGAL_RETURN_IF_ERROR(Send(t, 1, 0, Bytes(first), Duration::max()));
      std::this_thread::sleep_for(20ms);
      return Send(t, 1, 1, Bytes(second), Duration::max());
    }
    int v = 0;
    FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 0, WBytes(v), Duration::max()));
    RANK_EXPECT(v == 1);
    FRUGAL_ASSIGN_OR_RETURN(ProbeResult p, t.Probe(0, 1, Duration::max()));
    RANK_EXPECT(p.bytes == sizeof(int));
    FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 1, WBytes(v), Duration::max()));
    RANK_EXPECT(v == 2);
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST(InProcTransport, DestroyedReceiveIsWithdrawn) {
  InProcWorld world(2);
  auto t0 = world.Connect(0);
  auto t1 = world.Connect(1);
  int lost = 0;
  { auto w = t1->IRecv(0, 1, WBytes(lost)); }
  int v = 5;
  ASSERT_TRUE(Send(*t0, 1, 1, Bytes(v), kWait).ok());
  EXPECT_EQ(lost, 0);
  int got = 0;
  ASSERT_TRUE(Recv(*t1, 0, 1, WBytes(got), kWait).ok());
  EXPECT_EQ(got, 5);
}

TEST(InProcTransport, SelfSend) {
  InProcWorld world(1);
  auto t = world.Connect(0);
  int v = 3, got = 0;
  auto r = t->IRecv(0, 2, WBytes(got));
  ASSERT_TRUE(t->ISend(0, 2, Bytes(v))->Wait(kWait).ok());
  ASSERT_TRUE(r->Wait(kWait).ok());
  EXPECT_EQ(got, 3);
}

TEST_P(InProcSemantics, ProbeAndIProbe) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    if (t.rank() == 1) {
      std::vector<std::byte> msg(12, std::byte{3});
      // Rank 0 blocks in Probe before this arrives (it cannot have arrived earlier).
      int go = 0;
      FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 8, WBytes(go), kWait));
      std::this_thread::sleep_for(20ms);
      return Send(t, 0, 7, msg, kWait);
    }
    RANK_EXPECT(!t.IProbe(kAnySource, 7)->has_value());
    int go = 1;
    FRUGAL_RETURN_IF_ERROR(Send(t, 1, 8, Bytes(go), kWait));
    FRUGAL_ASSIGN_OR_RETURN(ProbeResult p, t.Probe(kAnySource, 7, kWait));
    RANK_EXPECT(p.source == 1 && p.tag == 7 && p.bytes == 12);
    // Probing does not consume: IProbe still sees it, other tags do not.
    FRUGAL_ASSIGN_OR_RETURN(std::optional<ProbeResult> again, t.IProbe(1, 7));
    RANK_EXPECT(again.has_value() && again->bytes == 12);
    RANK_EXPECT(!t.IProbe(1, 6)->has_value());
    std::vector<std::byte> buf(p.bytes);
    FRUGAL_RETURN_IF_ERROR(Recv(t, 1, 7, buf, kWait));
    RANK_EXPECT(!t.IProbe(1, 7)->has_value());
    auto timed_out = t.Probe(1, 7, 30ms);
    RANK_EXPECT(timed_out.status().code() == StatusCode::kTimeout);
    RANK_EXPECT(timed_out.status().message().find("rank 1") != std::string::npos);
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, SplitFormsOrderedGroups) {
  constexpr int kRanks = 7;
  auto statuses = Run(kRanks, [](Transport& t) -> Status {
    const int color = t.rank() % 2;
    // Key reverses the order inside each group.
    FRUGAL_ASSIGN_OR_RETURN(auto child, t.Split(color, -t.rank(), kWait));
    const int expected_size = color == 0 ? 4 : 3;
    RANK_EXPECT(child->size() == expected_size);
    const int members = expected_size;
    const int position = (t.rank() - color) / 2;  // 0, 1, ... in increasing rank order
    RANK_EXPECT(child->rank() == members - 1 - position);
    // Allgather the parent ranks inside the group to verify membership.
    std::vector<int> parents(static_cast<size_t>(members), -1);
    const int mine = t.rank();
    std::vector<std::unique_ptr<Work>> sends;
    for (int r = 0; r < members; ++r) {
      if (r != child->rank()) sends.push_back(child->ISend(r, 0, Bytes(mine)));
    }
    parents[static_cast<size_t>(child->rank())] = mine;
    for (int r = 0; r < members; ++r) {
      if (r == child->rank()) continue;
      FRUGAL_RETURN_IF_ERROR(Recv(*child, r, 0, WBytes(parents[static_cast<size_t>(r)]), kWait));
    }
    for (auto& send : sends) FRUGAL_RETURN_IF_ERROR(send->Wait(kWait));
    for (int r = 0; r < members; ++r) {
      RANK_EXPECT(parents[static_cast<size_t>(r)] == color + 2 * (members - 1 - r));
    }
    // A split of the split, and messages of the parent and children never mix.
    FRUGAL_ASSIGN_OR_RETURN(auto grandchild, child->Split(0, child->rank(), kWait));
    RANK_EXPECT(grandchild->size() == members && grandchild->rank() == child->rank());
    if (child->rank() == 0) {
      int from_child = 1, from_grandchild = 2;
      std::unique_ptr<Work> to_child = child->ISend(1, 3, Bytes(from_child));
      FRUGAL_RETURN_IF_ERROR(Send(*grandchild, 1, 3, Bytes(from_grandchild), kWait));
      FRUGAL_RETURN_IF_ERROR(to_child->Wait(kWait));
    } else if (child->rank() == 1) {
      int a = 0, b = 0;
      FRUGAL_RETURN_IF_ERROR(Recv(*grandchild, 0, 3, WBytes(b), kWait));
      FRUGAL_RETURN_IF_ERROR(Recv(*child, 0, 3, WBytes(a), kWait));
      RANK_EXPECT(a == 1 && b == 2);
      RANK_EXPECT(!t.IProbe(kAnySource, 3)->has_value());
    }
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, RepeatedSplitsDoNotMix) {
  auto statuses = Run(4, [](Transport& t) -> Status {
    for (int i = 0; i < 200; ++i) {
      FRUGAL_ASSIGN_OR_RETURN(auto child, t.Split(t.rank() / 2, 0, kWait));
      int v = i * 10 + t.rank();
      const int peer = 1 - child->rank();
      int got = -1;
      auto r = child->IRecv(peer, 0, WBytes(got));
      auto s = child->ISend(peer, 0, Bytes(v));
      FRUGAL_RETURN_IF_ERROR(r->Wait(kWait));
      FRUGAL_RETURN_IF_ERROR(s->Wait(kWait));
      const int peer_parent = (t.rank() / 2) * 2 + peer;
      RANK_EXPECT(got == i * 10 + peer_parent);
    }
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, SplitChildTimeoutNamesWorldRank) {
  auto statuses = Run(4, [](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(auto child, t.Split(t.rank() >= 2 ? 1 : 0, 0, kWait));
    if (t.rank() == 2) {
      int v = 0;
      Status s = child->IRecv(1, 0, WBytes(v))->Wait(20ms);
      RANK_EXPECT(s.code() == StatusCode::kTimeout);
      RANK_EXPECT(s.message().find("rank 1 (world rank 3)") != std::string::npos, s.message());
    }
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, SplitTimesOutNamingAbsentRank) {
  auto statuses = Run(3, [](Transport& t) -> Status {
    if (t.rank() == 1) return Status::Ok();  // never joins the split
    auto child = t.Split(0, 0, 50ms);
    RANK_EXPECT(child.status().code() == StatusCode::kTimeout, child.status().ToString());
    RANK_EXPECT(child.status().message().find("rank 1") != std::string::npos);
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(InProcSemantics, CountsBytesAndMessagesIncludingChildren) {
  auto statuses = Run(2, [](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(auto child, t.Split(0, 0, kWait));
    const uint64_t bytes0 = t.bytes_sent();
    const uint64_t messages0 = t.messages_sent();
    RANK_EXPECT(child->bytes_sent() == bytes0);
    std::vector<std::byte> a(100), b(50), ra(100), rb(50);
    const int peer = 1 - t.rank();
    auto w1 = t.IRecv(peer, 0, ra);
    auto w2 = child->IRecv(peer, 0, rb);
    FRUGAL_RETURN_IF_ERROR(t.ISend(peer, 0, a)->Wait(kWait));
    FRUGAL_RETURN_IF_ERROR(child->ISend(peer, 0, b)->Wait(kWait));
    FRUGAL_RETURN_IF_ERROR(w1->Wait(kWait));
    FRUGAL_RETURN_IF_ERROR(w2->Wait(kWait));
    RANK_EXPECT(t.bytes_sent() - bytes0 == 150);
    RANK_EXPECT(t.messages_sent() - messages0 == 2);
    RANK_EXPECT(child->bytes_sent() == t.bytes_sent());
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST(InProcTransport, RunRanksTurnsExceptionsIntoInternal) {
  auto statuses = RunRanks(3, [](Transport& t) -> Status {
    if (t.rank() == 1) FRUGAL_CHECK(false, "boom");
    return Status::Ok();
  });
  EXPECT_TRUE(statuses[0].ok());
  EXPECT_EQ(statuses[1].code(), StatusCode::kInternal);
  EXPECT_THAT(statuses[1].message(), HasSubstr("boom"));
  EXPECT_TRUE(statuses[2].ok());
}

TEST_P(InProcSemantics, LargeMessagesManyThreads) {
  // Every rank sends a distinct 1 MB pattern to every other rank at once.
  constexpr int kRanks = 6;
  constexpr size_t kLen = 1 << 18;
  auto statuses = Run(kRanks, [](Transport& t) -> Status {
    std::vector<uint32_t> out(kLen);
    for (size_t i = 0; i < kLen; ++i) out[i] = static_cast<uint32_t>(t.rank() * 7919 + i);
    std::vector<std::vector<uint32_t>> in(kRanks, std::vector<uint32_t>(kLen));
    std::vector<std::unique_ptr<Work>> works;
    for (int r = 0; r < kRanks; ++r) {
      if (r != t.rank())
        works.push_back(t.IRecv(r, 1, AsWritableBytes(std::span<uint32_t>(in[r]))));
    }
    for (int r = 0; r < kRanks; ++r) {
      if (r != t.rank()) works.push_back(t.ISend(r, 1, AsBytes(std::span<const uint32_t>(out))));
    }
    for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    for (int r = 0; r < kRanks; ++r) {
      if (r == t.rank()) continue;
      for (size_t i = 0; i < kLen; i += 4099) {
        RANK_EXPECT(in[r][i] == static_cast<uint32_t>(r * 7919 + i));
      }
    }
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

}  // namespace
}  // namespace frugal
