// The in-process transport: ranks are threads, messages are copied between mailboxes
// (mailbox.h: matching, delayed messages, rendezvous messages).
//
// A communicator (the world, or a group made by Split) is a `Comm`: one Mailbox per member.
//
// ISend consults the world's fault rules first (faults.h). An eager send locks the destination's
// mailbox and, unless the message is delayed or must queue behind a waiting one of the same
// source and tag, claims the first posted receive that matches (state kCopying), unlocks, copies
// the payload straight into the receive buffer and marks it kDone. Otherwise it copies the
// payload into a new Message outside the lock, locks again, re-checks the posted receives and
// else appends the Message to `unexpected`; its Work is complete at once. A rendezvous send
// (rendezvous_bytes and larger) does the same without the copy: a posted receive is filled from
// the sender's buffer, else the Message points at the sender's SendOp and the send's Work waits
// (on the destination's condition variable) until a receive has copied it out. Because a rank's
// sends are issued by one thread, one after the other, messages from one source with one tag
// enter the mailbox in the order they were sent (non-overtaking).
//
// IRecv locks its own mailbox, lets older posted receives take what they can (Progress), then
// takes the first eligible message of `unexpected` if any (and copies it out after unlocking),
// else appends the receive to `posted`. So receives match in the order they were posted and each
// takes the oldest matching message. Waits block on a condition variable with a deadline, also
// woken when a delayed message becomes visible; a receive that times out is withdrawn from
// `posted`, and a rendezvous send that times out (or is destroyed unfinished) becomes an eager
// message, its data copied into the mailbox, so no later message writes into a buffer its owner
// has given up and no receive reads one, while the message itself is still delivered, as over
// MPI. A message larger than the receive buffer is consumed and completes the receive with
// kMalformed.
//
// Dead ranks: State keeps one flag per world rank (atomic, read under mailbox locks) and its
// reason. MarkRankDead sets them and wakes every mailbox of the world, so that waits on the dead
// rank end with kPeerLost (unless a message it sent before dying still waits to be taken).
//
// Split is collective: each rank sends (color, key) to every other rank on the reserved tag
// kSplitTag and receives everybody's pair, each wait bounded by the timeout. Members of the new
// group are the ranks with the same color ordered by (key, rank). The child communicator's id is
// "<parent id>/<split sequence number>:<color>", the same string on every member because all
// members call Split in the same order, so they all find the same Comm in the world's registry.
// The registry keeps a Comm until every member has connected to it and left again, so messages
// sent to a member that has not yet arrived are not lost.
//
// Byte and message counters are shared (by pointer) between a transport and its children.
#include "frugal/inproc_transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/inproc/faults.h"
#include "transport/inproc/mailbox.h"

namespace frugal {
namespace {

using inproc::FaultDecision;
using inproc::FaultPlan;
using inproc::Mailbox;
using inproc::Message;
using inproc::Phase;
using inproc::RecvOp;
using inproc::SendOp;

// Split's exchange of (color, key).

struct Counters {
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> messages_sent{0};
};

struct Comm {
  Comm(std::string id_in, std::vector<int> world_ranks_in)
      : id(std::move(id_in)), world_ranks(std::move(world_ranks_in)), boxes(world_ranks.size()) {}
  std::string id;
  std::vector<int> world_ranks;  // member i is world rank world_ranks[i]
  std::vector<Mailbox> boxes;
  int joined = 0;  // guarded by the world's mutex
  int left = 0;
};

// The deadline `timeout` from now; very long timeouts are capped so the addition cannot overflow.
inproc::TimePoint DeadlineAfter(Duration timeout) {
  constexpr Duration kLongest = std::chrono::hours(24 * 365);
  return std::chrono::steady_clock::now() + std::clamp(timeout, Duration::zero(), kLongest);
}

std::string PeerName(const Comm& comm, int rank) {
  if (rank == kAnySource) return "any rank";
  const int world = comm.world_ranks[static_cast<size_t>(rank)];
  if (world != rank) return fmt::format("rank {} (world rank {})", rank, world);
  return fmt::format("rank {}", rank);
}

// A Work that is finished when it is made.
class CompletedWork : public Work {
 public:
  CompletedWork(Status status, int peer, size_t bytes)
      : status_(std::move(status)), peer_(peer), bytes_(bytes) {}
  Status Wait(Duration) override { return status_; }
  bool IsCompleted() override { return true; }
  int peer() const override { return peer_; }
  size_t bytes() const override { return bytes_; }

 private:
  Status status_;
  int peer_;
  size_t bytes_;
};

}  // namespace

struct InProcWorld::State {
  State(int size_in, InProcOptions options_in)
      : size(size_in),
        options(std::move(options_in)),
        faults(options.faults, size_in),
        dead(std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(size_in))),
        dead_reason(static_cast<size_t>(size_in)),
        connected(static_cast<size_t>(size_in), false) {}

  // Returns the communicator `id` with the given members, creating it for the first member that
  // arrives. Every member calls it exactly once per communicator.
  std::shared_ptr<Comm> Join(const std::string& id, const std::vector<int>& world_ranks) {
    std::lock_guard lock(mu);
    auto it = comms.find(id);
    if (it == comms.end()) {
      it = comms.emplace(id, std::make_shared<Comm>(id, world_ranks)).first;
    }
    FRUGAL_INTERNAL_ASSERT(it->second->world_ranks == world_ranks, "members of communicator ", id,
                           " disagree on its group");
    ++it->second->joined;
    return it->second;
  }

  // A member is done with the communicator; once all members have joined and left, the registry
  // forgets it (messages still held by a member's Work keep it alive through shared_ptr).
  void Leave(const std::string& id) {
    std::lock_guard lock(mu);
    auto it = comms.find(id);
    if (it == comms.end()) return;
    Comm& comm = *it->second;
    ++comm.left;
    if (comm.left == static_cast<int>(comm.world_ranks.size())) comms.erase(it);
  }

  bool IsDead(int world_rank) const {
    return dead[static_cast<size_t>(world_rank)].load(std::memory_order_acquire);
  }
  std::string DeadReason(int world_rank) {
    std::lock_guard lock(dead_mu);
    return dead_reason[static_cast<size_t>(world_rank)];
  }

  void MarkDead(int world_rank, std::string reason) {
    {
      std::lock_guard lock(dead_mu);
      if (IsDead(world_rank)) return;
      dead_reason[static_cast<size_t>(world_rank)] = std::move(reason);
      dead[static_cast<size_t>(world_rank)].store(true, std::memory_order_release);
    }
    std::vector<std::shared_ptr<Comm>> all;
    {
      std::lock_guard lock(mu);
      for (auto& [id, comm] : comms) all.push_back(comm);
    }
    for (const auto& comm : all) {
      for (Mailbox& box : comm->boxes) {
        std::lock_guard lock(box.mu);
        box.cv.notify_all();
      }
    }
  }

  const int size;
  const InProcOptions options;
  FaultPlan faults;
  std::unique_ptr<std::atomic<bool>[]> dead;
  std::mutex dead_mu;  // guards dead_reason and the transitions of `dead`
  std::vector<std::string> dead_reason;
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Comm>> comms;
  std::vector<bool> connected;
};

namespace {

using State = InProcWorld::State;

// What a rank's operations need to know about liveness, for the member `rank` of `comm`.
struct Liveness {
  State* world;
  const Comm* comm;
  int rank;

  // kCancelled when this rank itself is dead.
  Status Self() const {
    const int me = comm->world_ranks[static_cast<size_t>(rank)];
    if (!world->IsDead(me)) return Status::Ok();
    return CancelledError(
        fmt::format("{} is gone ({})", PeerName(*comm, rank), world->DeadReason(me)));
  }
  // kPeerLost when member `peer` is dead (for kAnySource: when every other member is).
  Status Peer(int peer) const {
    if (peer == kAnySource) {
      for (int r = 0; r < static_cast<int>(comm->world_ranks.size()); ++r) {
        if (r != rank && !world->IsDead(comm->world_ranks[static_cast<size_t>(r)])) {
          return Status::Ok();
        }
      }
      if (comm->world_ranks.size() == 1) return Status::Ok();
      return PeerLostError("every other rank is gone");
    }
    const int world_rank = comm->world_ranks[static_cast<size_t>(peer)];
    if (!world->IsDead(world_rank)) return Status::Ok();
    return PeerLostError(
        fmt::format("{} is gone ({})", PeerName(*comm, peer), world->DeadReason(world_rank)));
  }
};

// A Work whose operation waits in a mailbox: a posted receive, or a rendezvous send waiting for
// a receive. Subclasses say when it is done (Poll) and how it is withdrawn.
class MailboxWork : public Work {
 public:
  Status Wait(Duration timeout) override {
    const auto deadline = DeadlineAfter(timeout);
    std::unique_lock lock(box_->mu);
    while (!Poll(lock)) {
      if (phase() == Phase::kCopying) {
        // A copy is under way (it is bounded): wait for it to finish.
        box_->cv.wait(lock, [&] { return phase() == Phase::kDone; });
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        Release(TimeoutError(TimeoutMessage(timeout)));
        break;
      }
      box_->cv.wait_until(lock, std::min(deadline, box_->NextVisible(now)));
    }
    return status();
  }

  bool IsCompleted() override {
    std::unique_lock lock(box_->mu);
    return Poll(lock);
  }

 protected:
  MailboxWork(std::shared_ptr<State> world, std::shared_ptr<Comm> comm, int rank, int box_rank)
      : world_(std::move(world)),
        comm_(std::move(comm)),
        box_(&comm_->boxes[static_cast<size_t>(box_rank)]),
        live_{world_.get(), comm_.get(), rank} {}

  // With the mailbox locked: true once done; ends the operation when it can never complete.
  virtual bool Poll(std::unique_lock<std::mutex>& lock) = 0;
  // With the mailbox locked: takes the operation out of the mailbox and ends it with `status`.
  virtual void Withdraw(Status status) = 0;
  // With the mailbox locked: ends the operation with `status` because its owner gave up on it
  // (a timeout, or the Work destroyed), leaving no reference to the owner's buffer.
  virtual void Release(Status status) = 0;
  virtual Phase phase() const = 0;
  virtual const Status& status() const = 0;
  virtual std::string TimeoutMessage(Duration timeout) const = 0;

  // For the destructors of subclasses: withdraws the operation, or waits for a copy under way.
  void GiveUp(Status status) {
    std::unique_lock lock(box_->mu);
    if (phase() == Phase::kPosted) {
      Release(std::move(status));
    } else {
      box_->cv.wait(lock, [&] { return phase() == Phase::kDone; });
    }
  }

  // With the mailbox locked: ends the operation when this rank, or `peer`, is dead.
  bool EndIfDead(int peer) {
    if (Status self = live_.Self(); !self.ok()) {
      Withdraw(std::move(self));
      return true;
    }
    if (Status lost = live_.Peer(peer); !lost.ok()) {
      Withdraw(std::move(lost));
      return true;
    }
    return false;
  }

  std::shared_ptr<State> world_;
  std::shared_ptr<Comm> comm_;
  Mailbox* box_;
  Liveness live_;
};

class RecvWork : public MailboxWork {
 public:
  RecvWork(std::shared_ptr<State> world, std::shared_ptr<Comm> comm, int rank,
           std::shared_ptr<RecvOp> op)
      : MailboxWork(std::move(world), std::move(comm), rank, rank), op_(std::move(op)) {}
  ~RecvWork() override { GiveUp(CancelledError("receive abandoned")); }

  int peer() const override { return op_->peer; }
  size_t bytes() const override { return op_->bytes; }

 private:
  // Lets posted receives take visible messages first; a receive from a dead rank ends once no
  // message it sent (a delayed one) waits any more.
  bool Poll(std::unique_lock<std::mutex>& lock) override {
    box_->Progress(lock);
    if (op_->phase != Phase::kPosted) return op_->phase == Phase::kDone;
    if (box_->HasWaiting(op_->src, op_->tag)) return false;
    return EndIfDead(op_->src);
  }
  void Withdraw(Status status) override {
    box_->posted.remove(op_);
    op_->phase = Phase::kDone;
    op_->status = std::move(status);
  }
  // A receive given up is withdrawn, as MPI cancels a receive no message has matched.
  void Release(Status status) override { Withdraw(std::move(status)); }
  Phase phase() const override { return op_->phase; }
  const Status& status() const override { return op_->status; }
  std::string TimeoutMessage(Duration timeout) const override {
    return fmt::format("no message from {} within {} ms (tag {})", PeerName(*comm_, op_->src),
                       timeout.count(), op_->tag);
  }

  std::shared_ptr<RecvOp> op_;
};

// A rendezvous send whose message waits in the destination's mailbox.
class SendWork : public MailboxWork {
 public:
  SendWork(std::shared_ptr<State> world, std::shared_ptr<Comm> comm, int rank, int dst, int tag,
           std::shared_ptr<SendOp> op)
      : MailboxWork(std::move(world), std::move(comm), rank, dst),
        dst_(dst),
        tag_(tag),
        op_(std::move(op)) {}
  ~SendWork() override { GiveUp(CancelledError("send abandoned")); }

  int peer() const override { return dst_; }
  size_t bytes() const override { return op_->data.size(); }

 private:
  bool Poll(std::unique_lock<std::mutex>&) override {
    if (op_->phase != Phase::kPosted) return op_->phase == Phase::kDone;
    return EndIfDead(dst_);
  }
  void Withdraw(Status status) override {
    box_->Withdraw(*op_);
    op_->phase = Phase::kDone;
    op_->status = std::move(status);
  }
  // A send given up goes on as an eager message (a copy of the data), as MPI delivers a send
  // whose owner gave up.
  void Release(Status status) override {
    box_->Detach(*op_);
    op_->phase = Phase::kDone;
    op_->status = std::move(status);
  }
  Phase phase() const override { return op_->phase; }
  const Status& status() const override { return op_->status; }
  std::string TimeoutMessage(Duration timeout) const override {
    return fmt::format("{} did not take a message within {} ms (tag {})", PeerName(*comm_, dst_),
                       timeout.count(), tag_);
  }

  int dst_;
  int tag_;
  std::shared_ptr<SendOp> op_;
};

class InProcTransport : public Transport {
 public:
  InProcTransport(std::shared_ptr<State> world, std::shared_ptr<Comm> comm, int rank,
                  std::shared_ptr<Counters> counters)
      : world_(std::move(world)),
        comm_(std::move(comm)),
        rank_(rank),
        counters_(std::move(counters)),
        live_{world_.get(), comm_.get(), rank} {}

  ~InProcTransport() override { world_->Leave(comm_->id); }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(comm_->world_ranks.size()); }
  int world_rank() const { return comm_->world_ranks[static_cast<size_t>(rank_)]; }
  State& world() { return *world_; }

  std::string hostname() const override {
    const int per_host = world_->options.ranks_per_host;
    return fmt::format("inproc{}", per_host > 0 ? world_rank() / per_host : 0);
  }

  std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) override {
    FRUGAL_CHECK(dst >= 0 && dst < size(), "destination rank ", dst, " of ", size());
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "tag ", tag);
    if (Status self = live_.Self(); !self.ok()) {
      return std::make_unique<CompletedWork>(std::move(self), dst, 0);
    }
    counters_->bytes_sent.fetch_add(data.size(), std::memory_order_relaxed);
    counters_->messages_sent.fetch_add(1, std::memory_order_relaxed);
    const FaultDecision fault =
        world_->faults.Decide(world_rank(), comm_->world_ranks[static_cast<size_t>(dst)], tag);
    if (fault.kill) {
      world_->MarkDead(world_rank(),
                       fmt::format("stopped by a fault rule before its message {} to {} (tag {})",
                                   fault.index, PeerName(*comm_, dst), tag));
      return std::make_unique<CompletedWork>(live_.Self(), dst, 0);
    }
    if (Status peer = live_.Peer(dst); !peer.ok()) {
      return std::make_unique<CompletedWork>(std::move(peer), dst, 0);
    }
    if (fault.drop) return std::make_unique<CompletedWork>(Status::Ok(), dst, data.size());
    Message message;
    message.src = rank_;
    message.tag = tag;
    message.flip_bit = fault.flip_bit;
    if (fault.delay > Duration::zero()) message.visible_at = DeadlineAfter(fault.delay);
    Mailbox& box = comm_->boxes[static_cast<size_t>(dst)];
    if (data.size() >= world_->options.rendezvous_bytes) {
      return Rendezvous(box, dst, std::move(message), data);
    }
    Eager(box, std::move(message), data);
    return std::make_unique<CompletedWork>(Status::Ok(), dst, data.size());
  }

  std::unique_ptr<Work> IRecv(int src, int tag, std::span<std::byte> data) override {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size()), "source rank ", src, " of ",
                 size());
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "tag ", tag);
    auto op = std::make_shared<RecvOp>();
    op->src = src;
    op->tag = tag;
    op->buffer = data;
    if (Status self = live_.Self(); !self.ok()) {
      op->phase = Phase::kDone;
      op->status = std::move(self);
      return std::make_unique<RecvWork>(world_, comm_, rank_, std::move(op));
    }
    Mailbox& box = comm_->boxes[static_cast<size_t>(rank_)];
    std::unique_lock lock(box.mu);
    box.Progress(lock);  // older receives first
    std::optional<size_t> index = box.FindEligible(src, tag, std::chrono::steady_clock::now());
    if (!index) {
      box.posted.push_back(op);
      return std::make_unique<RecvWork>(world_, comm_, rank_, std::move(op));
    }
    op->phase = Phase::kCopying;
    Message message = box.Take(*index);
    lock.unlock();
    inproc::Fill(*op, message.src, message.tag, message.data(), message.flip_bit);
    lock.lock();
    inproc::FinishCopy(box, *op, message.rendezvous.get());
    return std::make_unique<RecvWork>(world_, comm_, rank_, std::move(op));
  }

  StatusOr<ProbeResult> Probe(int src, int tag, Duration timeout) override {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size()), "source rank ", src);
    const auto deadline = DeadlineAfter(timeout);
    Mailbox& box = comm_->boxes[static_cast<size_t>(rank_)];
    std::unique_lock lock(box.mu);
    while (true) {
      StatusOr<std::optional<ProbeResult>> found = TryProbe(box, lock, src, tag);
      if (!found.ok()) return found.status();
      if (*found) return **found;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      box.cv.wait_until(lock, std::min(deadline, box.NextVisible(now)));
    }
    return TimeoutError(fmt::format("no message from {} within {} ms (tag {})",
                                    PeerName(*comm_, src), timeout.count(), tag));
  }

  StatusOr<std::optional<ProbeResult>> IProbe(int src, int tag) override {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size()), "source rank ", src);
    Mailbox& box = comm_->boxes[static_cast<size_t>(rank_)];
    std::unique_lock lock(box.mu);
    return TryProbe(box, lock, src, tag);
  }

  StatusOr<std::unique_ptr<Transport>> Split(int color, int key, Duration timeout) override {
    const int n = size();
    const uint64_t sequence = split_sequence_++;
    const std::array<int64_t, 2> mine = {color, key};
    std::vector<std::array<int64_t, 2>> pairs(static_cast<size_t>(n));
    pairs[static_cast<size_t>(rank_)] = mine;
    const auto mine_bytes = std::as_bytes(std::span<const int64_t>(mine));
    std::vector<std::unique_ptr<Work>> sends;
    for (int r = 0; r < n; ++r) {
      if (r != rank_) sends.push_back(ISend(r, kSplitTag, mine_bytes));
    }
    for (int r = 0; r < n; ++r) {
      if (r == rank_) continue;
      auto bytes = std::as_writable_bytes(std::span<int64_t>(pairs[static_cast<size_t>(r)]));
      std::unique_ptr<Work> recv = IRecv(r, kSplitTag, bytes);
      Status status = recv->Wait(timeout);
      if (!status.ok()) return status.Annotate("split");
      if (recv->bytes() != bytes.size()) {
        return MalformedError(fmt::format("split: rank {} sent {} bytes where {} were expected", r,
                                          recv->bytes(), bytes.size()));
      }
    }
    for (auto& send : sends) FRUGAL_RETURN_IF_ERROR(send->Wait(timeout).Annotate("split"));
    std::vector<int> members;
    for (int r = 0; r < n; ++r) {
      if (pairs[static_cast<size_t>(r)][0] == color) members.push_back(r);
    }
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return pairs[static_cast<size_t>(a)][1] < pairs[static_cast<size_t>(b)][1];
    });
    std::vector<int> world_ranks;
    int child_rank = -1;
    for (size_t i = 0; i < members.size(); ++i) {
      world_ranks.push_back(comm_->world_ranks[static_cast<size_t>(members[i])]);
      if (members[i] == rank_) child_rank = static_cast<int>(i);
    }
    FRUGAL_INTERNAL_ASSERT(child_rank >= 0, "split: this rank is not in its own group");
    const std::string id = fmt::format("{}/{}:{}", comm_->id, sequence, color);
    std::shared_ptr<Comm> child = world_->Join(id, world_ranks);
    return std::unique_ptr<Transport>(
        std::make_unique<InProcTransport>(world_, std::move(child), child_rank, counters_));
  }

  // The ranks are threads of one process: any memory is every rank's. Ranks share it when they
  // are on one (emulated) host; a region is the address itself.
  bool SharesMemoryWithPeers() const override {
    const int per_host = world_->options.ranks_per_host;
    if (per_host <= 0) return true;
    for (const int w : comm_->world_ranks) {
      if (w / per_host != world_rank() / per_host) return false;
    }
    return true;
  }
  // Every rank of the world is a thread of this process, on this machine's cores (read once:
  // hardware_concurrency reads /sys, and recursive doubling asks on every small all-reduce).
  bool CoreForEachRank() const override {
    static const int cores = static_cast<int>(std::thread::hardware_concurrency());
    return world_->size <= cores;
  }
  std::optional<PeerRegion> RegionOf(std::span<const std::byte> bytes) const override {
    return PeerRegion{0, 0, reinterpret_cast<uintptr_t>(bytes.data()), bytes.size()};
  }
  StatusOr<const std::byte*> MapPeerRegion(int peer, const PeerRegion& region) override {
    FRUGAL_CHECK(peer >= 0 && peer < size(), "MapPeerRegion: rank ", peer, " of ", size());
    if (!SharesMemoryWithPeers()) return Transport::MapPeerRegion(peer, region);
    FRUGAL_RETURN_IF_ERROR(live_.Peer(peer));
    return reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(region.offset));
  }

  uint64_t bytes_sent() const override {
    return counters_->bytes_sent.load(std::memory_order_relaxed);
  }
  uint64_t messages_sent() const override {
    return counters_->messages_sent.load(std::memory_order_relaxed);
  }

 private:
  // With this rank's mailbox locked: a visible message for (src, tag), nothing yet, or kPeerLost
  // when nothing can come any more (kCancelled when this rank is dead).
  StatusOr<std::optional<ProbeResult>> TryProbe(Mailbox& box, std::unique_lock<std::mutex>& lock,
                                                int src, int tag) {
    box.Progress(lock);
    const auto now = std::chrono::steady_clock::now();
    if (std::optional<size_t> index = box.FindEligible(src, tag, now)) {
      const Message& m = box.unexpected[*index];
      return std::optional<ProbeResult>(ProbeResult{m.src, m.tag, m.data().size()});
    }
    FRUGAL_RETURN_IF_ERROR(live_.Self());
    if (!box.HasWaiting(src, tag)) FRUGAL_RETURN_IF_ERROR(live_.Peer(src));
    return std::optional<ProbeResult>();
  }

  // An eager message: copied at once, into a posted receive if one may take it now.
  void Eager(Mailbox& box, Message message, std::span<const std::byte> data) {
    const bool delayed = message.visible_at != inproc::TimePoint{};
    std::shared_ptr<RecvOp> op;
    if (!delayed) {
      std::lock_guard lock(box.mu);
      if (!box.HasWaiting(rank_, message.tag)) op = box.ClaimPosted(rank_, message.tag);
    }
    if (op) {
      inproc::Fill(*op, rank_, message.tag, data, message.flip_bit);
      std::lock_guard lock(box.mu);
      inproc::FinishCopy(box, *op, nullptr);
      return;
    }
    message.payload.assign(data.begin(), data.end());
    std::lock_guard lock(box.mu);
    if (!delayed && !box.HasWaiting(rank_, message.tag)) {
      op = box.ClaimPosted(rank_, message.tag);
    }
    if (op) {
      inproc::Fill(*op, rank_, message.tag, message.payload, message.flip_bit);
      inproc::FinishCopy(box, *op, nullptr);
    } else {
      box.unexpected.push_back(std::move(message));
      box.cv.notify_all();
    }
  }

  // A rendezvous message: complete once a receive has copied it from `data`.
  std::unique_ptr<Work> Rendezvous(Mailbox& box, int dst, Message message,
                                   std::span<const std::byte> data) {
    const bool delayed = message.visible_at != inproc::TimePoint{};
    const int tag = message.tag;
    auto send = std::make_shared<SendOp>();
    send->data = data;
    std::unique_lock lock(box.mu);
    std::shared_ptr<RecvOp> op;
    if (!delayed && !box.HasWaiting(rank_, tag)) op = box.ClaimPosted(rank_, tag);
    if (op) {
      lock.unlock();
      inproc::Fill(*op, rank_, tag, data, message.flip_bit);
      lock.lock();
      inproc::FinishCopy(box, *op, nullptr);
      return std::make_unique<CompletedWork>(Status::Ok(), dst, data.size());
    }
    message.rendezvous = send;
    box.unexpected.push_back(std::move(message));
    box.cv.notify_all();
    lock.unlock();
    return std::make_unique<SendWork>(world_, comm_, rank_, dst, tag, std::move(send));
  }

  std::shared_ptr<State> world_;
  std::shared_ptr<Comm> comm_;
  const int rank_;
  std::shared_ptr<Counters> counters_;
  Liveness live_;
  uint64_t split_sequence_ = 0;
};

}  // namespace

InProcWorld::InProcWorld(int size, InProcOptions options) {
  FRUGAL_CHECK_GT(size, 0, "world size");
  FRUGAL_CHECK_GE(options.ranks_per_host, 0, "ranks_per_host");
  state_ = std::make_shared<State>(size, std::move(options));
}

InProcWorld::~InProcWorld() = default;

int InProcWorld::size() const { return state_->size; }

uint64_t InProcWorld::faults_applied() const { return state_->faults.applied(); }

std::unique_ptr<Transport> InProcWorld::Connect(int rank) {
  FRUGAL_CHECK(rank >= 0 && rank < state_->size, "rank ", rank, " of ", state_->size);
  std::vector<int> world_ranks(static_cast<size_t>(state_->size));
  for (int r = 0; r < state_->size; ++r) world_ranks[static_cast<size_t>(r)] = r;
  {
    std::lock_guard lock(state_->mu);
    FRUGAL_CHECK(!state_->connected[static_cast<size_t>(rank)], "rank ", rank, " connected twice");
    state_->connected[static_cast<size_t>(rank)] = true;
  }
  std::shared_ptr<Comm> comm = state_->Join("world", world_ranks);
  return std::make_unique<InProcTransport>(state_, std::move(comm), rank,
                                           std::make_shared<Counters>());
}

void MarkRankDead(Transport& t, std::string reason) {
  auto* inproc = dynamic_cast<InProcTransport*>(&t);
  FRUGAL_CHECK(inproc != nullptr, "MarkRankDead needs an in-process transport");
  inproc->world().MarkDead(inproc->world_rank(), std::move(reason));
}

std::vector<Status> RunRanks(InProcWorld& world, const std::function<Status(Transport&)>& fn) {
  const int size = world.size();
  std::vector<Status> results(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&world, &results, &fn, r] {
      Status& result = results[static_cast<size_t>(r)];
      try {
        std::unique_ptr<Transport> transport = world.Connect(r);
        result = fn(*transport);
      } catch (const std::exception& e) {
        result = InternalError(fmt::format("rank {} threw: {}", r, e.what()));
      } catch (...) {
        result = InternalError(fmt::format("rank {} threw a non-standard exception", r));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

std::vector<Status> RunRanks(int size, const std::function<Status(Transport&)>& fn,
                             InProcOptions options) {
  InProcWorld world(size, std::move(options));
  return RunRanks(world, fn);
}

}  // namespace frugal
