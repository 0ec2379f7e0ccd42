// Pieces shared by the parameter server's sides (see ps_common.h), and the configuration's text.
#include "ps/ps_common.h"

#include <fmt/format.h>

#include <algorithm>

namespace frugal {

std::string ParameterServerConfig::Describe() const {
  std::string consistency;
  switch (this->consistency) {
    case PsConsistency::kBsp:
      consistency = "bsp";
      break;
    case PsConsistency::kSsp:
      consistency = fmt::format("ssp with staleness {}", staleness);
      break;
    case PsConsistency::kAsp:
      consistency = "asp";
      break;
    case PsConsistency::kBackup:
      consistency = fmt::format("backup with {} backup workers", backup);
      break;
    case PsConsistency::kLag:
      consistency =
          fmt::format("lag with window {}, xi {}, max-skip {}", lag.window, lag.xi, lag.max_skip);
      break;
  }
  if (weighted) consistency += ", weighted pushes";
  if (staleness_policy == StalenessPolicy::kDrop) {
    consistency += fmt::format(", stale updates above {} dropped", drop_above);
  } else if (staleness_policy == StalenessPolicy::kScale) {
    consistency += ", stale updates scaled";
  }
  if (!push_compress.empty()) {
    consistency += fmt::format(", pushes compressed with {}{}", push_compress,
                               push_error_feedback ? " and error feedback" : "");
  }
  if (!pull_compress.empty())
    consistency += fmt::format(", pulls compressed with {}", pull_compress);
  if (!push_compress.empty() || !pull_compress.empty())
    consistency += fmt::format(", seed {}", seed);
  return fmt::format("{} workers, {} servers, parts of at most {} bytes, {}", workers(), servers(),
                     part_bytes, consistency);
}

namespace ps_internal {

Clock::duration HeartbeatInterval(Duration timeout) {
  const Clock::duration eighth = std::chrono::duration_cast<Clock::duration>(timeout) / 8;
  return std::clamp<Clock::duration>(eighth, std::chrono::milliseconds(20),
                                     std::chrono::seconds(1));
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string RanksText(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

std::string AsText(std::span<const std::byte> payload) {
  std::string text;
  text.reserve(payload.size());
  for (std::byte b : payload) {
    const char c = static_cast<char>(b);
    text.push_back(c >= 32 && c < 127 ? c : '?');
  }
  return text;
}

Peers::Peers(const Transport& world, const ParameterServerConfig& config)
    : workers_(config.worker_ranks),
      servers_(config.server_ranks),
      worker_of_(static_cast<size_t>(world.size()), -1),
      server_of_(static_cast<size_t>(world.size()), -1) {
  for (size_t w = 0; w < workers_.size(); ++w) {
    FRUGAL_CHECK(workers_[w] >= 0 && workers_[w] < world.size(), "worker rank ", workers_[w]);
    worker_of_[static_cast<size_t>(workers_[w])] = static_cast<int>(w);
  }
  for (size_t s = 0; s < servers_.size(); ++s) {
    FRUGAL_CHECK(servers_[s] >= 0 && servers_[s] < world.size(), "server rank ", servers_[s]);
    FRUGAL_CHECK(worker_of_[static_cast<size_t>(servers_[s])] < 0, "rank ", servers_[s],
                 " is both a worker and a server");
    server_of_[static_cast<size_t>(servers_[s])] = static_cast<int>(s);
  }
}

int Peers::WorkerOf(int world_rank) const {
  if (world_rank < 0 || world_rank >= static_cast<int>(worker_of_.size())) return -1;
  return worker_of_[static_cast<size_t>(world_rank)];
}

int Peers::ServerOf(int world_rank) const {
  if (world_rank < 0 || world_rank >= static_cast<int>(server_of_.size())) return -1;
  return server_of_[static_cast<size_t>(world_rank)];
}

void PendingSends::Post(int dst, int tag, std::vector<std::byte> bytes) {
  Send& send = sends_.emplace_back();
  send.dst = dst;
  send.bytes = std::move(bytes);
  send.work = t_.ISend(dst, tag, send.bytes);
}

Status PendingSends::Reap() {
  Status first;
  while (!sends_.empty() && sends_.front().work->IsCompleted()) {
    Status s = sends_.front().work->Wait(Duration::zero());
    if (first.ok() && !s.ok()) {
      first = s.Annotate(
          fmt::format("parameter server: sending to {} rank {}", peers_, sends_.front().dst));
    }
    sends_.pop_front();
  }
  // Later sends may complete before an earlier large one.
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (!it->work->IsCompleted()) {
      ++it;
      continue;
    }
    Status s = it->work->Wait(Duration::zero());
    if (first.ok() && !s.ok()) {
      first = s.Annotate(fmt::format("parameter server: sending to {} rank {}", peers_, it->dst));
    }
    it = sends_.erase(it);
  }
  return first;
}

int PendingSends::PendingTo(int dst) const {
  return static_cast<int>(
      std::count_if(sends_.begin(), sends_.end(), [&](const Send& s) { return s.dst == dst; }));
}

void PendingSends::Drain(Duration bound) {
  const Clock::time_point deadline = Clock::now() + bound;
  for (Send& send : sends_) {
    const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
    if (left.count() <= 0) break;
    (void)send.work->Wait(left);
  }
  sends_.clear();
}

}  // namespace ps_internal
}  // namespace frugal
