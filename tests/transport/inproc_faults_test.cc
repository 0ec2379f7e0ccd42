// The in-process transport's test modes: rendezvous sends, fault rules (drop, delay, corrupt,
// kill) and dead ranks (kPeerLost).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/timer.h"
#include "transport/transport_test_util.h"

namespace frugal {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using transport_test::Bytes;
using transport_test::ExpectAllOk;
using transport_test::kWait;
using transport_test::WBytes;

std::vector<std::byte> Pattern(size_t size, int seed) {
  std::vector<std::byte> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = std::byte(static_cast<unsigned char>(i * 13 + seed));
  return data;
}

InProcOptions Rendezvous(size_t bytes) { return InProcOptions{.rendezvous_bytes = bytes}; }

// ---- Dead ranks ----

// Rank 2 sends one message to rank 0, waits until rank 1 has posted a receive from it, and dies.
// The message sent before dying is still delivered; every later wait on rank 2 (posted before or
// after the death, receive, probe, send) ends at once with kPeerLost naming it.
TEST(InProcDeadRank, WaitsOnADeadRankFailWithPeerLost) {
  std::vector<double> seconds(3, 0.0);
  auto statuses = RunRanks(3, [&](Transport& t) -> Status {
    int v = 0;
    if (t.rank() == 2) {
      int sent = 42;
      FRUGAL_RETURN_IF_ERROR(Send(t, 0, 1, Bytes(sent), kWait));
      FRUGAL_RETURN_IF_ERROR(Recv(t, 1, 9, WBytes(v), kWait));  // rank 1's receive is posted
      MarkRankDead(t, "killed by the test");
      // Its own operations end at once.
      Status own = Send(t, 0, 1, Bytes(v), kWait);
      RANK_EXPECT(own.code() == StatusCode::kCancelled, own.ToString());
      RANK_EXPECT(t.IRecv(0, 1, WBytes(v))->Wait(kWait).code() == StatusCode::kCancelled);
      return Status::Ok();
    }
    Stopwatch watch;
    if (t.rank() == 1) {
      std::unique_ptr<Work> recv = t.IRecv(2, 1, WBytes(v));
      int posted = 1;
      FRUGAL_RETURN_IF_ERROR(Send(t, 2, 9, Bytes(posted), kWait));
      Status s = recv->Wait(kWait);
      seconds[1] = watch.Seconds();
      RANK_EXPECT(s.code() == StatusCode::kPeerLost, s.ToString());
      RANK_EXPECT(s.message() == "rank 2 is gone (killed by the test)", s.message());
      return Status::Ok();
    }
    FRUGAL_RETURN_IF_ERROR(Recv(t, 2, 1, WBytes(v), kWait));
    RANK_EXPECT(v == 42);
    Status again = Recv(t, 2, 1, WBytes(v), kWait);
    RANK_EXPECT(again.code() == StatusCode::kPeerLost, again.ToString());
    StatusOr<ProbeResult> probe = t.Probe(2, 1, kWait);
    RANK_EXPECT(probe.status().code() == StatusCode::kPeerLost, probe.status().ToString());
    StatusOr<std::optional<ProbeResult>> iprobe = t.IProbe(2, 1);
    RANK_EXPECT(iprobe.status().code() == StatusCode::kPeerLost, iprobe.status().ToString());
    Status send = Send(t, 2, 1, Bytes(v), kWait);
    RANK_EXPECT(send.code() == StatusCode::kPeerLost, send.ToString());
    // Other peers are unaffected.
    RANK_EXPECT(t.IProbe(1, 1)->has_value() == false);
    seconds[0] = watch.Seconds();
    return Status::Ok();
  });
  ExpectAllOk(statuses);
  EXPECT_LT(seconds[0], 5.0);
  EXPECT_LT(seconds[1], 5.0);
}

// A receive from any rank fails only once every other rank is dead; a split transport of a dead
// rank is dead too.
TEST(InProcDeadRank, AnySourceAndSplitTransports) {
  auto statuses = RunRanks(3, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Transport> child, t.Split(0, t.rank(), kWait));
    int v = 0;
    if (t.rank() != 0) {
      int ready = 0;
      FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 9, WBytes(ready), kWait));
      MarkRankDead(*child, "gone in the child");
      return Status::Ok();
    }
    std::unique_ptr<Work> any = child->IRecv(kAnySource, 1, WBytes(v));
    RANK_EXPECT(!any->IsCompleted());
    for (int r : {1, 2}) FRUGAL_RETURN_IF_ERROR(Send(t, r, 9, Bytes(v), kWait));
    Status s = any->Wait(kWait);
    RANK_EXPECT(s.code() == StatusCode::kPeerLost, s.ToString());
    RANK_EXPECT(s.message() == "every other rank is gone", s.message());
    Status world = Recv(t, 1, 1, WBytes(v), kWait);
    RANK_EXPECT(world.message() == "rank 1 is gone (gone in the child)", world.ToString());
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

// A kKill rule: rank 1 dies instead of sending its third message to rank 0.
TEST(InProcDeadRank, KillRuleStopsTheSenderBeforeTheChosenMessage) {
  InProcOptions options;
  options.faults.push_back(
      InProcFault{.kind = InProcFaultKind::kKill, .src = 1, .dst = 0, .tag = 4, .first = 2});
  InProcWorld world(2, options);
  auto statuses = RunRanks(world, [&](Transport& t) -> Status {
    if (t.rank() == 1) {
      for (int i = 0; i < 2; ++i) FRUGAL_RETURN_IF_ERROR(Send(t, 0, 4, Bytes(i), kWait));
      int third = 2;
      Status s = Send(t, 0, 4, Bytes(third), kWait);
      RANK_EXPECT(s.code() == StatusCode::kCancelled, s.ToString());
      return Status::Ok();
    }
    for (int i = 0; i < 2; ++i) {
      int v = -1;
      FRUGAL_RETURN_IF_ERROR(Recv(t, 1, 4, WBytes(v), kWait));
      RANK_EXPECT(v == i);
    }
    int v = -1;
    Status s = Recv(t, 1, 4, WBytes(v), kWait);
    RANK_EXPECT(s.code() == StatusCode::kPeerLost, s.ToString());
    RANK_EXPECT(s.message().find("rank 1 is gone (stopped by a fault rule before its message 2 "
                                 "to rank 0 (tag 4))") != std::string::npos,
                s.message());
    return Status::Ok();
  });
  ExpectAllOk(statuses);
  EXPECT_EQ(world.faults_applied(), 1u);
}

// ---- Rendezvous sends ----

// A send at or above the threshold completes only once a receive has taken it; below, at once.
TEST(InProcRendezvous, LargeSendCompletesWhenReceived) {
  auto statuses = RunRanks(
      2,
      [](Transport& t) -> Status {
        const std::vector<std::byte> big = Pattern(4096, 1);
        const std::vector<std::byte> small = Pattern(1023, 2);
        int flag = 0;
        if (t.rank() == 0) {
          std::unique_ptr<Work> small_send = t.ISend(1, 3, small);
          RANK_EXPECT(small_send->IsCompleted(), "an eager send");
          std::unique_ptr<Work> send = t.ISend(1, 3, big);
          RANK_EXPECT(!send->IsCompleted(), "a rendezvous send before any receive");
          FRUGAL_RETURN_IF_ERROR(Send(t, 1, 9, Bytes(flag), kWait));
          FRUGAL_RETURN_IF_ERROR(send->Wait(kWait));
          RANK_EXPECT(send->bytes() == big.size() && send->peer() == 1);
          return Status::Ok();
        }
        FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 9, WBytes(flag), kWait));
        // The probe sees the waiting rendezvous message with its size.
        std::vector<std::byte> in(8192);
        FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 3, in, kWait));
        RANK_EXPECT(std::equal(small.begin(), small.end(), in.begin()));
        FRUGAL_ASSIGN_OR_RETURN(ProbeResult p, t.Probe(0, 3, kWait));
        RANK_EXPECT(p.bytes == big.size());
        std::unique_ptr<Work> recv = t.IRecv(0, 3, in);
        FRUGAL_RETURN_IF_ERROR(recv->Wait(kWait));
        RANK_EXPECT(recv->bytes() == big.size());
        RANK_EXPECT(std::equal(big.begin(), big.end(), in.begin()));
        return Status::Ok();
      },
      Rendezvous(1024));
  ExpectAllOk(statuses);
}

// Two ranks that each send a large message before receiving deadlock under MPI's rendezvous
// protocol; eager sends hide it. The rendezvous mode shows it: both sends time out, naming the
// peer.
TEST(InProcRendezvous, HeadToHeadLargeSendsDeadlockOnlyInRendezvousMode) {
  auto head_to_head = [](Transport& t) -> Status {
    const int peer = 1 - t.rank();
    const std::vector<std::byte> out = Pattern(1 << 16, t.rank());
    std::vector<std::byte> in(out.size());
    FRUGAL_RETURN_IF_ERROR(Send(t, peer, 5, out, 100ms));
    return Recv(t, peer, 5, in, kWait);
  };
  ExpectAllOk(RunRanks(2, head_to_head));
  auto statuses = RunRanks(2, head_to_head, Rendezvous(1 << 12));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kTimeout) << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(),
                HasSubstr("rank " + std::to_string(1 - r) + " did not take a message"));
  }
}

// A rendezvous send given up (timed out, or destroyed unfinished) no longer reads its buffer,
// which the sender overwrites and frees, but its message is still delivered, with the bytes it
// was started with, as over MPI.
TEST(InProcRendezvous, SendGivenUpIsStillDeliveredFromACopy) {
  auto statuses = RunRanks(
      2,
      [](Transport& t) -> Status {
        int flag = 0;
        if (t.rank() == 0) {
          for (int destroy = 0; destroy < 2; ++destroy) {
            std::vector<std::byte> out = Pattern(4096, 3 + destroy);
            std::unique_ptr<Work> send = t.ISend(1, 3, out);
            if (!destroy) {
              Status s = send->Wait(20ms);
              RANK_EXPECT(s.code() == StatusCode::kTimeout, s.ToString());
            }
            send.reset();
            std::fill(out.begin(), out.end(), std::byte{0xdd});
          }
          return Send(t, 1, 9, Bytes(flag), kWait);
        }
        FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 9, WBytes(flag), kWait));
        for (int destroy = 0; destroy < 2; ++destroy) {
          std::vector<std::byte> in(4096);
          FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 3, in, kWait));
          RANK_EXPECT(in == Pattern(4096, 3 + destroy), "message " + std::to_string(destroy));
        }
        return Status::Ok();
      },
      Rendezvous(1024));
  ExpectAllOk(statuses);
}

// A rank may send a rendezvous message to itself and receive it later.
TEST(InProcRendezvous, SendToSelf) {
  ExpectAllOk(RunRanks(
      1,
      [](Transport& t) -> Status {
        const std::vector<std::byte> out = Pattern(4096, 5);
        std::vector<std::byte> in(4096);
        std::unique_ptr<Work> send = t.ISend(0, 3, out);
        FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 3, in, kWait));
        FRUGAL_RETURN_IF_ERROR(send->Wait(kWait));
        RANK_EXPECT(in == out);
        return Status::Ok();
      },
      Rendezvous(16)));
}

// ---- Fault rules ----

// Rank 0's message number 1 to rank 1 with tag 5 is dropped; the others arrive in order.
TEST(InProcFaults, DropRemovesExactlyTheChosenMessage) {
  for (size_t rendezvous : {size_t{4}, std::numeric_limits<size_t>::max()}) {
    InProcOptions options = Rendezvous(rendezvous);
    options.faults.push_back(
        InProcFault{.kind = InProcFaultKind::kDrop, .src = 0, .dst = 1, .tag = 5, .first = 1});
    InProcWorld world(2, options);
    auto statuses = RunRanks(world, [](Transport& t) -> Status {
      if (t.rank() == 0) {
        for (int i = 0; i < 3; ++i) FRUGAL_RETURN_IF_ERROR(Send(t, 1, 5, Bytes(i), kWait));
        int other = 7;
        return Send(t, 1, 6, Bytes(other), kWait);  // another tag: not counted by the rule
      }
      int v = -1;
      FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 5, WBytes(v), kWait));
      RANK_EXPECT(v == 0);
      FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 5, WBytes(v), kWait));
      RANK_EXPECT(v == 2);
      FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 6, WBytes(v), kWait));
      Status missing = Recv(t, 0, 5, WBytes(v), 50ms);
      RANK_EXPECT(missing.code() == StatusCode::kTimeout, missing.ToString());
      return Status::Ok();
    });
    ExpectAllOk(statuses);
    EXPECT_EQ(world.faults_applied(), 1u);
  }
}

// A delayed message is invisible until its delay has passed, and later messages with its source
// and tag wait behind it; a message with another tag overtakes it.
TEST(InProcFaults, DelayedMessageKeepsTheOrderOfItsTag) {
  for (size_t rendezvous : {size_t{4}, std::numeric_limits<size_t>::max()}) {
    InProcOptions options = Rendezvous(rendezvous);
    options.faults.push_back(
        InProcFault{.kind = InProcFaultKind::kDelay, .src = 0, .dst = 1, .tag = 5, .delay = 300ms});
    Clock::time_point sent;  // written by rank 0 before its sends, read by rank 1 after them
    double delayed_by = 0.0;
    auto statuses = RunRanks(
        2,
        [&](Transport& t) -> Status {
          if (t.rank() == 0) {
            std::vector<int> values = {10, 11};
            std::vector<std::unique_ptr<Work>> sends;
            sent = Clock::now();
            for (int& v : values) sends.push_back(t.ISend(1, 5, Bytes(v)));
            int other = 12;
            FRUGAL_RETURN_IF_ERROR(Send(t, 1, 6, Bytes(other), kWait));
            for (auto& s : sends) FRUGAL_RETURN_IF_ERROR(s->Wait(kWait));
            return Status::Ok();
          }
          int v = -1;
          FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 6, WBytes(v), kWait));
          RANK_EXPECT(v == 12);
          // Both tag-5 messages have been sent (tag 6 came after them), neither is visible.
          RANK_EXPECT(!t.IProbe(0, 5)->has_value());
          FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 5, WBytes(v), kWait));
          delayed_by = SecondsSince(sent);
          RANK_EXPECT(v == 10);
          FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 5, WBytes(v), kWait));
          RANK_EXPECT(v == 11);
          return Status::Ok();
        },
        options);
    ExpectAllOk(statuses);
    EXPECT_GE(delayed_by, 0.3) << "rendezvous from " << rendezvous;
  }
}

// A corrupted message differs from the one sent in exactly one bit, the same bit for the same
// seed every time, in both protocols.
TEST(InProcFaults, CorruptionFlipsOneBitChosenBySeed) {
  auto flipped_bits = [](size_t rendezvous, uint64_t seed) {
    InProcOptions options = Rendezvous(rendezvous);
    options.faults.push_back(InProcFault{.kind = InProcFaultKind::kCorrupt, .seed = seed});
    std::vector<size_t> bits;
    auto statuses = RunRanks(
        2,
        [&](Transport& t) -> Status {
          const std::vector<std::byte> out = Pattern(1000, 9);
          if (t.rank() == 0) return Send(t, 1, 5, out, kWait);
          std::vector<std::byte> in(1000);
          FRUGAL_RETURN_IF_ERROR(Recv(t, 0, 5, in, kWait));
          for (size_t i = 0; i < in.size() * 8; ++i) {
            if (((in[i / 8] ^ out[i / 8]) & std::byte(1u << (i % 8))) != std::byte{0}) {
              bits.push_back(i);
            }
          }
          return Status::Ok();
        },
        options);
    ExpectAllOk(statuses);
    return bits;
  };
  const std::vector<size_t> eager = flipped_bits(std::numeric_limits<size_t>::max(), 7);
  ASSERT_EQ(eager.size(), 1u);
  EXPECT_EQ(flipped_bits(std::numeric_limits<size_t>::max(), 7), eager);
  EXPECT_EQ(flipped_bits(16, 7), eager);
  const std::vector<size_t> other = flipped_bits(16, 8);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other, eager);
}

// Rules count each sender's matching messages separately, in its own order.
TEST(InProcFaults, EverySenderCountsItsOwnMessages) {
  InProcOptions options;
  options.faults.push_back(
      InProcFault{.kind = InProcFaultKind::kDrop, .dst = 0, .tag = 5, .first = 1, .count = 2});
  InProcWorld world(3, options);
  auto statuses = RunRanks(world, [](Transport& t) -> Status {
    if (t.rank() != 0) {
      for (int i = 0; i < 4; ++i) {
        int v = t.rank() * 10 + i;
        FRUGAL_RETURN_IF_ERROR(Send(t, 0, 5, Bytes(v), kWait));
      }
      return Status::Ok();
    }
    for (int src : {1, 2}) {
      for (int want : {0, 3}) {
        int v = -1;
        FRUGAL_RETURN_IF_ERROR(Recv(t, src, 5, WBytes(v), kWait));
        RANK_EXPECT(v == src * 10 + want, std::to_string(v));
      }
    }
    return Status::Ok();
  });
  ExpectAllOk(statuses);
  EXPECT_EQ(world.faults_applied(), 4u);
}

TEST(InProcFaults, BadRulesThrow) {
  InProcOptions bad_rank;
  bad_rank.faults.push_back(InProcFault{.src = 3});
  EXPECT_THROW(InProcWorld(3, bad_rank), CheckError);
  InProcOptions bad_tag;
  bad_tag.faults.push_back(InProcFault{.tag = kMaxTag + 1});
  EXPECT_THROW(InProcWorld(3, bad_tag), CheckError);
}

}  // namespace
}  // namespace frugal
