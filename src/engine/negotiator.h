// The engine's negotiation over the transport (internal): one cycle at a time, every rank reports
// the tensors it has pending to the coordinator (rank 0), which evaluates the reports and sends
// every rank the same decision. Also the stall inspector, which the coordinator runs, and the
// abort notice a failed engine sends its peers. Used by the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "engine/negotiation.h"
#include "frugal/engine.h"
#include "frugal/logging.h"
#include "frugal/status.h"
#include "frugal/timer.h"
#include "frugal/transport.h"

namespace frugal::engine_internal {

// A tensor pending on this rank: the head of its name's queue.
struct PendingHead {
  TensorDescriptor descriptor;
  Clock::time_point submitted;
};

struct NegotiatorOptions {
  Duration timeout = kDefaultTimeout;
  Duration stall_warning = Duration::zero();         // zero: no warning
  Duration stall_shutdown = Duration::zero();        // zero: never
  std::function<void(const StallReport&)> on_stall;  // default: a warning in `logger`
  Logger logger;
};

class Negotiator {
 public:
  Negotiator(Transport& t, NegotiatorOptions options);

  // Rank 0 of a world of two or more ranks.
  bool coordinator() const { return rank_ == 0 && size_ > 1; }

  // One cycle: reports `heads` (in submission order) and this rank's waiting flag; the
  // coordinator also decides on a merge plan to adopt (`plan`, ignored on other ranks). Returns
  // the cycle's outcome, the same on every rank, with the cache updated. `stop_requested` is
  // polled while waiting (kCancelled when it returns true). Errors: kTimeout naming the ranks
  // that did not report within the timeout (the coordinator), or the coordinator if its decision
  // does not come within twice the timeout (other ranks), with the tensors pending; kTimeout from
  // the stall inspector (a stall_shutdown, or a tensor pending on some ranks only for the whole
  // timeout); kMalformed for an invalid message; a peer's failure (its code, "rank R failed:
  // ...") when its abort notice arrives.
  StatusOr<CycleOutcome> RunCycle(std::span<const PendingHead> heads, bool waiting,
                                  std::optional<std::vector<std::vector<uint32_t>>> plan,
                                  const std::function<bool()>& stop_requested);

  // The coordinator while it has nothing pending: whether a peer has reported (it then runs
  // cycles too, so that its peers' tensors are inspected and decided on).
  StatusOr<bool> PeerReportWaiting();

  const TensorCache& cache() const { return cache_; }
  uint64_t bytes_sent() const { return bytes_sent_; }  // reports, decisions and abort notices

  // Best effort: tells every peer that this engine failed with `status` (its code and message).
  // The sends start together and are waited for at most 200 ms in all. Only the first call sends.
  void SendAbort(const Status& status);
  // A peer's abort notice if one has arrived (its failure as this rank's, naming the peer); OK
  // otherwise.
  Status PollAbort();
  // Whether the error PollAbort returned came from a peer (whose peers know already).
  bool peer_failed() const { return peer_failed_; }

  // What the engine fails with when a reduction of this rank failed with `own` (see the comment
  // in negotiator.cc): a peer's notice (its cause), or `own` when none arrives, or, when both are
  // timeouts, `own` with the peer's failure attached (this rank's failure then counts as its own:
  // its notice goes out). On a timeout with no notice yet, sends this rank's notice at once and
  // then waits at most ReplyBound() for one. Returns an error.
  Status ResolveReductionFailure(const Status& own);
  // min(timeout / 4, 1 s): how long a rank whose reduction timed out waits for the notice of the
  // rank it waited for. Shorter than the extra time the training loop gives the engine.
  Duration ReplyBound() const;

 private:
  StatusOr<CycleOutcome> Coordinate(CycleMessage mine, std::span<const PendingHead> heads,
                                    std::optional<std::vector<std::vector<uint32_t>>> plan,
                                    const std::function<bool()>& stop_requested);
  StatusOr<CycleOutcome> Follow(const CycleMessage& mine, std::span<const PendingHead> heads,
                                const std::function<bool()>& stop_requested);
  StatusOr<CycleMessage> ReceiveReport(const ProbeResult& probe);
  // The coordinator: until every send of its decision (sends[i] to rank i + 1) has completed,
  // watching for abort notices.
  Status WaitForSends(std::vector<std::unique_ptr<Work>>& sends,
                      const std::function<bool()>& stop_requested);
  // The coordinator: rank `r`'s pending tensors are `names` as of `when`.
  void SetPending(int r, std::set<std::string> names, Clock::time_point when);
  void ClearDecided(const CycleOutcome& outcome);
  Status InspectStalls(Clock::time_point now);
  void Report(const StallReport& report);
  std::set<std::string> ReportedNames(const CycleMessage& m) const;
  std::string PendingNames(size_t limit) const;

  Transport& t_;
  const NegotiatorOptions options_;
  const int rank_;
  const int size_;
  TensorCache cache_;
  uint64_t cycle_ = 0;
  uint64_t bytes_sent_ = 0;
  std::vector<std::byte> out_message_;
  std::vector<std::byte> abort_message_;
  bool abort_sent_ = false;
  bool peer_failed_ = false;
  // The coordinator's view, for the stall inspector: per rank the tensors of its latest report
  // that are still pending, when each pending tensor was first seen, which were reported stalled.
  std::vector<std::set<std::string>> pending_at_;
  std::map<std::string, Clock::time_point> first_seen_;
  std::set<std::string> warned_;
  std::vector<bool> answered_;  // the ranks whose report of the current cycle has arrived
  Clock::time_point last_inspection_;
};

}  // namespace frugal::engine_internal
