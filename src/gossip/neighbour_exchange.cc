// The neighbour exchange (see neighbour_exchange.h).
//
// Finish waits against one deadline for the whole round: first the probes of unknown-size
// receives (in the order of `from`; every neighbour posted its sends before waiting, so probing
// one after the other cannot deadlock), then every receive, then every send. On an expiry it
// names every neighbour whose message or whose receipt of ours is still missing.
#include "gossip/neighbour_exchange.h"

#include <fmt/format.h>

#include <algorithm>

#include "frugal/check.h"
#include "frugal/timer.h"

namespace frugal::gossip {
namespace {

Duration Remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
  return std::max(left, Duration(0));
}

}  // namespace

void NeighbourExchange::Start(Transport& t, int tag, std::span<const int> to,
                              std::span<const std::span<const std::byte>> payloads,
                              std::span<const int> from, size_t recv_bytes) {
  FRUGAL_INTERNAL_ASSERT(!in_flight_, "a gossip round started before the previous one finished");
  FRUGAL_CHECK_EQ(to.size(), payloads.size(), "one payload per out-neighbour");
  in_flight_ = true;
  tag_ = tag;
  recv_bytes_ = recv_bytes;
  to_.assign(to.begin(), to.end());
  from_.assign(from.begin(), from.end());
  buffers_.resize(from_.size());
  sizes_.assign(from_.size(), recv_bytes);
  recvs_.clear();
  recvs_.resize(from_.size());
  sends_.clear();
  if (recv_bytes > 0) {
    for (size_t k = 0; k < from_.size(); ++k) {
      buffers_[k].resize((recv_bytes + sizeof(float) - 1) / sizeof(float));
      recvs_[k] = t.IRecv(from_[k], tag,
                          std::as_writable_bytes(std::span<float>(buffers_[k])).first(recv_bytes));
    }
  }
  for (size_t k = 0; k < to_.size(); ++k) sends_.push_back(t.ISend(to_[k], tag, payloads[k]));
}

void NeighbourExchange::Start(Transport& t, int tag, std::span<const int> to,
                              std::span<const std::byte> payload, std::span<const int> from,
                              size_t recv_bytes) {
  std::vector<std::span<const std::byte>> payloads(to.size(), payload);
  Start(t, tag, to, payloads, from, recv_bytes);
}

Status NeighbourExchange::Finish(Transport& t, Duration timeout, const std::string& what) {
  FRUGAL_INTERNAL_ASSERT(in_flight_, "gossip round finished twice");
  in_flight_ = false;
  const auto deadline = Clock::now() + timeout;
  auto missing = [&](const std::string& whose, std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return TimeoutError(fmt::format("{}: no {} from rank{} {} within {} ms", what, whose,
                                    ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "),
                                    timeout.count()));
  };
  for (size_t k = 0; k < from_.size(); ++k) {
    if (recvs_[k]) continue;
    StatusOr<ProbeResult> probe = t.Probe(from_[k], tag_, Remaining(deadline));
    if (!probe.ok()) {
      if (probe.status().code() != StatusCode::kTimeout) return probe.status().Annotate(what);
      std::vector<int> late(from_.begin() + static_cast<long>(k), from_.end());
      return missing("message", late);
    }
    sizes_[k] = probe->bytes;
    buffers_[k].resize((probe->bytes + sizeof(float) - 1) / sizeof(float));
    recvs_[k] = t.IRecv(from_[k], tag_,
                        std::as_writable_bytes(std::span<float>(buffers_[k])).first(probe->bytes));
  }
  for (auto* works : {&recvs_, &sends_}) {
    const bool receiving = works == &recvs_;
    for (size_t k = 0; k < works->size(); ++k) {
      Work& work = *(*works)[k];
      Status status = work.Wait(Remaining(deadline));
      if (status.code() == StatusCode::kTimeout) {
        std::vector<int> late;
        for (size_t m = k; m < works->size(); ++m) {
          if (!(*works)[m]->IsCompleted()) late.push_back(receiving ? from_[m] : to_[m]);
        }
        return missing(receiving ? "message" : "receipt of this rank's message", late);
      }
      FRUGAL_RETURN_IF_ERROR(status.Annotate(what));
      if (receiving && work.bytes() != sizes_[k]) {
        return MalformedError(fmt::format("{}: rank {} sent {} bytes where {} were expected", what,
                                          from_[k], work.bytes(), sizes_[k]));
      }
    }
  }
  sends_.clear();
  recvs_.clear();
  return Status::Ok();
}

bool NeighbourExchange::Progress() {
  if (!in_flight_) return true;
  bool done = true;
  for (auto* works : {&recvs_, &sends_}) {
    for (std::unique_ptr<Work>& work : *works) {
      if (work && !work->IsCompleted()) done = false;
    }
  }
  return done;
}

std::span<const std::byte> NeighbourExchange::Received(size_t k) const {
  return std::as_bytes(std::span<const float>(buffers_[k])).first(sizes_[k]);
}

std::span<const float> NeighbourExchange::ReceivedFloats(size_t k) const {
  return std::span<const float>(buffers_[k]).first(sizes_[k] / sizeof(float));
}

}  // namespace frugal::gossip
