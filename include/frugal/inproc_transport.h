// In-process transport: ranks are threads of one process, messages are copied between their
// mailboxes. It has the semantics of transport.h (non-overtaking, posted-order matching, any
// source, probe, split) and is the reference implementation used by tier-1 tests.
//
// Ownership: an InProcWorld owns the shared mailboxes; transports made by Connect() (and their
// splits) keep it alive. Each transport is owned by one thread, as every Transport.
//
// Sends are eager by default: the message is copied out at ISend, whose Work is complete at
// once. With InProcOptions::rendezvous_bytes, a send of at least that many bytes completes only
// when a receive has taken it, as MPI's rendezvous protocol does for large messages, so that
// tier-1 tests see the deadlocks that only show with real MPI (two ranks that both send a large
// message before receiving). A send that times out or is destroyed before a receive took it is
// withdrawn: no receive will ever read its buffer.
//
// Faults for tests, all deterministic:
//  - A rank that never calls into its transport makes its peers' waits time out, naming it.
//  - InProcOptions::faults: rules that drop, delay or corrupt chosen messages, or make their
//    sender die before sending them. A rule picks messages by sender, receiver and tag, and by
//    the count of the sender's matching messages (from `first`, `count` of them), never by time
//    or chance.
//  - A dead rank (MarkRankDead or a kKill rule) is gone for good: a receive from it that no
//    message already sent can satisfy, a probe for it, and a send to it fail with kPeerLost
//    naming it; the dead rank's own later operations fail with kCancelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

enum class InProcFaultKind {
  kDrop,     // the message vanishes; its send completes as if delivered
  kDelay,    // receives and probes see the message only `delay` after it was sent
  kCorrupt,  // one bit of the message is flipped, chosen from (seed, sender, message count)
  kKill,     // the sender dies before sending the message (MarkRankDead)
};

// A fault rule. Ranks are world ranks; messages of split transports count as their world ranks'.
struct InProcFault {
  static constexpr int kAny = -1;
  static constexpr uint64_t kEvery = std::numeric_limits<uint64_t>::max();

  InProcFaultKind kind = InProcFaultKind::kDrop;
  int src = kAny;  // the sender (kAny: every rank, each counting its own messages)
  int dst = kAny;  // the receiver
  int tag = kAny;  // the tag (Split's own exchange uses kTransportTags)
  // The rule applies to the sender's matching messages number first, first + 1, ...,
  // first + count - 1 (counted from 0, in the order the sender sends them).
  uint64_t first = 0;
  uint64_t count = 1;
  Duration delay{0};  // kDelay
  uint64_t seed = 0;  // kCorrupt
};

struct InProcOptions {
  // Ranks per emulated host for hostname(): rank r reports "inproc<r / ranks_per_host>".
  // 0 puts every rank on one host.
  int ranks_per_host = 0;
  // Sends of at least this many bytes use the rendezvous protocol (see above); the default
  // makes every send eager.
  size_t rendezvous_bytes = std::numeric_limits<size_t>::max();
  std::vector<InProcFault> faults = {};
};

class InProcWorld {
 public:
  InProcWorld(int size, InProcOptions options = {});
  ~InProcWorld();
  InProcWorld(const InProcWorld&) = delete;
  InProcWorld& operator=(const InProcWorld&) = delete;

  int size() const;
  // The transport of `rank`; call once per rank.
  std::unique_ptr<Transport> Connect(int rank);

  // Messages the fault rules have dropped, delayed, corrupted or stopped (kKill), in total.
  uint64_t faults_applied() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Makes the rank that owns `t` (an in-process transport, or one split from it) dead, as if its
// process had died: see the header comment. `reason` completes "rank 2 is gone (<reason>)".
// Thread safe.
void MarkRankDead(Transport& t, std::string reason);

// Runs `fn` on `size` threads, one per rank, each with its own transport of a fresh world, and
// returns the Status of every rank. An exception thrown by `fn` becomes a kInternal status.
std::vector<Status> RunRanks(int size, const std::function<Status(Transport&)>& fn,
                             InProcOptions options = {});
// The same on `world`, whose ranks must not have been connected yet.
std::vector<Status> RunRanks(InProcWorld& world, const std::function<Status(Transport&)>& fn);

}  // namespace frugal
