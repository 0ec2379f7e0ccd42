// The pushes of a parameter-server worker (internal): the keys waiting to be pushed, lowest
// priority value first (the parameter nearest the input), and the pushes sent and not yet
// complete. A server has at most kPushCredits unfinished pushes, so that a parameter submitted
// later with a lower priority value overtakes pushes still queued (P3's priority order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "frugal/transport.h"
#include "ps/ps_common.h"
#include "ps/sharding.h"

namespace frugal::ps_internal {

inline constexpr int kPushCredits = 2;

class PushQueue {
 public:
  PushQueue(Transport& world, const Peers& peers) : peers_(peers), sent_(world, "server") {}

  void Add(int priority, uint32_t key) { queue_.insert({priority, key}); }
  // Forgets the completed pushes; the first failed one's error, naming its server.
  Status Reap() { return sent_.Reap(); }
  // The first queued key, in priority order, whose server has a credit left; taken off the
  // queue. nullopt when there is none.
  std::optional<uint32_t> Next(const ShardPlan& plan);
  // Sends a push to `server`; it holds one of the server's credits until it completes.
  void Send(int server, std::vector<std::byte> bytes) {
    sent_.Post(peers_.ServerRank(server), kToServerTag, std::move(bytes));
  }
  // Waits up to `bound` for the pushes sent, then forgets them and the queued keys.
  void Drain(Duration bound) {
    sent_.Drain(bound);
    queue_.clear();
  }

 private:
  const Peers& peers_;
  PendingSends sent_;
  std::set<std::pair<int, uint32_t>> queue_;  // (priority, key)
};

}  // namespace frugal::ps_internal
