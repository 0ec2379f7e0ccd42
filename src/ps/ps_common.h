// Pieces the parameter server's two sides share (internal): tags, timing, the map between world
// ranks and roles, and the sends a side has posted but not seen complete.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/backoff.h"
#include "frugal/parameter_server.h"
#include "frugal/transport.h"

namespace frugal::ps_internal {

inline constexpr int kToServerTag = kParameterServerTags[0];
inline constexpr int kToWorkerTag = kParameterServerTags[1];

// How often a side checks its deadlines and whether a heartbeat is due.
inline constexpr auto kTick = std::chrono::milliseconds(20);
// How long a failing side waits for its abort messages to leave.
inline constexpr Duration kAbortSendBound = std::chrono::milliseconds(200);
// Polling while nothing arrives: spin 50 us, yield until 1 ms, then sleep up to 500 us.
inline constexpr BackOffPolicy kServerBackOff{
    std::chrono::microseconds(50), std::chrono::milliseconds(1), std::chrono::microseconds(500)};

// A heartbeat goes out when nothing else was sent for this long: an eighth of the timeout, within
// [20 ms, 1 s].
Clock::duration HeartbeatInterval(Duration timeout);

double Seconds(Clock::duration d);
// "rank 3" or "ranks 1, 4".
std::string RanksText(const std::vector<int>& ranks);
// The bytes of a kBytes payload as text, with bytes outside printable ASCII replaced by '?'.
std::string AsText(std::span<const std::byte> payload);

// World ranks and roles.
class Peers {
 public:
  Peers(const Transport& world, const ParameterServerConfig& config);
  int WorkerOf(int world_rank) const;  // -1 if not a worker
  int ServerOf(int world_rank) const;  // -1 if not a server
  int WorkerRank(int worker) const { return workers_[static_cast<size_t>(worker)]; }
  int ServerRank(int server) const { return servers_[static_cast<size_t>(server)]; }

 private:
  std::vector<int> workers_;
  std::vector<int> servers_;
  std::vector<int> worker_of_;
  std::vector<int> server_of_;
};

// Sends posted and not yet complete; the buffers live here until their send is.
class PendingSends {
 public:
  // `peers` names the role of the destinations in messages ("worker", "server").
  PendingSends(Transport& t, std::string peers) : t_(t), peers_(std::move(peers)) {}
  void Post(int dst, int tag, std::vector<std::byte> bytes);
  // Forgets the completed sends; the first failed one's error (naming the destination).
  Status Reap();
  // Waits up to `bound` for every send to complete, then forgets them all.
  void Drain(Duration bound);
  size_t size() const { return sends_.size(); }
  // The sends to `dst` posted and not seen complete.
  int PendingTo(int dst) const;

 private:
  struct Send {
    int dst = 0;
    std::vector<std::byte> bytes;
    std::unique_ptr<Work> work;
  };
  Transport& t_;
  std::string peers_;
  std::deque<Send> sends_;
};

}  // namespace frugal::ps_internal
