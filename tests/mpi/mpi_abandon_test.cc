// Tier 2: operations of the MPI transport that their owner gave up on (a Wait that timed out, a
// Work destroyed before it completed). The caller may reuse or free its buffers at once: MPI must
// never read or write them afterwards, whatever arrives later.
//
// MpiTransportAbandoned runs in the 4-rank job over shared memory and TCP. MpiTransportTcp needs
// the TCP transport only (registered as its own job): there a large message moves in fragments
// that need the sender's progress, so a receive can be matched and still incomplete when it
// times out. The sender stays out of MPI until the receiver has given up; it waits on a FIFO
// (a gate outside MPI, opened by rank 0) instead of an MPI message, which would make progress.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "frugal/transport.h"
#include "mpi_test_main.h"

namespace frugal {
namespace {

using mpitest::AbandonedOperationsComplete;
using mpitest::TestWorld;

using mpitest::kTimeout;
// Above every eager limit of Open MPI's transports: sent with the rendezvous protocol.
constexpr size_t kBig = size_t{4} << 20;
constexpr int kDataTag = 40;
constexpr int kGoTag = 41;
constexpr int kAbandonDoneTag = 42;

std::vector<std::byte> AbandonPattern(size_t size, int seed) {
  std::vector<std::byte> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = std::byte(static_cast<unsigned char>(i * 7 + seed));
  return data;
}

Status SendByte(Transport& t, int dst, int tag) {
  std::byte b{1};
  return Send(t, dst, tag, {&b, 1}, kTimeout);
}

Status RecvByte(Transport& t, int src, int tag) {
  std::byte b{0};
  return Recv(t, src, tag, {&b, 1}, kTimeout);
}

// Rank 1 starts a large send that rank 0 has not asked for yet, gives up on it (a timed-out Wait,
// or the Work destroyed unfinished), overwrites and frees the buffer, and fills new memory of the
// same size. Only then does rank 0 receive: it gets the bytes the send started with.
TEST(MpiTransportAbandoned, GivenUpSendDeliversTheBytesItStartedWith) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  for (int destroy_unfinished = 0; destroy_unfinished < 2; ++destroy_unfinished) {
    const int tag = kDataTag + 10 * destroy_unfinished;
    if (t->rank() == 1) {
      std::vector<std::byte> reuse;
      {
        std::vector<std::byte> out = AbandonPattern(kBig, 1);
        std::unique_ptr<Work> send = t->ISend(0, tag, out);
        if (!destroy_unfinished) {
          Status s = send->Wait(std::chrono::milliseconds(100));
          EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
          EXPECT_NE(s.message().find("rank 0 did not take a message"), std::string::npos)
              << s.message();
        }
        send.reset();
        std::fill(out.begin(), out.end(), std::byte{0xdd});
      }
      // The runtime holds the send until rank 0 takes it.
      EXPECT_EQ(mpitest::Runtime().abandoned_operations(), 1u);
      reuse.assign(kBig, std::byte{0xcc});
      ASSERT_TRUE(SendByte(*t, 0, kGoTag).ok());
      // Waiting for rank 0 keeps this rank's MPI progressing, so the late message can move.
      ASSERT_TRUE(RecvByte(*t, 0, kAbandonDoneTag).ok());
      EXPECT_TRUE(AbandonedOperationsComplete(kTimeout));
    } else if (t->rank() == 0) {
      ASSERT_TRUE(RecvByte(*t, 1, kGoTag).ok());
      std::vector<std::byte> in(kBig, std::byte{0});
      std::unique_ptr<Work> recv = t->IRecv(1, tag, in);
      Status s = recv->Wait(kTimeout);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(recv->bytes(), kBig);
      EXPECT_TRUE(in == AbandonPattern(kBig, 1))
          << "the message changed after its send was given up";
      ASSERT_TRUE(SendByte(*t, 1, kAbandonDoneTag).ok());
    }
  }
}

// A receive given up before any message matched it takes nothing: the message sent afterwards
// goes to the next receive with that tag.
TEST(MpiTransportAbandoned, GivenUpUnmatchedReceiveLeavesTheMessageForTheNextOne) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() == 0) {
    for (int destroy_unfinished = 0; destroy_unfinished < 2; ++destroy_unfinished) {
      std::vector<std::byte> gone(kBig, std::byte{0});
      std::unique_ptr<Work> recv = t->IRecv(1, kDataTag, gone);
      if (!destroy_unfinished) {
        EXPECT_EQ(recv->Wait(std::chrono::milliseconds(100)).code(), StatusCode::kTimeout);
      }
      recv.reset();
      std::fill(gone.begin(), gone.end(), std::byte{0x55});
      // The receive was cancelled: MPI completes it at once.
      EXPECT_TRUE(AbandonedOperationsComplete(kTimeout));
      ASSERT_TRUE(SendByte(*t, 1, kGoTag).ok());
      std::vector<std::byte> in(kBig, std::byte{0});
      ASSERT_TRUE(Recv(*t, 1, kDataTag, in, kTimeout).ok());
      EXPECT_TRUE(in == AbandonPattern(kBig, 1));
      EXPECT_TRUE(
          std::all_of(gone.begin(), gone.end(), [](std::byte b) { return b == std::byte{0x55}; }));
    }
  } else if (t->rank() == 1) {
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(RecvByte(*t, 0, kGoTag).ok());
      const std::vector<std::byte> out = AbandonPattern(kBig, 1);
      ASSERT_TRUE(Send(*t, 0, kDataTag, out, kTimeout).ok());
    }
  }
}

// A gate outside MPI between two processes of this machine: a FIFO made by rank 0.
class Gate {
 public:
  // Rank 0: makes the FIFO and keeps it open (so that a byte written stays until it is read).
  static Gate Make() {
    Gate gate;
    char dir[] = "/tmp/frugal-gate-XXXXXX";
    if (mkdtemp(dir) == nullptr) return gate;
    gate.dir_ = dir;
    gate.path_ = gate.dir_ + "/fifo";
    if (mkfifo(gate.path_.c_str(), 0600) != 0) return gate;
    gate.fd_ = open(gate.path_.c_str(), O_RDWR | O_NONBLOCK);
    return gate;
  }
  // Other ranks: opens the FIFO made by rank 0 for reading.
  static Gate Join(const std::string& path) {
    Gate gate;
    gate.path_ = path;
    gate.fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK);
    return gate;
  }
  Gate(Gate&& other) noexcept
      : dir_(std::move(other.dir_)), path_(std::move(other.path_)), fd_(other.fd_) {
    other.fd_ = -1;
    other.dir_.clear();
  }
  ~Gate() {
    if (fd_ >= 0) close(fd_);
    if (!dir_.empty()) {
      unlink(path_.c_str());
      rmdir(dir_.c_str());
    }
  }
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  bool Open() const {
    const char c = 1;
    return write(fd_, &c, 1) == 1;
  }
  // Blocks (without calling MPI) until the gate opens or `timeout` passes.
  bool WaitOpen(Duration timeout) const {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
    char c = 0;
    return read(fd_, &c, 1) == 1;
  }

 private:
  Gate() = default;
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

// Rank 0 of the tests below: tells rank 1 where `gate` is and waits until rank 1 holds it open.
void ShareGate(Transport& t, const Gate& gate) {
  ASSERT_TRUE(gate.ok()) << "cannot make a FIFO under /tmp";
  const std::string& path = gate.path();
  ASSERT_TRUE(
      Send(t, 1, kGoTag, AsBytes(std::span<const char>(path.data(), path.size())), kTimeout).ok());
  ASSERT_TRUE(RecvByte(t, 1, kGoTag).ok());
}

// Rank 1 of the tests below: learns the gate from rank 0, starts a large send of
// AbandonPattern(seed) and stays out of MPI until rank 0 opens the gate; then completes the send
// and says so.
void LateSender(Transport& t, int seed) {
  std::vector<char> path(4096);
  std::unique_ptr<Work> recv =
      t.IRecv(0, kGoTag, AsWritableBytes(std::span<char>(path.data(), path.size())));
  ASSERT_TRUE(recv->Wait(kTimeout).ok());
  Gate gate = Gate::Join(std::string(path.data(), recv->bytes()));
  ASSERT_TRUE(gate.ok());
  ASSERT_TRUE(SendByte(t, 0, kGoTag).ok());
  const std::vector<std::byte> out = AbandonPattern(kBig, seed);
  std::unique_ptr<Work> send = t.ISend(0, kDataTag, out);
  ASSERT_TRUE(gate.WaitOpen(kTimeout)) << "rank 0 did not open the gate";
  EXPECT_TRUE(send->Wait(kTimeout).ok());
  ASSERT_TRUE(SendByte(t, 0, kAbandonDoneTag).ok());
}

// Rank 0 of the tests below: `recv` has matched rank 1's message, which cannot complete while
// rank 1 waits at the gate. Its Wait times out, it is given up (the runtime holds it, as it cannot
// be cancelled), `given_up` runs; then the gate opens and MPI moves the rest of the message while
// this rank waits for rank 1 to finish, and the runtime releases the receive.
void GiveUpMatchedReceive(Transport& t, std::unique_ptr<Work> recv, const Gate& gate,
                          const std::function<void()>& given_up) {
  Status s = recv->Wait(std::chrono::milliseconds(500));
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  recv.reset();
  EXPECT_EQ(mpitest::Runtime().abandoned_operations(), 1u);
  given_up();
  ASSERT_TRUE(gate.Open());
  ASSERT_TRUE(RecvByte(t, 1, kAbandonDoneTag).ok());
  EXPECT_TRUE(AbandonedOperationsComplete(kTimeout));
}

// Rank 1 starts a large send and then stays out of MPI. Rank 0's receive matches the message
// (its first fragment arrived) but cannot complete; it times out and rank 0 reuses its buffer.
// Then rank 1 goes on and the rest of the message arrives: rank 0's buffer must not change.
TEST(MpiTransportTcp, TimedOutMatchedReceiveNeverWritesTheBufferLater) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() > 1) return;
  if (t->rank() == 0) {
    Gate gate = Gate::Make();
    ShareGate(*t, gate);
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<std::byte> in(kBig, std::byte{0});
    GiveUpMatchedReceive(*t, t->IRecv(1, kDataTag, in), gate,
                         [&] { std::fill(in.begin(), in.end(), std::byte{0x77}); });
    EXPECT_TRUE(std::all_of(in.begin(), in.end(), [](std::byte b) { return b == std::byte{0x77}; }))
        << "the receive buffer was written after its receive timed out";
  } else {
    LateSender(*t, 1);
  }
}

// As above, with a receive into memory shared with the transport (IRecvShared): after the
// timeout the caller drops its reference, the runtime keeps the memory while MPI may still write
// it, the rest of the message lands there, and the memory is released once MPI is done.
TEST(MpiTransportTcp, TimedOutMatchedSharedReceiveKeepsItsMemoryUntilMpiIsDone) {
  auto t = TestWorld();
  ASSERT_NE(t, nullptr);
  if (t->rank() > 1) return;
  if (t->rank() == 0) {
    Gate gate = Gate::Make();
    ShareGate(*t, gate);
    if (::testing::Test::HasFatalFailure()) return;
    SharedBytes in = t->NewShared(kBig);
    std::fill(in.bytes.begin(), in.bytes.end(), std::byte{0});
    // Watches the memory without keeping it: it must end with the whole message.
    bool complete = false;
    const std::vector<std::byte> expected = AbandonPattern(kBig, 2);
    std::shared_ptr<void> watcher(
        in.owner.get(), [owner = in.owner, bytes = std::span<const std::byte>(in.bytes), &complete,
                         &expected](void*) {
          complete = std::equal(bytes.begin(), bytes.end(), expected.begin(), expected.end());
        });
    std::weak_ptr<void> alive = watcher;
    std::unique_ptr<Work> recv = t->IRecvShared(1, kDataTag, std::move(watcher), in.bytes);
    in.owner.reset();
    GiveUpMatchedReceive(*t, std::move(recv), gate, [&] {
      EXPECT_FALSE(alive.expired()) << "the memory was released while MPI could still write it";
    });
    EXPECT_TRUE(alive.expired()) << "the runtime kept the memory after MPI completed";
    EXPECT_TRUE(complete) << "the memory did not receive the whole message";
  } else {
    LateSender(*t, 2);
  }
}

}  // namespace
}  // namespace frugal
