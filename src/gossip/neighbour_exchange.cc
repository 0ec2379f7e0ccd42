// The neighbour exchange (see neighbour_exchange.h).
//
// Start posts, for each in-neighbour k, the receives of its message: one per segment of
// kSegmentBytes into consecutive slices of buffers_[k] when the size is known, none when it is
// not. Then, for each out-neighbour, the sends: one per segment of its payload when receives have
// a known size, else the whole payload. Segments of one message share the tag and the pair of
// ranks, and point-to-point messages between two ranks on one tag are not overtaken, so segment
// j lands in the receive posted j-th. Two rounds in flight on one tag (SGP's overlap) stay apart
// the same way: the earlier round posted all its receives first.
//
// Finish waits against one deadline for the whole round: first the probes of unknown-size
// receives (in the order of `from`; every neighbour posted its sends before waiting, so probing
// one after the other cannot deadlock), then every receive, then every send. On an expiry it
// names every neighbour whose message or whose receipt of ours is still missing.
#include "gossip/neighbour_exchange.h"

#include <fmt/format.h>

#include <algorithm>

#include "frugal/check.h"
#include "frugal/mpi_transport.h"
#include "frugal/timer.h"

namespace frugal::gossip {
namespace {

static_assert(NeighbourExchange::kSegmentBytes <= kTcpEagerBytes,
              "a segment goes eagerly over the MPI transport's TCP connections");

Duration Remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
  return std::max(left, Duration(0));
}

// Bytes of segment j of a message of `bytes` (the last one is shorter).
size_t SegmentBytes(size_t bytes, size_t j) {
  return std::min(NeighbourExchange::kSegmentBytes, bytes - j * NeighbourExchange::kSegmentBytes);
}

size_t SegmentCount(size_t bytes) {
  return std::max<size_t>(
      1, (bytes + NeighbourExchange::kSegmentBytes - 1) / NeighbourExchange::kSegmentBytes);
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
  send_peer_.clear();
  if (recv_bytes > 0) {
    for (size_t k = 0; k < from_.size(); ++k) {
      buffers_[k].resize((recv_bytes + sizeof(float) - 1) / sizeof(float));
      std::span<std::byte> buffer =
          std::as_writable_bytes(std::span<float>(buffers_[k])).first(recv_bytes);
      for (size_t j = 0; j < SegmentCount(recv_bytes); ++j) {
        recvs_[k].push_back(
            t.IRecv(from_[k], tag, buffer.subspan(j * kSegmentBytes, SegmentBytes(recv_bytes, j))));
      }
    }
  }
  for (size_t k = 0; k < to_.size(); ++k) {
    const size_t bytes = payloads[k].size();
    const size_t segments = recv_bytes > 0 ? SegmentCount(bytes) : 1;
    for (size_t j = 0; j < segments; ++j) {
      sends_.push_back(
          t.ISend(to_[k], tag,
                  segments == 1 ? payloads[k]
                                : payloads[k].subspan(j * kSegmentBytes, SegmentBytes(bytes, j))));
      send_peer_.push_back(k);
    }
  }
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
    if (!recvs_[k].empty()) continue;
    StatusOr<ProbeResult> probe = t.Probe(from_[k], tag_, Remaining(deadline));
    if (!probe.ok()) {
      if (probe.status().code() != StatusCode::kTimeout) return probe.status().Annotate(what);
      std::vector<int> late(from_.begin() + static_cast<long>(k), from_.end());
      return missing("message", late);
    }
    sizes_[k] = probe->bytes;
    buffers_[k].resize((probe->bytes + sizeof(float) - 1) / sizeof(float));
    recvs_[k].push_back(t.IRecv(
        from_[k], tag_, std::as_writable_bytes(std::span<float>(buffers_[k])).first(probe->bytes)));
  }
  for (size_t k = 0; k < from_.size(); ++k) {
    for (size_t j = 0; j < recvs_[k].size(); ++j) {
      Work& work = *recvs_[k][j];
      Status status = work.Wait(Remaining(deadline));
      if (status.code() == StatusCode::kTimeout) {
        // The expired wait has given its receive up (it counts as completed now).
        std::vector<int> late = {from_[k]};
        for (size_t m = k + 1; m < from_.size(); ++m) {
          for (const std::unique_ptr<Work>& segment : recvs_[m]) {
            if (!segment->IsCompleted()) late.push_back(from_[m]);
          }
        }
        return missing("message", late);
      }
      FRUGAL_RETURN_IF_ERROR(status.Annotate(what));
      const size_t expected = recv_bytes_ > 0 ? SegmentBytes(sizes_[k], j) : sizes_[k];
      if (work.bytes() != expected) {
        return MalformedError(fmt::format("{}: rank {} sent {} bytes where {} were expected", what,
                                          from_[k], work.bytes(), expected));
      }
    }
  }
  for (size_t i = 0; i < sends_.size(); ++i) {
    Status status = sends_[i]->Wait(Remaining(deadline));
    if (status.code() == StatusCode::kTimeout) {
      std::vector<int> late = {to_[send_peer_[i]]};
      for (size_t m = i + 1; m < sends_.size(); ++m) {
        if (!sends_[m]->IsCompleted()) late.push_back(to_[send_peer_[m]]);
      }
      return missing("receipt of this rank's message", late);
    }
    FRUGAL_RETURN_IF_ERROR(status.Annotate(what));
  }
  sends_.clear();
  recvs_.clear();
  return Status::Ok();
}

bool NeighbourExchange::Progress() {
  if (!in_flight_) return true;
  bool done = true;
  for (const std::unique_ptr<Work>& work : sends_) {
    if (!work->IsCompleted()) done = false;
  }
  for (const auto& segments : recvs_) {
    for (const std::unique_ptr<Work>& work : segments) {
      if (!work->IsCompleted()) done = false;
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
