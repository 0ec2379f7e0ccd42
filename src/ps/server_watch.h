// A parameter-server worker's deadlines (internal), with config.timeout = T: every server heard
// from (any message) within T, every pull answered within 2 T; and its heartbeats: one to every
// server it sent nothing to for HeartbeatInterval(T).
#pragma once

#include <vector>

#include "frugal/parameter_server.h"
#include "ps/client_keys.h"
#include "ps/ps_common.h"
#include "ps/sharding.h"

namespace frugal::ps_internal {

class ServerWatch {
 public:
  ServerWatch(const Peers& peers, const ParameterServerConfig& config);

  void Heard(int server) { heard_[static_cast<size_t>(server)] = Clock::now(); }
  void Sent(int server) { sent_[static_cast<size_t>(server)] = Clock::now(); }
  // Every server counts as heard from now (after a checkpoint, which kept them busy too).
  void HeardAll();
  // kTimeout naming the first server silent for more than T, or the first key whose pull is
  // unanswered after 2 T.
  Status Check(Clock::time_point now, const ShardPlan& plan, const ClientKeys& keys) const;
  // The servers due a heartbeat at `now`.
  std::vector<int> HeartbeatsDue(Clock::time_point now) const;

 private:
  const Peers& peers_;
  Duration timeout_;
  Clock::duration heartbeat_;
  std::vector<Clock::time_point> heard_;
  std::vector<Clock::time_point> sent_;
};

}  // namespace frugal::ps_internal
