#include "ps/push_queue.h"

namespace frugal::ps_internal {

std::optional<uint32_t> PushQueue::Next(const ShardPlan& plan) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    const uint32_t key = it->second;
    if (sent_.PendingTo(peers_.ServerRank(plan.parts[key].server)) >= kPushCredits) continue;
    queue_.erase(it);
    return key;
  }
  return std::nullopt;
}

}  // namespace frugal::ps_internal
