// AD-PSGD (Lian et al. 2018): asynchronous gossip by atomic pairwise averages, without a global
// barrier between rounds.
//
// The graph must be undirected and bipartite; the side of rank 0 is "active", the other side
// "passive" (as in the authors' implementation), so two actives never wait on each other.
//
//   active rank a, AfterStep of round r (x: the model after the local step):
//     if a request is outstanding, wait for its reply m and apply it: x <- m + (x - sent), i.e.
//     the pair's average plus every local update a made since it sent;
//     then pick a neighbour p uniformly from the stream (seed, a, r, "gossip/adpsgd"), send it
//     [request, x] (sent = x) and go on: the reply is applied in round r + 1.
//   passive rank p, at BeforeStep and AfterStep (between its own local steps): serve every
//     request that has arrived: m = (x_a + x_p) / 2, x_p <- m, reply m to a.
//
// A pair's exchange is atomic: p applies it between two of its own steps; a counts its own
// updates since it sent on top of the average. So x_a + x_p before equals x_a + x_p after (up
// to rounding) plus a's updates in between: no update is lost or counted twice, and the sum of
// all models moves only by the local updates.
//
// Settle (before an evaluation, reached by every rank after the same number of steps): an
// active applies its outstanding reply and sends [done] to every neighbour; a passive serves
// requests until every neighbour's [done] has arrived and its replies have left. Requests and
// [done] share one tag, so a neighbour's [done] comes after its last request.
#include <fmt/format.h>

#include <deque>

#include "frugal/check.h"
#include "frugal/random.h"
#include "frugal/timer.h"
#include "gossip/algorithm.h"

namespace frugal::gossip {
namespace {

constexpr float kRequest = 0;
constexpr float kDone = 1;

Duration Remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
  return std::max(left, Duration(0));
}

class Pairwise final : public Algorithm {
 public:
  explicit Pairwise(const AlgorithmOptions& options) : options_(options) {}

  Status Begin(const FlatLayout& layout, std::span<const float> x) override {
    FRUGAL_CHECK_EQ(x.size(), layout.total);
    std::vector<int> side;
    FRUGAL_CHECK(options_.topology->Bipartite(&side), "AD-PSGD needs a bipartite graph");
    active_ = side[static_cast<size_t>(options_.rank)] == 0;
    return Status::Ok();
  }

  bool ActsBeforeStep(uint64_t) const override { return !active_; }

  Status BeforeStep(Transport& t, uint64_t round, std::span<float> x) override {
    (void)round;
    return Serve(t, x, /*until_done=*/false);
  }

  Status AfterStep(Transport& t, uint64_t round, std::span<float> x) override {
    if (!active_) return Serve(t, x, /*until_done=*/false);
    FRUGAL_RETURN_IF_ERROR(ApplyReply(x));
    const std::span<const int> peers = options_.topology->Out(options_.rank, 0);
    if (peers.empty()) return Status::Ok();
    RngStream rng(RngKey{options_.seed, options_.rank, round, TensorId("gossip/adpsgd")});
    peer_ = peers[rng.Below(peers.size())];
    request_.resize(1 + x.size());
    request_[0] = kRequest;
    std::copy(x.begin(), x.end(), request_.begin() + 1);
    reply_.resize(x.size());
    request_work_ =
        t.ISend(peer_, kPairRequestTag, std::as_bytes(std::span<const float>(request_)));
    reply_work_ = t.IRecv(peer_, kPairReplyTag, std::as_writable_bytes(std::span<float>(reply_)));
    ++exchanges_;
    return Status::Ok();
  }

  Status Settle(Transport& t, std::span<float> x) override {
    if (!active_) return Serve(t, x, /*until_done=*/true);
    FRUGAL_RETURN_IF_ERROR(ApplyReply(x));
    const std::span<const int> peers = options_.topology->Out(options_.rank, 0);
    const float done[] = {kDone};
    std::vector<std::unique_ptr<Work>> sends;
    for (int p : peers) {
      sends.push_back(t.ISend(p, kPairRequestTag, std::as_bytes(std::span<const float>(done))));
    }
    for (size_t k = 0; k < sends.size(); ++k) {
      FRUGAL_RETURN_IF_ERROR(
          sends[k]
              ->Wait(options_.timeout)
              .Annotate(fmt::format("AD-PSGD: telling rank {} this epoch's exchanges are over",
                                    peers[k])));
    }
    return Status::Ok();
  }

  void Report(const std::function<void(std::string_view, double)>& report) const override {
    report(active_ ? "pair_exchanges_started" : "pair_exchanges_served",
           static_cast<double>(exchanges_));
  }

 private:
  // Active: completes the outstanding exchange, if any.
  Status ApplyReply(std::span<float> x) {
    if (!reply_work_) return Status::Ok();
    const std::string what = fmt::format("AD-PSGD: the average with rank {}", peer_);
    FRUGAL_RETURN_IF_ERROR(request_work_->Wait(options_.timeout).Annotate(what));
    FRUGAL_RETURN_IF_ERROR(reply_work_->Wait(options_.timeout).Annotate(what));
    if (reply_work_->bytes() != x.size() * sizeof(float)) {
      return MalformedError(fmt::format("{}: {} bytes where {} were expected", what,
                                        reply_work_->bytes(), x.size() * sizeof(float)));
    }
    for (size_t e = 0; e < x.size(); ++e) {
      x[e] = static_cast<float>(static_cast<double>(reply_[e]) +
                                (static_cast<double>(x[e]) - request_[1 + e]));
    }
    request_work_.reset();
    reply_work_.reset();
    return Status::Ok();
  }

  // Passive: serves the requests that have arrived (until_done: until every neighbour is done,
  // then waits for the replies to leave).
  Status Serve(Transport& t, std::span<float> x, bool until_done) {
    const auto deadline = Clock::now() + options_.timeout;
    const size_t neighbours = options_.topology->Out(options_.rank, 0).size();
    while (true) {
      std::optional<ProbeResult> probe;
      if (until_done) {
        if (done_ == neighbours) break;
        StatusOr<ProbeResult> waited = t.Probe(kAnySource, kPairRequestTag, Remaining(deadline));
        if (!waited.ok()) {
          return waited.status().Annotate(fmt::format(
              "AD-PSGD: {} of {} neighbours finished the epoch's exchanges", done_, neighbours));
        }
        probe = *waited;
      } else {
        FRUGAL_ASSIGN_OR_RETURN(probe, t.IProbe(kAnySource, kPairRequestTag));
        if (!probe) break;
      }
      incoming_.resize((probe->bytes + sizeof(float) - 1) / sizeof(float));
      std::unique_ptr<Work> recv =
          t.IRecv(probe->source, kPairRequestTag,
                  std::as_writable_bytes(std::span<float>(incoming_)).first(probe->bytes));
      FRUGAL_RETURN_IF_ERROR(recv->Wait(Remaining(deadline)));
      if (probe->bytes == sizeof(float) && incoming_[0] == kDone) {
        ++done_;
        continue;
      }
      if (probe->bytes != (1 + x.size()) * sizeof(float) || incoming_[0] != kRequest) {
        return MalformedError(fmt::format("AD-PSGD: a request of {} bytes from rank {}",
                                          probe->bytes, probe->source));
      }
      std::vector<float>& reply = replies_.emplace_back(x.size());
      for (size_t e = 0; e < x.size(); ++e) {
        reply[e] = static_cast<float>(
            (static_cast<double>(incoming_[1 + e]) + static_cast<double>(x[e])) / 2);
        x[e] = reply[e];
      }
      reply_sends_.push_back(
          t.ISend(probe->source, kPairReplyTag, std::as_bytes(std::span<const float>(reply))));
      ++exchanges_;
    }
    // Replies that have left free their buffers (in order: the deques stay aligned).
    while (!reply_sends_.empty() && (until_done || reply_sends_.front()->IsCompleted())) {
      FRUGAL_RETURN_IF_ERROR(
          reply_sends_.front()->Wait(Remaining(deadline)).Annotate("AD-PSGD: a reply"));
      reply_sends_.pop_front();
      replies_.pop_front();
    }
    if (until_done) done_ = 0;
    return Status::Ok();
  }

  AlgorithmOptions options_;
  bool active_ = true;
  uint64_t exchanges_ = 0;
  // Active.
  int peer_ = -1;
  std::vector<float> request_;
  std::vector<float> reply_;
  std::unique_ptr<Work> request_work_;
  std::unique_ptr<Work> reply_work_;
  // Passive.
  std::vector<float> incoming_;
  std::deque<std::vector<float>> replies_;
  std::deque<std::unique_ptr<Work>> reply_sends_;
  size_t done_ = 0;
};

}  // namespace

std::unique_ptr<Algorithm> MakePairwise(const AlgorithmOptions& options) {
  return std::make_unique<Pairwise>(options);
}

}  // namespace frugal::gossip
