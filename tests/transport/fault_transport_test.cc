// The fault-injecting transport wrapper: nothing changes until the fault is armed; then exactly
// one message - the first that the chooser accepts, counting split children - is lost or sent
// with one bit flipped, and later messages pass unchanged.
#include "frugal/fault_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "frugal/inproc_transport.h"

namespace frugal {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> Message(uint8_t first, size_t size = 16) {
  std::vector<std::byte> m(size, std::byte{7});
  m[0] = std::byte{first};
  return m;
}

// Rank 0 sends the messages (message i with tag 5 + i) through a wrapper of `fault`, armed before
// the second one; rank 1 receives each with a short timeout. Returns what rank 1 got, empty for a
// message that did not arrive.
std::vector<std::vector<std::byte>> Exchange(std::shared_ptr<TransportFault> fault,
                                             const std::vector<std::vector<std::byte>>& sent,
                                             bool through_split = false) {
  std::vector<std::vector<std::byte>> got(sent.size());
  RunRanks(2, [&](Transport& t) -> Status {
    std::unique_ptr<Transport> wrapped = WithTransportFault(t, fault);
    std::unique_ptr<Transport> child;
    Transport* use = wrapped.get();
    if (through_split) {
      FRUGAL_ASSIGN_OR_RETURN(child, wrapped->Split(0, t.rank(), 5s));
      use = child.get();
    }
    for (size_t i = 0; i < sent.size(); ++i) {
      if (t.rank() == 0) {
        if (i == 1) fault->Arm();
        EXPECT_TRUE(Send(*use, 1, 5 + static_cast<int>(i), sent[i], 5s).ok());
      } else {
        std::vector<std::byte> in(sent[i].size());
        if (Recv(*use, 0, 5 + static_cast<int>(i), in, 300ms).ok()) got[i] = in;
      }
    }
    return Status::Ok();
  });
  return got;
}

TEST(FaultTransport, DropLosesTheFirstMessageAfterArming) {
  auto fault = std::make_shared<TransportFault>(TransportFault::Kind::kDrop, nullptr);
  const std::vector<std::vector<std::byte>> sent = {Message(1), Message(2), Message(3)};
  std::vector<std::vector<std::byte>> got = Exchange(fault, sent);
  EXPECT_EQ(got[0], sent[0]);
  EXPECT_TRUE(got[1].empty());
  EXPECT_EQ(got[2], sent[2]);
  EXPECT_TRUE(fault->fired());
}

TEST(FaultTransport, CorruptFlipsOneBitOfTheFirstChosenMessage) {
  // Only messages that start with 0xAB qualify; bit 12 (byte 1, bit 4) is flipped.
  auto fault = std::make_shared<TransportFault>(
      TransportFault::Kind::kCorrupt,
      [](std::span<const std::byte> data) -> std::optional<uint64_t> {
        if (data.empty() || data[0] != std::byte{0xAB}) return std::nullopt;
        return 12;
      });
  const std::vector<std::vector<std::byte>> sent = {Message(0xAB), Message(1), Message(0xAB),
                                                    Message(0xAB)};
  std::vector<std::vector<std::byte>> got = Exchange(fault, sent);
  EXPECT_EQ(got[0], sent[0]);  // before arming
  EXPECT_EQ(got[1], sent[1]);  // not chosen
  std::vector<std::byte> expected = sent[2];
  expected[1] ^= std::byte{0x10};
  EXPECT_EQ(got[2], expected);
  EXPECT_EQ(got[3], sent[3]);  // once only
  EXPECT_TRUE(fault->fired());
}

TEST(FaultTransport, SplitChildrenShareTheFault) {
  auto fault = std::make_shared<TransportFault>(TransportFault::Kind::kDrop, nullptr);
  const std::vector<std::vector<std::byte>> sent = {Message(1), Message(2), Message(3)};
  std::vector<std::vector<std::byte>> got = Exchange(fault, sent, /*through_split=*/true);
  EXPECT_EQ(got[0], sent[0]);
  EXPECT_TRUE(got[1].empty());
  EXPECT_EQ(got[2], sent[2]);
  EXPECT_TRUE(fault->fired());
}

TEST(FaultTransport, NothingHappensUnarmed) {
  auto fault = std::make_shared<TransportFault>(TransportFault::Kind::kDrop, nullptr);
  std::vector<std::vector<std::byte>> got;
  RunRanks(2, [&](Transport& t) -> Status {
    std::unique_ptr<Transport> wrapped = WithTransportFault(t, fault);
    std::vector<std::byte> m = Message(9);
    if (t.rank() == 0) return Send(*wrapped, 1, 5, m, 5s);
    std::vector<std::byte> in(m.size());
    FRUGAL_RETURN_IF_ERROR(Recv(*wrapped, 0, 5, in, 5s));
    EXPECT_EQ(in, m);
    EXPECT_EQ(wrapped->bytes_sent(), t.bytes_sent());
    return Status::Ok();
  });
  EXPECT_FALSE(fault->fired());
}

}  // namespace
}  // namespace frugal
