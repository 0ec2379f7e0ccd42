// The mailbox of one rank of an in-process communicator, and the matching rules of transport.h
// over it. Internal to src/transport/inproc.
//
// A Mailbox holds, under its mutex, the messages that arrived before a matching receive was
// posted (`unexpected`, in arrival order) and the receives that were posted before a matching
// message arrived (`posted`, in post order). A message is eager (a copy of the data) or
// rendezvous (the sender's own buffer, until a receive has copied it out). A delayed message is
// invisible to receives and probes until its `visible_at`; messages from its source with its tag
// queue behind it, so that no message overtakes an older one of the same source and tag.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::inproc {

using TimePoint = std::chrono::steady_clock::time_point;

enum class Phase { kPosted, kCopying, kDone };

// A receive waiting for a message.
struct RecvOp {
  int src = kAnySource;
  int tag = 0;
  std::span<std::byte> buffer;
  Phase phase = Phase::kPosted;
  Status status;
  int peer = -1;
  size_t bytes = 0;
};

// A rendezvous send: its message waits in the receiver's mailbox until a receive copies it out.
struct SendOp {
  std::span<const std::byte> data;
  Phase phase = Phase::kPosted;
  Status status;
};

struct Message {
  int src = 0;
  int tag = 0;
  std::vector<std::byte> payload;      // eager: a copy of the data
  std::shared_ptr<SendOp> rendezvous;  // rendezvous: the sender's data
  TimePoint visible_at{};              // a delayed message is invisible before
  std::optional<uint64_t> flip_bit;    // a corrupted message: the bit flipped in the copy
  std::span<const std::byte> data() const {
    return rendezvous ? rendezvous->data : std::span<const std::byte>(payload);
  }
};

struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Message> unexpected;
  std::list<std::shared_ptr<RecvOp>> posted;

  // The following are called with `mu` held.

  // The first message a receive for (src, tag) may take at `now`: visible, and not behind an
  // older message of the same source and tag. src may be kAnySource.
  std::optional<size_t> FindEligible(int src, int tag, TimePoint now) const;
  // Whether a message from `src` (or any source) with `tag` waits, visible or not.
  bool HasWaiting(int src, int tag) const;
  // The earliest time a delayed message becomes visible, or TimePoint::max().
  TimePoint NextVisible(TimePoint now) const;
  // The first posted receive that matches (src, tag), removed from `posted` and claimed
  // (kCopying), or nullptr.
  std::shared_ptr<RecvOp> ClaimPosted(int src, int tag);
  // Removes and returns unexpected message `index`; a rendezvous sender is marked kCopying.
  Message Take(size_t index);
  // Removes the waiting message of rendezvous send `op`; false if a receive took it already.
  bool Withdraw(const SendOp& op);
  // Turns the waiting message of rendezvous send `op` into an eager one that owns a copy of the
  // data; false if a receive took it already.
  bool Detach(const SendOp& op);

  // Matches posted receives, in post order, with the messages they may take now, copying each
  // message with `lock` (on `mu`) released. Returns once no posted receive can take one.
  void Progress(std::unique_lock<std::mutex>& lock);
};

// Completes a claimed receive with message data (the caller owns `op` exclusively): peer, bytes
// and status (kMalformed when the data does not fit the buffer), the corrupted bit flipped.
void Fill(RecvOp& op, int src, int tag, std::span<const std::byte> data,
          std::optional<uint64_t> flip_bit);

// Marks a claimed receive, and the rendezvous send it copied from (if any), done. With `mu` held.
void FinishCopy(Mailbox& box, RecvOp& op, SendOp* send);

}  // namespace frugal::inproc
