// The in-process transport: ranks are threads, messages are copied between mailboxes.
//
// A communicator (the world, or a group made by Split) is a `Comm`: one `Mailbox` per member
// rank. A Mailbox holds, under its mutex, the messages that arrived before a matching receive was
// posted (`unexpected`, in arrival order) and the receives that were posted before a matching
// message arrived (`posted`, in post order).
//
// ISend is eager: the sender locks the destination's mailbox and looks for the first posted
// receive that matches (source, tag). If there is one it claims it (state kCopying), unlocks,
// copies the payload straight into the receive buffer and marks it kDone. Otherwise it copies the
// payload into a new Message outside the lock, locks again, re-checks the posted receives (one
// may have been posted meanwhile) and else appends the Message to `unexpected`. The send's Work
// is complete at once. Because a rank's sends are issued by one thread, one after the other,
// messages from one source with one tag enter the mailbox in the order they were sent
// (non-overtaking).
//
// IRecv locks its own mailbox, takes the first matching message of `unexpected` if any (and
// copies it out after unlocking), else appends the receive to `posted`. So receives match in the
// order they were posted and each takes the oldest matching message. Waits block on the mailbox's
// condition variable with a deadline; a receive that times out is withdrawn from `posted` so that
// no later message can write into a buffer its owner has given up. A message larger than the
// receive buffer is consumed and completes the receive with kMalformed.
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
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace frugal {
namespace {

// Split's exchange of (color, key); collectives use tags below this one.
constexpr int kSplitTag = kTransportTags[0];

struct Counters {
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> messages_sent{0};
};

enum class RecvPhase { kPosted, kCopying, kDone };

struct RecvOp {
  int src = kAnySource;
  int tag = 0;
  std::span<std::byte> buffer;
  RecvPhase phase = RecvPhase::kPosted;
  Status status;
  int peer = -1;
  size_t bytes = 0;
};

struct Message {
  int src = 0;
  int tag = 0;
  std::vector<std::byte> payload;
};

struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Message> unexpected;
  std::list<std::shared_ptr<RecvOp>> posted;
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
std::chrono::steady_clock::time_point DeadlineAfter(Duration timeout) {
  constexpr Duration kLongest = std::chrono::hours(24 * 365);
  return std::chrono::steady_clock::now() + std::clamp(timeout, Duration::zero(), kLongest);
}

bool Matches(int want_src, int want_tag, int src, int tag) {
  return (want_src == kAnySource || want_src == src) && want_tag == tag;
}

// Copies a message into a claimed receive. The caller owns `op` exclusively (claimed or not yet
// visible to other threads).
void Fill(RecvOp& op, int src, int tag, std::span<const std::byte> payload) {
  op.peer = src;
  op.bytes = payload.size();
  if (payload.size() > op.buffer.size()) {
    op.status = MalformedError(
        fmt::format("message of {} bytes from rank {} (tag {}) does not fit the receive buffer "
                    "of {} bytes",
                    payload.size(), src, tag, op.buffer.size()));
    return;
  }
  if (!payload.empty()) std::memcpy(op.buffer.data(), payload.data(), payload.size());
  op.status = Status::Ok();
}

std::shared_ptr<RecvOp> ClaimPosted(Mailbox& box, int src, int tag) {
  for (auto it = box.posted.begin(); it != box.posted.end(); ++it) {
    if (Matches((*it)->src, (*it)->tag, src, tag)) {
      std::shared_ptr<RecvOp> op = *it;
      box.posted.erase(it);
      op->phase = RecvPhase::kCopying;
      return op;
    }
  }
  return nullptr;
}

class CompletedWork : public Work {
 public:
  CompletedWork(int peer, size_t bytes) : peer_(peer), bytes_(bytes) {}
  Status Wait(Duration) override { return Status::Ok(); }
  bool IsCompleted() override { return true; }
  int peer() const override { return peer_; }
  size_t bytes() const override { return bytes_; }

 private:
  int peer_;
  size_t bytes_;
};

std::string PeerName(const Comm& comm, int rank) {
  if (rank == kAnySource) return "any rank";
  const int world = comm.world_ranks[static_cast<size_t>(rank)];
  if (world != rank) return fmt::format("rank {} (world rank {})", rank, world);
  return fmt::format("rank {}", rank);
}

class RecvWork : public Work {
 public:
  RecvWork(std::shared_ptr<Comm> comm, Mailbox* box, std::shared_ptr<RecvOp> op)
      : comm_(std::move(comm)), box_(box), op_(std::move(op)) {}

  ~RecvWork() override {
    std::unique_lock lock(box_->mu);
    if (op_->phase == RecvPhase::kPosted) {
      box_->posted.remove(op_);
      op_->phase = RecvPhase::kDone;
      op_->status = CancelledError("receive abandoned");
    } else {
      // A sender is copying into the buffer; the copy is bounded, wait for it to finish.
      box_->cv.wait(lock, [&] { return op_->phase == RecvPhase::kDone; });
    }
  }

  Status Wait(Duration timeout) override {
    std::unique_lock lock(box_->mu);
    if (box_->cv.wait_until(lock, DeadlineAfter(timeout),
                            [&] { return op_->phase == RecvPhase::kDone; })) {
      return op_->status;
    }
    if (op_->phase == RecvPhase::kPosted) {
      box_->posted.remove(op_);
      op_->phase = RecvPhase::kDone;
      op_->status =
          TimeoutError(fmt::format("no message from {} within {} ms (tag {})",
                                   PeerName(*comm_, op_->src), timeout.count(), op_->tag));
      return op_->status;
    }
    box_->cv.wait(lock, [&] { return op_->phase == RecvPhase::kDone; });
    return op_->status;
  }

  bool IsCompleted() override {
    std::lock_guard lock(box_->mu);
    return op_->phase == RecvPhase::kDone;
  }

  int peer() const override { return op_->peer; }
  size_t bytes() const override { return op_->bytes; }

 private:
  std::shared_ptr<Comm> comm_;
  Mailbox* box_;
  std::shared_ptr<RecvOp> op_;
};

}  // namespace

struct InProcWorld::State {
  State(int size_in, InProcOptions options_in) : size(size_in), options(options_in) {}

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

  const int size;
  const InProcOptions options;
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Comm>> comms;
  std::vector<bool> connected;
};

namespace {

class InProcTransport : public Transport {
 public:
  InProcTransport(std::shared_ptr<InProcWorld::State> world, std::shared_ptr<Comm> comm, int rank,
                  std::shared_ptr<Counters> counters)
      : world_(std::move(world)),
        comm_(std::move(comm)),
        rank_(rank),
        counters_(std::move(counters)) {}

  ~InProcTransport() override { world_->Leave(comm_->id); }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(comm_->world_ranks.size()); }

  std::string hostname() const override {
    const int world_rank = comm_->world_ranks[static_cast<size_t>(rank_)];
    const int per_host = world_->options.ranks_per_host;
    return fmt::format("inproc{}", per_host > 0 ? world_rank / per_host : 0);
  }

  std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) override {
    FRUGAL_CHECK(dst >= 0 && dst < size(), "destination rank ", dst, " of ", size());
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "tag ", tag);
    counters_->bytes_sent.fetch_add(data.size(), std::memory_order_relaxed);
    counters_->messages_sent.fetch_add(1, std::memory_order_relaxed);
    Deliver(comm_->boxes[static_cast<size_t>(dst)], tag, data);
    return std::make_unique<CompletedWork>(dst, data.size());
  }

  std::unique_ptr<Work> IRecv(int src, int tag, std::span<std::byte> data) override {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size()), "source rank ", src, " of ",
                 size());
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "tag ", tag);
    Mailbox& box = comm_->boxes[static_cast<size_t>(rank_)];
    auto op = std::make_shared<RecvOp>();
    op->src = src;
    op->tag = tag;
    op->buffer = data;
    std::unique_lock lock(box.mu);
    for (auto it = box.unexpected.begin(); it != box.unexpected.end(); ++it) {
      if (Matches(src, tag, it->src, it->tag)) {
        Message message = std::move(*it);
        box.unexpected.erase(it);
        lock.unlock();
        Fill(*op, message.src, message.tag, message.payload);
        op->phase = RecvPhase::kDone;
        return std::make_unique<RecvWork>(comm_, &box, std::move(op));
      }
    }
    box.posted.push_back(op);
    return std::make_unique<RecvWork>(comm_, &box, std::move(op));
  }

  StatusOr<ProbeResult> Probe(int src, int tag, Duration timeout) override {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size()), "source rank ", src);
    Mailbox& box = comm_->boxes[static_cast<size_t>(rank_)];
    std::unique_lock lock(box.mu);
    std::optional<ProbeResult> found;
    box.cv.wait_until(lock, DeadlineAfter(timeout), [&] {
      found = FindUnexpected(box, src, tag);
      return found.has_value();
    });
    if (found) return *found;
    return TimeoutError(fmt::format("no message from {} within {} ms (tag {})",
                                    PeerName(*comm_, src), timeout.count(), tag));
  }

  std::optional<ProbeResult> IProbe(int src, int tag) override {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size()), "source rank ", src);
    Mailbox& box = comm_->boxes[static_cast<size_t>(rank_)];
    std::lock_guard lock(box.mu);
    return FindUnexpected(box, src, tag);
  }

  StatusOr<std::unique_ptr<Transport>> Split(int color, int key, Duration timeout) override {
    const int n = size();
    const uint64_t sequence = split_sequence_++;
    const std::array<int64_t, 2> mine = {color, key};
    std::vector<std::array<int64_t, 2>> pairs(static_cast<size_t>(n));
    pairs[static_cast<size_t>(rank_)] = mine;
    const auto mine_bytes = std::as_bytes(std::span<const int64_t>(mine));
    for (int r = 0; r < n; ++r) {
      if (r != rank_) (void)ISend(r, kSplitTag, mine_bytes);
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

  uint64_t bytes_sent() const override {
    return counters_->bytes_sent.load(std::memory_order_relaxed);
  }
  uint64_t messages_sent() const override {
    return counters_->messages_sent.load(std::memory_order_relaxed);
  }

 private:
  static std::optional<ProbeResult> FindUnexpected(const Mailbox& box, int src, int tag) {
    for (const Message& m : box.unexpected) {
      if (Matches(src, tag, m.src, m.tag)) return ProbeResult{m.src, m.tag, m.payload.size()};
    }
    return std::nullopt;
  }

  void Deliver(Mailbox& box, int tag, std::span<const std::byte> data) {
    std::shared_ptr<RecvOp> op;
    {
      std::lock_guard lock(box.mu);
      op = ClaimPosted(box, rank_, tag);
    }
    if (op) {
      Fill(*op, rank_, tag, data);
      std::lock_guard lock(box.mu);
      op->phase = RecvPhase::kDone;
      box.cv.notify_all();
      return;
    }
    Message message{rank_, tag, std::vector<std::byte>(data.begin(), data.end())};
    std::lock_guard lock(box.mu);
    op = ClaimPosted(box, rank_, tag);
    if (op) {
      Fill(*op, rank_, tag, message.payload);
      op->phase = RecvPhase::kDone;
    } else {
      box.unexpected.push_back(std::move(message));
    }
    box.cv.notify_all();
  }

  std::shared_ptr<InProcWorld::State> world_;
  std::shared_ptr<Comm> comm_;
  const int rank_;
  std::shared_ptr<Counters> counters_;
  uint64_t split_sequence_ = 0;
};

}  // namespace

InProcWorld::InProcWorld(int size, InProcOptions options) {
  FRUGAL_CHECK_GT(size, 0, "world size");
  FRUGAL_CHECK_GE(options.ranks_per_host, 0, "ranks_per_host");
  state_ = std::make_shared<State>(size, options);
  state_->connected.assign(static_cast<size_t>(size), false);
}

InProcWorld::~InProcWorld() = default;

int InProcWorld::size() const { return state_->size; }

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

std::vector<Status> RunRanks(int size, const std::function<Status(Transport&)>& fn,
                             InProcOptions options) {
  InProcWorld world(size, options);
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

}  // namespace frugal
