// Tier 2: the MPI transport's peer copy (src/transport/mpi/peer_copy.h). Under `mpirun` with
// Open MPI's shared memory (vader) large messages and messages of exactly the descriptor's size
// travel as descriptors; over TCP alone (mpi_test_tcp) they do not. Every test holds either way:
// the semantics are MPI's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "mpi_test_main.h"
#include "transport/mpi/peer_copy.h"

namespace frugal {
namespace {

using mpi_internal::AllowedByJob;
using mpi_internal::Descriptor;
using mpi_internal::kPeerCopyBytes;
using mpitest::Neighbours;
using mpitest::TestWorld;

constexpr Duration kCopyTimeout = std::chrono::seconds(20);
constexpr int kCopyTag = 7;

std::vector<std::byte> CopyPattern(size_t size, int seed) {
  std::vector<std::byte> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = std::byte(static_cast<unsigned char>(i * 13 + seed));
  return data;
}

TEST(PeerCopyDescriptor, EncodesEveryFieldAndRejectsWhatItDidNotMake) {
  Descriptor d;
  d.sequence = 0x0102030405060708;
  d.region = PeerRegion{17, 99, 4096, (size_t{3} << 20) + 5};
  const auto bytes = d.Encode();
  ASSERT_EQ(bytes.size(), Descriptor::kBytes);
  const std::optional<Descriptor> back = Descriptor::Decode(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->sequence, d.sequence);
  EXPECT_EQ(back->region.segment, 17u);
  EXPECT_EQ(back->region.generation, 99u);
  EXPECT_EQ(back->region.offset, 4096u);
  EXPECT_EQ(back->region.bytes, (size_t{3} << 20) + 5);
  // Another size, or another first word, is not a descriptor.
  EXPECT_FALSE(Descriptor::Decode(std::span(bytes).first(Descriptor::kBytes - 1)).has_value());
  auto other = bytes;
  other[0] ^= std::byte{1};
  EXPECT_FALSE(Descriptor::Decode(other).has_value());
}

TEST(PeerCopyJob, FollowsOpenMpisBtlSelection) {
  const char* before = std::getenv("OMPI_MCA_btl");
  const std::string saved = before ? before : "";
  const std::vector<std::pair<const char*, bool>> cases = {
      {"", true},           {"tcp,self", false}, {"tcp,vader,self", true}, {"vader,self", true},
      {"self,sm", true},    {"^vader", false},   {"^tcp,openib", true},    {"^sm,tcp", false},
      {"tcp,vaderx", false}};
  for (const auto& [value, allowed] : cases) {
    setenv("OMPI_MCA_btl", value, 1);
    EXPECT_EQ(AllowedByJob(), allowed) << "OMPI_MCA_btl=" << value;
  }
  unsetenv("OMPI_MCA_btl");
  EXPECT_TRUE(AllowedByJob());
  if (before) setenv("OMPI_MCA_btl", saved.c_str(), 1);
}

// The ways a message leaves and arrives: staged, or in memory shared with the transport (mappable
// or not).
enum class Kind { kStaged, kSharedMappable, kSharedPlain };

std::unique_ptr<Work> SendAs(Transport& t, Kind kind, int dst, const std::vector<std::byte>& out) {
  if (kind == Kind::kStaged) return t.ISend(dst, kCopyTag, out);
  if (kind == Kind::kSharedMappable) {
    SharedBytes m = t.NewShared(out.size());
    std::copy(out.begin(), out.end(), m.bytes.begin());
    return t.ISendShared(dst, kCopyTag, m.owner, m.bytes);
  }
  auto plain = std::make_shared<std::vector<std::byte>>(out);
  return t.ISendShared(dst, kCopyTag, plain, *plain);
}

// Around the two sizes the peer copy cares about, every pair of kinds: each rank sends to its right
// neighbour into a receive 100 bytes larger than the message.
TEST(MpiPeerCopy, EverySizeAndKindArrivesWhole) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const auto [left, right] = Neighbours(*t);
  const std::vector<size_t> sizes = {Descriptor::kBytes - 1, Descriptor::kBytes,
                                     Descriptor::kBytes + 1, kPeerCopyBytes - 1,
                                     kPeerCopyBytes,         (size_t{3} << 20) + 5};
  int seed = 0;
  for (size_t size : sizes) {
    for (Kind send_kind : {Kind::kStaged, Kind::kSharedMappable, Kind::kSharedPlain}) {
      for (bool shared_receive : {false, true}) {
        ++seed;
        const uint64_t sent_before = t->bytes_sent();
        SharedBytes in = t->NewShared(size + 100);
        std::fill(in.bytes.begin(), in.bytes.end(), std::byte{0xee});
        std::vector<std::byte> plain_in(size + 100, std::byte{0xee});
        auto recv = shared_receive ? t->IRecvShared(left, kCopyTag, in.owner, in.bytes)
                                   : t->IRecv(left, kCopyTag, plain_in);
        auto send = SendAs(*t, send_kind, right, CopyPattern(size, t->rank() * 100 + seed));
        ASSERT_TRUE(recv->Wait(kCopyTimeout).ok()) << size;
        ASSERT_TRUE(send->Wait(kCopyTimeout).ok()) << size;
        EXPECT_EQ(recv->bytes(), size);
        EXPECT_EQ(recv->peer(), left);
        EXPECT_EQ(t->bytes_sent() - sent_before, size);
        const std::span<const std::byte> got = shared_receive
                                                   ? std::span<const std::byte>(in.bytes)
                                                   : std::span<const std::byte>(plain_in);
        const auto expected = CopyPattern(size, left * 100 + seed);
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got.begin()))
            << "size " << size << ", send kind " << static_cast<int>(send_kind)
            << ", shared receive " << shared_receive;
        EXPECT_TRUE(std::all_of(got.begin() + static_cast<ptrdiff_t>(size), got.end(),
                                [](std::byte b) { return b == std::byte{0xee}; }))
            << "bytes past the message were written";
      }
    }
  }
}

// Probe and IProbe tell the size of the message, not of what carries it; the receive of exactly
// that size gets it, in the order sent.
TEST(MpiPeerCopy, ProbeTellsTheSizeOfEveryMessage) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const auto [left, right] = Neighbours(*t);
  const std::vector<size_t> sizes = {Descriptor::kBytes, kPeerCopyBytes + 3, 10, size_t{1} << 20,
                                     Descriptor::kBytes};
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::unique_ptr<Work>> sends;
  for (size_t i = 0; i < sizes.size(); ++i) {
    outs.push_back(CopyPattern(sizes[i], t->rank() + static_cast<int>(i)));
    sends.push_back(t->ISend(right, kCopyTag, outs.back()));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    StatusOr<ProbeResult> probe = i % 2 == 0 ? t->Probe(kAnySource, kCopyTag, kCopyTimeout)
                                             : t->Probe(left, kCopyTag, kCopyTimeout);
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    EXPECT_EQ(probe->source, left);
    EXPECT_EQ(probe->bytes, sizes[i]);
    // Asked again, the same message.
    StatusOr<std::optional<ProbeResult>> again = t->IProbe(left, kCopyTag);
    ASSERT_TRUE(again.ok() && again->has_value());
    EXPECT_EQ((*again)->bytes, sizes[i]);
    std::vector<std::byte> in(probe->bytes);
    auto recv = i % 2 == 0 ? t->IRecv(kAnySource, kCopyTag, in) : t->IRecv(left, kCopyTag, in);
    ASSERT_TRUE(recv->Wait(kCopyTimeout).ok());
    EXPECT_EQ(recv->bytes(), sizes[i]);
    EXPECT_TRUE(in == CopyPattern(sizes[i], left + static_cast<int>(i))) << "message " << i;
  }
  for (auto& send : sends) EXPECT_TRUE(send->Wait(kCopyTimeout).ok());
}

// Each rank waits for its own send before it looks at its receive: the receive must still complete
// while the rank waits, as MPI's own large messages do.
TEST(MpiPeerCopy, ASendCompletesWhileItsReceiverWaitsForItsOwnSend) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const auto [left, right] = Neighbours(*t);
  const size_t size = size_t{2} << 20;
  std::vector<std::byte> in(size);
  auto recv = t->IRecv(left, kCopyTag, in);
  const auto out = CopyPattern(size, t->rank());
  auto send = t->ISend(right, kCopyTag, out);
  Status sent = send->Wait(kCopyTimeout);
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  ASSERT_TRUE(recv->Wait(kCopyTimeout).ok());
  EXPECT_TRUE(in == CopyPattern(size, left));
}

// Receives waited for in the reverse of the order they were posted still get the messages in the
// order they were sent.
TEST(MpiPeerCopy, ReceivesWaitedForInAnyOrderKeepTheSendOrder) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const auto [left, right] = Neighbours(*t);
  const std::vector<size_t> sizes = {size_t{1} << 20, kPeerCopyBytes, Descriptor::kBytes, 300};
  std::vector<std::vector<std::byte>> ins;
  std::vector<std::unique_ptr<Work>> recvs;
  for (size_t size : sizes) ins.emplace_back(size + 8);
  for (auto& in : ins) recvs.push_back(t->IRecv(left, kCopyTag, in));
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::unique_ptr<Work>> sends;
  for (size_t i = 0; i < sizes.size(); ++i) {
    outs.push_back(CopyPattern(sizes[i], 50 * t->rank() + static_cast<int>(i)));
    sends.push_back(t->ISend(right, kCopyTag, outs.back()));
  }
  for (size_t i = sizes.size(); i-- > 0;) {
    ASSERT_TRUE(recvs[i]->Wait(kCopyTimeout).ok());
    EXPECT_EQ(recvs[i]->bytes(), sizes[i]);
    const auto expected = CopyPattern(sizes[i], 50 * left + static_cast<int>(i));
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), ins[i].begin())) << "message " << i;
  }
  for (auto& send : sends) EXPECT_TRUE(send->Wait(kCopyTimeout).ok());
}

// A message larger than its receive buffer fails the receive (kMalformed) and leaves the buffer's
// sender free: its send completes, and the next message arrives.
TEST(MpiPeerCopy, AMessageLargerThanTheBufferIsMalformedAndTheSenderGoesOn) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  const auto [left, right] = Neighbours(*t);
  std::vector<std::byte> small(size_t{512} << 10);
  auto recv = t->IRecv(left, kCopyTag, small);
  const auto out = CopyPattern(size_t{1} << 20, t->rank());
  auto send = t->ISend(right, kCopyTag, out);
  Status received = recv->Wait(kCopyTimeout);
  EXPECT_EQ(received.code(), StatusCode::kMalformed) << received.ToString();
  EXPECT_NE(received.message().find("larger than the receive buffer"), std::string::npos)
      << received.message();
  EXPECT_TRUE(send->Wait(kCopyTimeout).ok());
  const auto next = CopyPattern(kPeerCopyBytes, t->rank() + 1);
  std::vector<std::byte> in(kPeerCopyBytes);
  auto recv2 = t->IRecv(left, kCopyTag, in);
  auto send2 = t->ISend(right, kCopyTag, next);
  ASSERT_TRUE(recv2->Wait(kCopyTimeout).ok());
  ASSERT_TRUE(send2->Wait(kCopyTimeout).ok());
  EXPECT_TRUE(in == CopyPattern(kPeerCopyBytes, left + 1));
}

}  // namespace
}  // namespace frugal
