// The engine's negotiation over the transport (internal): one cycle at a time, every rank tells
// the others which tensors it has pending and every rank learns the same outcome. Also the
// stall inspector, which watches the cycle while it waits, and the abort notice a failed engine
// sends its peers. Used by the engine thread only.
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

  // One cycle: offers `heads` (in submission order), this rank's waiting flag and, from rank 0,
  // a merge plan; returns the cycle's outcome, the same on every rank, with the cache updated.
  // `stop_requested` is polled while waiting for peers (kCancelled when it returns true).
  // Errors: kTimeout naming the ranks that did not answer within the timeout and the tensors
  // pending here; kTimeout from the stall inspector's shutdown; kMalformed for a peer's invalid
  // message; a peer's failure (its code, "rank R failed: ...") when its abort notice arrives.
  StatusOr<CycleOutcome> RunCycle(std::span<const PendingHead> heads, bool waiting,
                                  std::optional<std::vector<std::vector<uint32_t>>> plan,
                                  const std::function<bool()>& stop_requested);

  const TensorCache& cache() const { return cache_; }
  uint64_t bytes_sent() const { return bytes_sent_; }  // negotiation and abort messages

  // Best effort: tells every peer that this engine failed with `status` (its code and message).
  // The sends start together and are waited for at most kAbortSendBound in all.
  void SendAbort(const Status& status);
  // A peer's abort notice if one has arrived (its failure as this rank's, naming the peer); OK
  // otherwise.
  Status PollAbort();
  // Whether the last error PollAbort returned came from a peer (whose peers know already).
  bool peer_failed() const { return peer_failed_; }

 private:
  Status Exchange(const CycleMessage& mine, std::span<const PendingHead> heads,
                  const std::function<bool()>& stop_requested, std::vector<CycleMessage>& all);
  Status InspectStalls(Clock::time_point now, std::span<const PendingHead> heads);
  void Report(const StallReport& report);
  std::set<std::string> ReportedNames(const CycleMessage& m) const;

  Transport& t_;
  const NegotiatorOptions options_;
  const int rank_;
  const int size_;
  TensorCache cache_;
  uint64_t cycle_ = 0;
  uint64_t bytes_sent_ = 0;
  std::vector<std::set<std::string>> reported_;      // per rank, its latest message's tensors
  std::map<std::string, Clock::time_point> warned_;  // name -> submission time of the warned head
  std::vector<std::byte> out_message_;
  std::vector<std::byte> abort_message_;
  bool peer_failed_ = false;
};

}  // namespace frugal::engine_internal
