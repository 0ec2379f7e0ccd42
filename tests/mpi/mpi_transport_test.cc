// Tier 2: the MPI transport across real processes (run under `mpirun -np 4`).
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "frugal/timer.h"
#include "mpi_test_main.h"

namespace frugal {
namespace {

using mpitest::TestWorld;

constexpr Duration kTransportTimeout = std::chrono::seconds(20);

std::vector<std::byte> TransportPattern(size_t size, int seed) {
  std::vector<std::byte> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = std::byte(static_cast<unsigned char>(i * 31 + seed));
  return data;
}

using mpitest::Neighbours;

TEST(MpiTransport, RankSizeAndHostname) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->size(), mpitest::Runtime().world_size());
  EXPECT_EQ(t->rank(), mpitest::Runtime().world_rank());
  EXPECT_GE(t->size(), 2) << "tier-2 suites expect several ranks";
  // All ranks of this job run on this machine.
  std::array<char, 256> host{};
  ASSERT_EQ(gethostname(host.data(), host.size() - 1), 0);
  EXPECT_EQ(t->hostname(), std::string(host.data()));
  // ... so every rank counts all of them as sharing its cores.
  EXPECT_EQ(mpitest::Runtime().ranks_on_this_machine(), t->size());
  // A core for each of them when the job has no more ranks than the cores its ranks may run on
  // (mpirun binds nothing when it oversubscribes, so those are the machine's cores); a group split
  // off alone answers for the whole machine, not for its one rank.
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  const bool expected = t->size() <= static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(t->CoreForEachRank(), expected)
      << t->size() << " ranks, " << std::thread::hardware_concurrency() << " cores, "
      << CPU_COUNT(&mask) << " in this rank's mask";
  auto alone = t->Split(t->rank(), 0, kTransportTimeout);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ((*alone)->size(), 1);
  EXPECT_EQ((*alone)->CoreForEachRank(), expected);
}

// Every rank sends to its right neighbour and receives from its left one, for sizes from 0
// bytes to 4 MiB (eager and rendezvous protocols), and checks contents and counters.
TEST(MpiTransport, RingExchangeOfManySizes) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const auto [left, right] = Neighbours(*t);
  uint64_t expected_bytes = 0;
  for (size_t size : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{65537}, size_t{1} << 20,
                      size_t{4} << 20}) {
    auto out = TransportPattern(size, t->rank());
    std::vector<std::byte> in(size, std::byte{0xee});
    auto recv = t->IRecv(left, 5, in);
    auto send = t->ISend(right, 5, out);
    ASSERT_TRUE(recv->Wait(kTransportTimeout).ok());
    ASSERT_TRUE(send->Wait(kTransportTimeout).ok());
    EXPECT_EQ(recv->bytes(), size);
    EXPECT_EQ(recv->peer(), left);
    EXPECT_EQ(send->bytes(), size);
    EXPECT_EQ(send->peer(), right);
    EXPECT_TRUE(in == TransportPattern(size, left)) << "size " << size;
    expected_bytes += size;
  }
  EXPECT_EQ(t->bytes_sent(), expected_bytes);
  EXPECT_EQ(t->messages_sent(), 7u);
}

// The same ring with shared memory on one side or both: ISendShared from memory of NewShared,
// IRecvShared into it, each mixed with a plain IRecv/ISend on the other side. The bytes arrive
// in the shared memory itself, and the memory stays with the Work until it has completed.
TEST(MpiTransport, SharedSendsAndReceivesMixWithPlainOnes) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const auto [left, right] = Neighbours(*t);
  uint64_t expected_bytes = 0;
  int tag = 6;
  for (size_t size : {size_t{0}, size_t{7}, size_t{65537}, size_t{4} << 20}) {
    for (int shape = 0; shape < 3; ++shape) {  // 0: both shared, 1: shared send, 2: shared recv
      const bool shared_send = shape != 2;
      const bool shared_recv = shape != 1;
      const std::vector<std::byte> pattern = TransportPattern(size, t->rank() + 10 * shape);
      SharedBytes out = t->NewShared(size);
      ASSERT_EQ(out.bytes.size(), size);
      std::copy(pattern.begin(), pattern.end(), out.bytes.begin());
      SharedBytes in = t->NewShared(size);
      std::fill(in.bytes.begin(), in.bytes.end(), std::byte{0xee});
      std::vector<std::byte> plain_in(size, std::byte{0xee});
      std::unique_ptr<Work> recv = shared_recv ? t->IRecvShared(left, tag, in.owner, in.bytes)
                                               : t->IRecv(left, tag, plain_in);
      if (shared_recv) {
        EXPECT_EQ(in.owner.use_count(), 2) << "the receive holds its memory";
      }
      std::unique_ptr<Work> send = shared_send ? t->ISendShared(right, tag, out.owner, out.bytes)
                                               : t->ISend(right, tag, out.bytes);
      ASSERT_TRUE(recv->Wait(kTransportTimeout).ok());
      ASSERT_TRUE(send->Wait(kTransportTimeout).ok());
      EXPECT_EQ(recv->bytes(), size);
      EXPECT_EQ(recv->peer(), left);
      EXPECT_EQ(send->bytes(), size);
      const std::span<const std::byte> got =
          shared_recv ? std::span<const std::byte>(in.bytes) : std::span<const std::byte>(plain_in);
      const std::vector<std::byte> expected = TransportPattern(size, left + 10 * shape);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin(), expected.end()))
          << "size " << size << " shape " << shape;
      recv.reset();
      EXPECT_EQ(in.owner.use_count(), 1) << "the finished receive kept its memory";
      expected_bytes += size;
      ++tag;
    }
  }
  EXPECT_EQ(t->bytes_sent(), expected_bytes);
}

TEST(MpiTransport, BlockingHelpers) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const int n = t->size();
  std::vector<int> out = {t->rank(), t->rank() * 10};
  std::vector<int> in(2, -1);
  const int right = (t->rank() + 1) % n;
  const int left = (t->rank() + n - 1) % n;
  ASSERT_TRUE(SendRecv(*t, right, AsBytes(std::span<const int>(out)), left,
                       AsWritableBytes(std::span<int>(in)), 9, kTransportTimeout)
                  .ok());
  EXPECT_EQ(in[0], left);
  EXPECT_EQ(in[1], left * 10);
}

TEST(MpiTransport, AnySourceTellsThePeer) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() == 0) {
    std::set<int> peers;
    for (int i = 1; i < t->size(); ++i) {
      int value = -1;
      auto recv = t->IRecv(kAnySource, 3, AsWritableBytes(std::span<int>(&value, 1)));
      ASSERT_TRUE(recv->Wait(kTransportTimeout).ok());
      EXPECT_EQ(value, recv->peer() * 100);
      peers.insert(recv->peer());
    }
    EXPECT_EQ(peers.size(), static_cast<size_t>(t->size() - 1));
  } else {
    int value = t->rank() * 100;
    ASSERT_TRUE(Send(*t, 0, 3, AsBytes(std::span<const int>(&value, 1)), kTransportTimeout).ok());
  }
}

// Messages between one pair with one tag arrive in the order they were sent, even when the
// receives are all posted before any message arrives.
TEST(MpiTransport, NonOvertaking) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  constexpr int kCount = 200;
  if (t->rank() == 1) {
    std::vector<int> values(kCount);
    std::iota(values.begin(), values.end(), 0);
    std::vector<std::unique_ptr<Work>> sends;
    for (int i = 0; i < kCount; ++i) {
      sends.push_back(t->ISend(0, 11, AsBytes(std::span<const int>(&values[i], 1))));
    }
    for (auto& s : sends) ASSERT_TRUE(s->Wait(kTransportTimeout).ok());
  } else if (t->rank() == 0) {
    std::vector<int> values(kCount, -1);
    std::vector<std::unique_ptr<Work>> recvs;
    for (int i = 0; i < kCount; ++i) {
      recvs.push_back(t->IRecv(1, 11, AsWritableBytes(std::span<int>(&values[i], 1))));
    }
    for (auto& r : recvs) ASSERT_TRUE(r->Wait(kTransportTimeout).ok());
    for (int i = 0; i < kCount; ++i) EXPECT_EQ(values[i], i);
  }
}

TEST(MpiTransport, ShorterMessageThanBufferReportsItsSize) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() == 1) {
    auto out = TransportPattern(100, 1);
    ASSERT_TRUE(Send(*t, 0, 4, out, kTransportTimeout).ok());
  } else if (t->rank() == 0) {
    std::vector<std::byte> in(1000);
    auto recv = t->IRecv(1, 4, in);
    ASSERT_TRUE(recv->Wait(kTransportTimeout).ok());
    EXPECT_EQ(recv->bytes(), 100u);
    EXPECT_TRUE(std::equal(in.begin(), in.begin() + 100, TransportPattern(100, 1).begin()));
  }
}

TEST(MpiTransport, LongerMessageThanBufferIsMalformed) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() == 1) {
    auto out = TransportPattern(100, 1);
    // The send completes whether or not the receiver truncates.
    ASSERT_TRUE(Send(*t, 0, 4, out, kTransportTimeout).ok());
  } else if (t->rank() == 0) {
    std::vector<std::byte> in(10);
    Status s = Recv(*t, 1, 4, in, kTransportTimeout);
    EXPECT_EQ(s.code(), StatusCode::kMalformed) << s.ToString();
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  }
  // The transport still works after a truncated message.
  int token = 7;
  if (t->rank() == 1) {
    ASSERT_TRUE(Send(*t, 0, 6, AsBytes(std::span<const int>(&token, 1)), kTransportTimeout).ok());
  } else if (t->rank() == 0) {
    int got = 0;
    ASSERT_TRUE(Recv(*t, 1, 6, AsWritableBytes(std::span<int>(&got, 1)), kTransportTimeout).ok());
    EXPECT_EQ(got, 7);
  }
}

TEST(MpiTransport, ProbeAndIProbe) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() == 2) {
    auto out = TransportPattern(333, 2);
    ASSERT_TRUE(Send(*t, 0, 21, out, kTransportTimeout).ok());
  } else if (t->rank() == 0) {
    EXPECT_FALSE(t->IProbe(2, 22)->has_value());
    auto found = t->Probe(kAnySource, 21, kTransportTimeout);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(found->source, 2);
    EXPECT_EQ(found->tag, 21);
    EXPECT_EQ(found->bytes, 333u);
    auto again = t->IProbe(2, 21);
    ASSERT_TRUE(again.ok() && again->has_value());
    EXPECT_EQ((*again)->bytes, 333u);
    std::vector<std::byte> in(found->bytes);
    ASSERT_TRUE(Recv(*t, 2, 21, in, kTransportTimeout).ok());
    EXPECT_TRUE(in == TransportPattern(333, 2));
    EXPECT_FALSE(t->IProbe(2, 21)->has_value());
  }
}

TEST(MpiTransport, ProbeTimesOut) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  Stopwatch watch;
  auto found = t->Probe((t->rank() + 1) % t->size(), 23, std::chrono::milliseconds(150));
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kTimeout);
  EXPECT_GE(watch.Seconds(), 0.14);
  EXPECT_LT(watch.Seconds(), 5.0);
}

// A receive from a rank that never sends times out, naming that rank, and returns promptly.
TEST(MpiTransport, ReceiveTimeoutNamesThePeer) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() == 0) {
    std::vector<std::byte> in(16);
    Stopwatch watch;
    Status s = Recv(*t, 3 % t->size(), 24, in, std::chrono::milliseconds(300));
    EXPECT_EQ(s.code(), StatusCode::kTimeout);
    EXPECT_NE(s.message().find("no message from rank " + std::to_string(3 % t->size())),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("300 ms"), std::string::npos) << s.message();
    EXPECT_GE(watch.Seconds(), 0.29);
    EXPECT_LT(watch.Seconds(), 5.0);
  }
}

TEST(MpiTransport, SplitFormsOrderedGroups) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const int n = t->size();
  const int color = t->rank() % 2;
  // Negative keys order the group in reverse.
  auto child = t->Split(color, -t->rank(), kTransportTimeout);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Transport& c = **child;
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  ASSERT_EQ(c.size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[c.rank()], t->rank());
  EXPECT_EQ(c.hostname(), t->hostname());

  // Messages in the child never match receives of the parent with the same tag.
  const uint64_t before = t->bytes_sent();
  int value = t->rank();
  std::vector<int> got(c.size(), -1);
  std::vector<std::unique_ptr<Work>> works;
  for (int r = 0; r < c.size(); ++r) {
    works.push_back(c.IRecv(r, 1, AsWritableBytes(std::span<int>(&got[r], 1))));
  }
  for (int r = 0; r < c.size(); ++r) {
    works.push_back(c.ISend(r, 1, AsBytes(std::span<const int>(&value, 1))));
  }
  for (auto& w : works) ASSERT_TRUE(w->Wait(kTransportTimeout).ok());
  for (int r = 0; r < c.size(); ++r) EXPECT_EQ(got[r], members[r]);
  EXPECT_FALSE(t->IProbe(kAnySource, 1)->has_value());
  // Bytes sent through the child are counted by the parent too.
  EXPECT_EQ(t->bytes_sent() - before, sizeof(int) * c.size());
  EXPECT_EQ(c.bytes_sent(), t->bytes_sent());

  // A split of a split, with colors that are not small or positive.
  auto grandchild = c.Split(c.rank() == 0 ? -5 : 1 << 20, 0, kTransportTimeout);
  ASSERT_TRUE(grandchild.ok()) << grandchild.status().ToString();
  EXPECT_EQ((*grandchild)->size(), c.rank() == 0 ? 1 : c.size() - 1);
}

// When one rank never calls Split, the others get kTransportTimeout naming it.
TEST(MpiTransport, SplitTimeoutNamesTheAbsentRank) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const int absent = t->size() - 1;
  if (t->rank() != absent) {
    Stopwatch watch;
    auto child = t->Split(0, 0, std::chrono::milliseconds(300));
    ASSERT_FALSE(child.ok());
    EXPECT_EQ(child.status().code(), StatusCode::kTimeout);
    EXPECT_NE(child.status().message().find("rank " + std::to_string(absent)), std::string::npos)
        << child.status().message();
    EXPECT_LT(watch.Seconds(), 5.0);
  }
  // Keep the absent rank away until the others have given up.
  auto sync = TestWorld();
  ASSERT_NE(sync, nullptr);
}

}  // namespace
}  // namespace frugal

namespace frugal {
namespace {

// A message longer than INT_MAX bytes (one MPI message through a derived datatype). Needs
// about 9 GB of memory on ranks 0 and 1 (their buffers and the transport's staging copies);
// registered separately with the label "long".
TEST(MpiTransportLarge, MessageLongerThanIntMax) {
  auto t = mpitest::TestWorld();
  ASSERT_NE(t, nullptr);
  const size_t size = (size_t{1} << 31) + 4099;
  auto mark = [](size_t i) { return std::byte(static_cast<unsigned char>((i >> 20) ^ i)); };
  const std::vector<size_t> probes = {
      0,       1, (size_t{1} << 30) - 1, size_t{1} << 30, (size_t{1} << 31) - 1, size_t{1} << 31,
      size - 1};
  if (t->rank() == 1) {
    std::vector<std::byte> out(size, std::byte{0x5a});
    for (size_t i : probes) out[i] = mark(i);
    ASSERT_TRUE(Send(*t, 0, 2, out, std::chrono::seconds(60)).ok());
    EXPECT_EQ(t->bytes_sent(), size);
  } else if (t->rank() == 0) {
    std::vector<std::byte> in(size + 10, std::byte{0});
    auto recv = t->IRecv(1, 2, in);
    Status s = recv->Wait(std::chrono::seconds(60));
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(recv->bytes(), size);
    for (size_t i : probes) EXPECT_EQ(in[i], mark(i)) << i;
    EXPECT_EQ(in[size / 2 + 3], std::byte{0x5a});
    EXPECT_EQ(in[size], std::byte{0});
  }
}

}  // namespace
}  // namespace frugal
