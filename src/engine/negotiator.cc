// The negotiation cycle with a coordinator (Horovod's coordination): rank 0 gathers, decides and
// tells every rank, so a cycle costs 2 (n - 1) messages instead of n (n - 1) all to all.
//
// A cycle: every rank builds its CycleMessage (a bit per cached tensor whose head is pending with
// the cached description, a descriptor otherwise, its waiting flag). A rank other than the
// coordinator sends it to rank 0 (kReportTag) and waits for the decision (kDecisionTag). The
// coordinator receives one report from every rank (any source; a rank sends its next report only
// after the decision, so two reports from one rank in a cycle are malformed), evaluates them with
// EvaluateCycle, adds its own merge plan, and sends every rank the DecisionMessage: the tensors
// its cache gained and the outcome. Every rank applies it to a cache that followed the same
// decisions, so every rank derives the same agreed tensors, failures, plan and end of session.
//
// Waiting is bounded: the coordinator waits `timeout` for the reports and then fails naming the
// ranks that did not report (at once, with kPeerLost, for a rank the transport knows to be gone);
// the others wait twice as long for the decision, so that the coordinator's failure, which names
// the silent ranks, reaches them first (as an abort notice).
//
// Stall inspector (the coordinator): it keeps, per rank, the tensors of its latest report that are
// still pending, and when each tensor was first seen pending (the submission time for its own).
// Every kStallCheckPeriod, while waiting for reports or after a cycle, a tensor pending on some
// ranks only longer than stall_warning is reported once (on_stall), naming the ranks that
// submitted it and those that did not; after stall_shutdown the cycle fails with kTimeout. A tensor
// pending for the whole timeout on some ranks while the others report without it also fails with
// kTimeout: they answer, but the tensor would never be reduced (a rank that does not answer at all
// is named by the timeout of the wait for its report instead).
//
// Abort notices travel on their own tag (kAbortTag), outside the cycles, so that a peer reads one
// whatever it is waiting for.
//
// Blame after a failed reduction (ResolveReductionFailure). Waits inside a reduction form chains:
// in a ring where rank 2 froze, rank 0 waits for rank 2 and rank 1 waits for rank 0, which cannot
// send on what it never received. Both waits expire at about the same time, in either order, so
// a rank that timed out does not simply adopt the first notice it reads:
//  - a rank whose reduction timed out and that has no notice yet sends its own notice at once,
//    then waits at most ReplyBound() for a peer's notice (the rank it waited for, if alive, is
//    itself waiting for someone and will time out within about the same timeout);
//  - when its own failure and the peer's notice are both timeouts, the rank reports its own wait
//    (which names the rank it waited for) with the peer's failure attached, and its own failure
//    counts as its own, so that its notice goes out too;
//  - otherwise the peer's notice is the cause (a peer that failed for another reason stopped
//    answering, which is why this rank timed out), and without one this rank's own failure is.
// Rank 0 above thus names rank 2 even when rank 1's notice reached it first, and rank 1 does not
// end the job before rank 0 has reported: it waits for rank 0's notice, which names rank 2 too.
#include "engine/negotiator.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/abort_message.h"
#include "engine/decision.h"
#include "frugal/backoff.h"

namespace frugal::engine_internal {
namespace {

constexpr int kReportTag = kEngineTags[0];
constexpr int kAbortTag = kEngineTags[1];
constexpr int kDecisionTag = kEngineTags[2];
constexpr auto kStallCheckPeriod = std::chrono::milliseconds(100);
constexpr Duration kAbortSendBound = std::chrono::milliseconds(200);

void BackOff(Clock::duration waited) {
  frugal::BackOff(BackOffPolicy{std::chrono::microseconds(50), std::chrono::milliseconds(1),
                                std::chrono::microseconds(500)},
                  waited);
}

std::string Quoted(const std::set<std::string>& names, size_t limit) {
  std::vector<std::string> quoted;
  for (const std::string& name : names) {
    if (quoted.size() == limit) {
      quoted.push_back("...");
      break;
    }
    quoted.push_back("'" + name + "'");
  }
  return fmt::format("{}", fmt::join(quoted, ", "));
}

// A message waiting now, with a transport error annotated.
StatusOr<std::optional<ProbeResult>> ProbeNow(Transport& t, int src, int tag,
                                              std::string_view what) {
  StatusOr<std::optional<ProbeResult>> found = t.IProbe(src, tag);
  if (!found.ok()) return found.status().Annotate(what);
  return found;
}

}  // namespace

Negotiator::Negotiator(Transport& t, NegotiatorOptions options)
    : t_(t),
      options_(std::move(options)),
      rank_(t.rank()),
      size_(t.size()),
      pending_at_(static_cast<size_t>(t.size())),
      answered_(static_cast<size_t>(t.size()), true),
      last_inspection_(Clock::now()) {}

StatusOr<CycleOutcome> Negotiator::RunCycle(std::span<const PendingHead> heads, bool waiting,
                                            std::optional<std::vector<std::vector<uint32_t>>> plan,
                                            const std::function<bool()>& stop_requested) {
  CycleMessage mine;
  mine.cycle = cycle_;
  mine.cache_size = cache_.size();
  mine.waiting = waiting;
  for (const PendingHead& head : heads) {
    const std::optional<uint32_t> id = cache_.Find(head.descriptor.name);
    if (id && cache_.at(*id) == head.descriptor) {
      mine.SetBit(*id);
    } else {
      mine.descriptors.push_back(head.descriptor);
    }
  }
  StatusOr<CycleOutcome> outcome =
      rank_ == 0 ? Coordinate(std::move(mine), heads, std::move(plan), stop_requested)
                 : Follow(mine, heads, stop_requested);
  if (outcome.ok()) ++cycle_;
  return outcome;
}

StatusOr<CycleOutcome> Negotiator::Coordinate(
    CycleMessage mine, std::span<const PendingHead> heads,
    std::optional<std::vector<std::vector<uint32_t>>> plan,
    const std::function<bool()>& stop_requested) {
  const auto start = Clock::now();
  for (const PendingHead& head : heads)
    first_seen_.try_emplace(head.descriptor.name, head.submitted);
  SetPending(0, ReportedNames(mine), start);
  std::vector<CycleMessage> all(static_cast<size_t>(size_));
  std::vector<bool>& got = answered_;
  got.assign(static_cast<size_t>(size_), false);
  all[0] = std::move(mine);
  got[0] = true;
  int missing = size_ - 1;
  while (missing > 0) {
    FRUGAL_RETURN_IF_ERROR(PollAbort());
    FRUGAL_ASSIGN_OR_RETURN(std::optional<ProbeResult> probe,
                            ProbeNow(t_, kAnySource, kReportTag, "negotiation"));
    if (probe) {
      FRUGAL_ASSIGN_OR_RETURN(CycleMessage report, ReceiveReport(*probe));
      const auto r = static_cast<size_t>(probe->source);
      if (got[r]) {
        return MalformedError(
            fmt::format("negotiation: rank {} reported twice in cycle {}", probe->source, cycle_));
      }
      SetPending(probe->source, ReportedNames(report), Clock::now());
      all[r] = std::move(report);
      got[r] = true;
      --missing;
      continue;
    }
    const auto now = Clock::now();
    if (stop_requested()) return CancelledError("the engine was shut down");
    if (now - last_inspection_ >= kStallCheckPeriod) {
      // A rank the transport knows to be gone fails the cycle now (kPeerLost), not at the timeout.
      for (int p = 1; p < size_; ++p) {
        if (!got[static_cast<size_t>(p)]) {
          FRUGAL_RETURN_IF_ERROR(ProbeNow(t_, p, kReportTag, "negotiation").status());
        }
      }
      FRUGAL_RETURN_IF_ERROR(InspectStalls(now));
    }
    if (now - start >= options_.timeout) {
      std::vector<int> silent;
      for (int p = 0; p < size_; ++p) {
        if (!got[static_cast<size_t>(p)]) silent.push_back(p);
      }
      return TimeoutError(fmt::format(
          "negotiation: no answer from {} within {} ms while {} tensor(s) wait ({})",
          RankWord(silent), options_.timeout.count(), first_seen_.size(), PendingNames(4)));
    }
    BackOff(now - start);
  }
  const uint32_t cache_size_before = cache_.size();
  FRUGAL_ASSIGN_OR_RETURN(CycleOutcome outcome, EvaluateCycle(cache_, all));
  outcome.plan = std::move(plan);
  ClearDecided(outcome);
  const auto now = Clock::now();  // every rank has answered: got is all true
  if (now - last_inspection_ >= kStallCheckPeriod) FRUGAL_RETURN_IF_ERROR(InspectStalls(now));
  if (size_ == 1) return outcome;
  out_message_ = EncodeDecision(MakeDecision(cycle_, size_, cache_, cache_size_before, outcome));
  bytes_sent_ += out_message_.size() * static_cast<uint64_t>(size_ - 1);
  std::vector<std::unique_ptr<Work>> sends;
  for (int p = 1; p < size_; ++p) sends.push_back(t_.ISend(p, kDecisionTag, out_message_));
  FRUGAL_RETURN_IF_ERROR(WaitForSends(sends, stop_requested));
  return outcome;
}

Status Negotiator::WaitForSends(std::vector<std::unique_ptr<Work>>& sends,
                                const std::function<bool()>& stop_requested) {
  const auto start = Clock::now();
  while (true) {
    std::vector<int> waiting;
    for (size_t i = 0; i < sends.size(); ++i) {
      if (!sends[i]->IsCompleted()) {
        waiting.push_back(static_cast<int>(i) + 1);
        continue;
      }
      FRUGAL_RETURN_IF_ERROR(sends[i]->Wait(Duration::zero()).Annotate("negotiation decision"));
    }
    if (waiting.empty()) return Status::Ok();
    // A peer that failed meanwhile does not take its decision: its notice says why.
    FRUGAL_RETURN_IF_ERROR(PollAbort());
    const auto now = Clock::now();
    if (stop_requested()) return CancelledError("the engine was shut down");
    if (now - start >= options_.timeout) {
      return TimeoutError(fmt::format("negotiation: {} did not take the decision within {} ms",
                                      RankWord(waiting), options_.timeout.count()));
    }
    BackOff(now - start);
  }
}

StatusOr<CycleMessage> Negotiator::ReceiveReport(const ProbeResult& probe) {
  std::vector<std::byte> buffer(probe.bytes);
  std::unique_ptr<Work> recv = t_.IRecv(probe.source, kReportTag, buffer);
  FRUGAL_RETURN_IF_ERROR(recv->Wait(options_.timeout).Annotate("negotiation"));
  StatusOr<CycleMessage> report = DecodeCycleMessage(std::span(buffer.data(), recv->bytes()));
  if (!report.ok()) return report.status().Annotate(fmt::format("from rank {}", probe.source));
  if (report->cycle != cycle_) {
    return MalformedError(
        fmt::format("negotiation: rank {} sent a message of cycle {}, this rank is in cycle {}",
                    probe.source, report->cycle, cycle_));
  }
  return report;
}

StatusOr<CycleOutcome> Negotiator::Follow(const CycleMessage& mine,
                                          std::span<const PendingHead> heads,
                                          const std::function<bool()>& stop_requested) {
  out_message_ = EncodeCycleMessage(mine);
  bytes_sent_ += out_message_.size();
  std::unique_ptr<Work> send = t_.ISend(0, kReportTag, out_message_);
  const auto start = Clock::now();
  const Duration patience = 2 * options_.timeout;
  std::vector<std::byte> buffer;
  while (true) {
    FRUGAL_RETURN_IF_ERROR(PollAbort());
    FRUGAL_ASSIGN_OR_RETURN(std::optional<ProbeResult> probe,
                            ProbeNow(t_, 0, kDecisionTag, "negotiation"));
    if (probe) {
      buffer.resize(probe->bytes);
      std::unique_ptr<Work> recv = t_.IRecv(0, kDecisionTag, buffer);
      FRUGAL_RETURN_IF_ERROR(recv->Wait(options_.timeout).Annotate("negotiation"));
      StatusOr<DecisionMessage> decision = DecodeDecision(std::span(buffer.data(), recv->bytes()));
      if (!decision.ok()) return decision.status().Annotate("from rank 0");
      FRUGAL_ASSIGN_OR_RETURN(CycleOutcome outcome,
                              ApplyDecision(cache_, *decision, cycle_, size_));
      FRUGAL_RETURN_IF_ERROR(send->Wait(options_.timeout).Annotate("negotiation report"));
      return outcome;
    }
    const auto now = Clock::now();
    if (stop_requested()) return CancelledError("the engine was shut down");
    if (now - start >= patience) {
      std::set<std::string> names;
      for (const PendingHead& head : heads) names.insert(head.descriptor.name);
      return TimeoutError(fmt::format(
          "negotiation: no decision from the coordinator (rank 0) within {} ms while {} tensor(s) "
          "wait here ({})",
          patience.count(), heads.size(), Quoted(names, 4)));
    }
    BackOff(now - start);
  }
}

StatusOr<bool> Negotiator::PeerReportWaiting() {
  if (!coordinator()) return false;
  FRUGAL_ASSIGN_OR_RETURN(std::optional<ProbeResult> probe,
                          ProbeNow(t_, kAnySource, kReportTag, "negotiation"));
  return probe.has_value();
}

std::set<std::string> Negotiator::ReportedNames(const CycleMessage& m) const {
  std::set<std::string> names;
  for (uint32_t id = 0; id < std::min(m.cache_size, cache_.size()); ++id) {
    if (m.Bit(id)) names.insert(cache_.at(id).name);
  }
  for (const TensorDescriptor& d : m.descriptors) names.insert(d.name);
  return names;
}

void Negotiator::SetPending(int r, std::set<std::string> names, Clock::time_point when) {
  for (const std::string& name : names) first_seen_.try_emplace(name, when);
  pending_at_[static_cast<size_t>(r)] = std::move(names);
  // Forget the tensors no rank reports any more.
  for (auto it = first_seen_.begin(); it != first_seen_.end();) {
    const bool pending = std::any_of(pending_at_.begin(), pending_at_.end(),
                                     [&](const auto& set) { return set.count(it->first) > 0; });
    if (pending) {
      ++it;
    } else {
      warned_.erase(it->first);
      it = first_seen_.erase(it);
    }
  }
}

void Negotiator::ClearDecided(const CycleOutcome& outcome) {
  std::vector<uint32_t> decided = outcome.agreed;
  for (const auto& [id, message] : outcome.mismatched) decided.push_back(id);
  for (uint32_t id : decided) {
    const std::string& name = cache_.at(id).name;
    for (auto& set : pending_at_) set.erase(name);
    first_seen_.erase(name);
    warned_.erase(name);
  }
}

std::string Negotiator::PendingNames(size_t limit) const {
  std::set<std::string> names;
  for (const auto& [name, since] : first_seen_) names.insert(name);
  return Quoted(names, limit);
}

Status Negotiator::InspectStalls(Clock::time_point now) {
  last_inspection_ = now;
  for (const auto& [name, since] : first_seen_) {
    StallReport report;
    report.tensor = name;
    report.seconds = std::chrono::duration<double>(now - since).count();
    for (int r = 0; r < size_; ++r) {
      (pending_at_[static_cast<size_t>(r)].count(name) > 0 ? report.submitted : report.missing)
          .push_back(r);
    }
    if (report.missing.empty()) continue;  // pending everywhere: decided in this cycle
    const auto age = now - since;
    if (options_.stall_shutdown > Duration::zero() && age >= options_.stall_shutdown) {
      report.shutdown = true;
      Report(report);
      return TimeoutError("stall inspector: " + report.ToString() + "; shutting down");
    }
    const bool missing_answered =
        std::all_of(report.missing.begin(), report.missing.end(),
                    [&](int r) { return answered_[static_cast<size_t>(r)]; });
    if (age >= options_.timeout && missing_answered) {
      return TimeoutError(fmt::format("negotiation: {}, the timeout ({} ms)", report.ToString(),
                                      options_.timeout.count()));
    }
    if (options_.stall_warning > Duration::zero() && age >= options_.stall_warning &&
        warned_.insert(name).second) {
      Report(report);
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
  if (size_ == 1 || abort_sent_) return;
  abort_sent_ = true;
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
  FRUGAL_ASSIGN_OR_RETURN(std::optional<ProbeResult> probe,
                          ProbeNow(t_, kAnySource, kAbortTag, "abort notice"));
  if (!probe) return Status::Ok();
  std::vector<std::byte> buffer(probe->bytes);
  std::unique_ptr<Work> recv = t_.IRecv(probe->source, kAbortTag, buffer);
  FRUGAL_RETURN_IF_ERROR(recv->Wait(options_.timeout).Annotate("abort notice"));
  peer_failed_ = true;
  StatusOr<AbortMessage> message = DecodeAbortMessage(std::span(buffer.data(), recv->bytes()));
  if (!message.ok()) return message.status().Annotate(fmt::format("from rank {}", probe->source));
  return Status(message->code, fmt::format("rank {} failed: {}", probe->source, message->reason));
}

Duration Negotiator::ReplyBound() const {
  return std::min<Duration>(options_.timeout / 4, std::chrono::seconds(1));
}

Status Negotiator::ResolveReductionFailure(const Status& own) {
  if (size_ == 1) return own;
  Status peer = PollAbort();
  if (peer.ok() && own.code() == StatusCode::kTimeout) {
    SendAbort(own);
    const auto start = Clock::now();
    const auto deadline = start + ReplyBound();
    while (peer.ok() && Clock::now() < deadline) {
      BackOff(Clock::now() - start);
      peer = PollAbort();
    }
  }
  if (peer.ok()) return own;
  if (!peer_failed_ || own.code() != StatusCode::kTimeout || peer.code() != StatusCode::kTimeout) {
    return peer;
  }
  peer_failed_ = false;
  return TimeoutError(fmt::format("{} ({})", own.message(), peer.message()));
}

}  // namespace frugal::engine_internal
