// The negotiation cycle, all to all (Horovod's coordination without a coordinator).
//
// RunCycle builds this rank's CycleMessage (a bit per cached tensor whose head is pending with
// the cached description, a descriptor otherwise, the waiting flag, rank 0's merge plan once),
// exchanges it all to all with tag kNegotiationTag (Exchange: ISend to every peer, then
// IProbe/IRecv from each until all have answered, inspecting stalls meanwhile and bounded by the
// timeout) and evaluates the messages with EvaluateCycle. Every rank sees the same messages, so
// every rank derives the same outcome.
//
// Stall inspector: while waiting in Exchange, each head pending here longer than stall_warning
// and missing on some rank (according to each rank's latest message) is reported once, by the
// lowest rank that submitted it; after stall_shutdown the cycle fails with kTimeout.
//
// Abort notices travel on their own tag (kAbortTag), outside the cycles, so that a peer reads
// one whatever cycle it is in.
#include "engine/negotiator.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace frugal::engine_internal {
namespace {

constexpr int kNegotiationTag = kEngineTags[0];
constexpr int kAbortTag = kEngineTags[1];
constexpr auto kStallCheckPeriod = std::chrono::milliseconds(100);
constexpr Duration kAbortSendBound = std::chrono::milliseconds(200);

void BackOff(Clock::duration waited) {
  if (waited < std::chrono::microseconds(50)) return;
  if (waited < std::chrono::milliseconds(1)) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(
      std::min<Clock::duration>(waited / 16, std::chrono::microseconds(500)));
}

std::string HeadNames(std::span<const PendingHead> heads, size_t limit) {
  std::vector<std::string> names;
  for (const PendingHead& head : heads) {
    if (names.size() == limit) {
      names.push_back("...");
      break;
    }
    names.push_back("'" + head.descriptor.name + "'");
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

Negotiator::Negotiator(Transport& t, NegotiatorOptions options)
    : t_(t),
      options_(std::move(options)),
      rank_(t.rank()),
      size_(t.size()),
      reported_(static_cast<size_t>(t.size())) {}

StatusOr<CycleOutcome> Negotiator::RunCycle(std::span<const PendingHead> heads, bool waiting,
                                            std::optional<std::vector<std::vector<uint32_t>>> plan,
                                            const std::function<bool()>& stop_requested) {
  CycleMessage mine;
  mine.cycle = cycle_;
  mine.cache_size = cache_.size();
  mine.waiting = waiting;
  mine.plan = std::move(plan);
  for (const PendingHead& head : heads) {
    const std::optional<uint32_t> id = cache_.Find(head.descriptor.name);
    if (id && cache_.at(*id) == head.descriptor) {
      mine.SetBit(*id);
    } else {
      mine.descriptors.push_back(head.descriptor);
    }
  }
  std::vector<CycleMessage> all;
  FRUGAL_RETURN_IF_ERROR(Exchange(mine, heads, stop_requested, all));
  ++cycle_;
  return EvaluateCycle(cache_, all);
}

Status Negotiator::Exchange(const CycleMessage& mine, std::span<const PendingHead> heads,
                            const std::function<bool()>& stop_requested,
                            std::vector<CycleMessage>& all) {
  all.assign(static_cast<size_t>(size_), CycleMessage());
  all[static_cast<size_t>(rank_)] = mine;
  reported_[static_cast<size_t>(rank_)] = ReportedNames(mine);
  if (size_ == 1) return Status::Ok();
  out_message_ = EncodeCycleMessage(mine);
  bytes_sent_ += out_message_.size() * static_cast<uint64_t>(size_ - 1);
  std::vector<std::unique_ptr<Work>> sends;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) sends.push_back(t_.ISend(p, kNegotiationTag, out_message_));
  }
  std::vector<bool> got(static_cast<size_t>(size_), false);
  got[static_cast<size_t>(rank_)] = true;
  int missing = size_ - 1;
  const auto start = Clock::now();
  auto last_inspection = start;
  std::vector<std::byte> buffer;
  while (missing > 0) {
    FRUGAL_RETURN_IF_ERROR(PollAbort());
    bool progress = false;
    for (int p = 0; p < size_; ++p) {
      if (got[static_cast<size_t>(p)]) continue;
      StatusOr<std::optional<ProbeResult>> found = t_.IProbe(p, kNegotiationTag);
      if (!found.ok()) return found.status().Annotate("negotiation");
      const std::optional<ProbeResult>& probe = *found;
      if (!probe) continue;
      buffer.resize(probe->bytes);
      std::unique_ptr<Work> recv = t_.IRecv(p, kNegotiationTag, buffer);
      FRUGAL_RETURN_IF_ERROR(recv->Wait(options_.timeout).Annotate("negotiation"));
      StatusOr<CycleMessage> message = DecodeCycleMessage(std::span(buffer.data(), recv->bytes()));
      if (!message.ok()) return message.status().Annotate(fmt::format("from rank {}", p));
      if (message->cycle != mine.cycle) {
        return MalformedError(
            fmt::format("negotiation: rank {} sent a message of cycle {}, this rank is in cycle {}",
                        p, message->cycle, mine.cycle));
      }
      reported_[static_cast<size_t>(p)] = ReportedNames(*message);
      all[static_cast<size_t>(p)] = std::move(*message);
      got[static_cast<size_t>(p)] = true;
      --missing;
      progress = true;
    }
    if (missing == 0) break;
    if (progress) continue;
    const auto now = Clock::now();
    if (stop_requested()) return CancelledError("the engine was shut down");
    if (now - last_inspection >= kStallCheckPeriod) {
      last_inspection = now;
      FRUGAL_RETURN_IF_ERROR(InspectStalls(now, heads));
    }
    if (now - start >= options_.timeout) {
      std::vector<int> silent;
      for (int p = 0; p < size_; ++p) {
        if (!got[static_cast<size_t>(p)]) silent.push_back(p);
      }
      return TimeoutError(fmt::format(
          "negotiation: no answer from {} {} within {} ms while {} tensor(s) wait here ({})",
          silent.size() == 1 ? "rank" : "ranks", JoinRanks(silent), options_.timeout.count(),
          heads.size(), HeadNames(heads, 4)));
    }
    BackOff(now - start);
  }
  for (auto& send : sends) {
    FRUGAL_RETURN_IF_ERROR(send->Wait(options_.timeout).Annotate("negotiation"));
  }
  return Status::Ok();
}

std::set<std::string> Negotiator::ReportedNames(const CycleMessage& m) const {
  std::set<std::string> names;
  for (uint32_t id = 0; id < std::min(m.cache_size, cache_.size()); ++id) {
    if (m.Bit(id)) names.insert(cache_.at(id).name);
  }
  for (const TensorDescriptor& d : m.descriptors) names.insert(d.name);
  return names;
}

Status Negotiator::InspectStalls(Clock::time_point now, std::span<const PendingHead> heads) {
  if (options_.stall_warning <= Duration::zero() && options_.stall_shutdown <= Duration::zero()) {
    return Status::Ok();
  }
  std::vector<StallReport> reports;
  for (const PendingHead& head : heads) {
    const std::string& name = head.descriptor.name;
    const auto age = now - head.submitted;
    auto warned = warned_.find(name);
    const bool already = warned != warned_.end() && warned->second == head.submitted;
    const bool warn =
        options_.stall_warning > Duration::zero() && age >= options_.stall_warning && !already;
    const bool shut = options_.stall_shutdown > Duration::zero() && age >= options_.stall_shutdown;
    if (!warn && !shut) continue;
    StallReport report;
    report.tensor = name;
    report.seconds = std::chrono::duration<double>(age).count();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || reported_[static_cast<size_t>(r)].count(name) > 0) {
        report.submitted.push_back(r);
      } else {
        report.missing.push_back(r);
      }
    }
    if (report.missing.empty()) continue;
    report.shutdown = shut;
    if (!shut) warned_[name] = head.submitted;
    if (shut || report.submitted.front() == rank_) reports.push_back(std::move(report));
    if (shut) break;
  }
  for (const StallReport& report : reports) {
    Report(report);
    if (report.shutdown) {
      return TimeoutError("stall inspector: " + report.ToString() + "; shutting down");
    }
  }
  return Status::Ok();
}

void Negotiator::Report(const StallReport& report) {
  if (options_.on_stall) {
    options_.on_stall(report);
  } else {
    options_.logger.Warning("stall inspector: " + report.ToString() +
                            (report.shutdown ? "; shutting down" : ""));
  }
}

void Negotiator::SendAbort(const Status& status) {
  if (size_ == 1) return;
  const auto deadline = Clock::now() + kAbortSendBound;
  abort_message_ = EncodeAbortMessage({status.code(), std::string(status.message())});
  bytes_sent_ += abort_message_.size() * static_cast<uint64_t>(size_ - 1);
  std::vector<std::unique_ptr<Work>> sends;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) sends.push_back(t_.ISend(p, kAbortTag, abort_message_));
  }
  for (auto& send : sends) {
    const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
    (void)send->Wait(std::chrono::duration_cast<Duration>(left));
  }
}

Status Negotiator::PollAbort() {
  if (size_ == 1) return Status::Ok();
  StatusOr<std::optional<ProbeResult>> found = t_.IProbe(kAnySource, kAbortTag);
  if (!found.ok()) return found.status().Annotate("abort notice");
  const std::optional<ProbeResult>& probe = *found;
  if (!probe) return Status::Ok();
  std::vector<std::byte> buffer(probe->bytes);
  std::unique_ptr<Work> recv = t_.IRecv(probe->source, kAbortTag, buffer);
  FRUGAL_RETURN_IF_ERROR(recv->Wait(options_.timeout).Annotate("abort notice"));
  peer_failed_ = true;
  StatusOr<AbortMessage> message = DecodeAbortMessage(std::span(buffer.data(), recv->bytes()));
  if (!message.ok()) return message.status().Annotate(fmt::format("from rank {}", probe->source));
  return Status(message->code, fmt::format("rank {} failed: {}", probe->source, message->reason));
}

}  // namespace frugal::engine_internal
