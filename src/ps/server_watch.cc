#include "ps/server_watch.h"

#include <fmt/format.h>

#include <algorithm>

namespace frugal::ps_internal {

ServerWatch::ServerWatch(const Peers& peers, const ParameterServerConfig& config)
    : peers_(peers),
      timeout_(config.timeout),
      heartbeat_(HeartbeatInterval(config.timeout)),
      heard_(static_cast<size_t>(config.servers()), Clock::now()),
      sent_(static_cast<size_t>(config.servers()), Clock::now()) {}

void ServerWatch::HeardAll() { std::fill(heard_.begin(), heard_.end(), Clock::now()); }

Status ServerWatch::Check(Clock::time_point now, const ShardPlan& plan,
                          const ClientKeys& keys) const {
  for (size_t s = 0; s < heard_.size(); ++s) {
    if (now - heard_[s] > timeout_) {
      return TimeoutError(fmt::format("parameter server: server rank {} sent nothing for {:.1f} s",
                                      peers_.ServerRank(static_cast<int>(s)),
                                      Seconds(now - heard_[s])));
    }
  }
  for (const KeyPart& part : plan.parts) {
    const auto& since = keys[part.key].pull_since;
    if (since && now - *since > 2 * timeout_) {
      return TimeoutError(fmt::format(
          "parameter server: the pull of key '{}' from server rank {} was not answered within "
          "{:.1f} s",
          part.name, peers_.ServerRank(part.server), Seconds(now - *since)));
    }
  }
  return Status::Ok();
}

std::vector<int> ServerWatch::HeartbeatsDue(Clock::time_point now) const {
  std::vector<int> due;
  for (size_t s = 0; s < sent_.size(); ++s) {
    if (now - sent_[s] >= heartbeat_) due.push_back(static_cast<int>(s));
  }
  return due;
}

}  // namespace frugal::ps_internal
