// The gossip strategy: a gossip algorithm (src/gossip) on the strategy seam.
//
// The model the algorithm sees is flat: the parameters, then the float buffers (batch-norm
// statistics; left out under --sync local with buffers=0), packed in ModelBuffers order. The
// optimizer's momentum buffers stay local. Every worker runs the optimizer on its own gradients
// (AveragesGradients is always false); the exchanges run through the TransportRunner, on the
// thread that owns the transport:
//
//   BeforeForward   when the algorithm acts before the step (D-PSGD cta sends the model the
//                   step starts from; AD-PSGD's passive ranks serve averages), on the packed model;
//   AfterOptimizerStep
//                   the algorithm's round on the packed model after the local step, unpacked;
//   Settle          completes what is in flight (SGP's overlapped round, AD-PSGD's requests).
//
// Messages left in flight by an exchange (D-PSGD cta's model during the step, SGP's overlapped
// shares) move only while the transport's thread calls MPI. So after such an exchange the
// strategy queues a background call on that thread (TransportRunner::RunInBackground) that
// polls Algorithm::Progress every kProgressInterval until nothing is left in flight, the
// strategy's timeout passes, or the next exchange begins (stop_; that exchange waits for the
// call to end first, so the algorithm is never used by two threads at once).
//
// Rounds: --sync bsp and asp run round s after step s; --sync local:period=H runs round j after
// local step (j + 1) H - 1, so a time-varying graph moves on one phase per exchange.
// Bytes: the growth of the transport's count across the strategy's own exchanges.
// Report: the spectral gap of W, the graph's size, and the algorithm's counts.
#include "strategy/gossip_strategy.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "frugal/timer.h"
#include "gossip/algorithm.h"
#include "strategy/model_average.h"

namespace frugal::strategy_internal {
namespace {

constexpr auto kProgressInterval = std::chrono::microseconds(200);

class GossipStrategy final : public Strategy {
 public:
  GossipStrategy(const StrategyPlan& plan, GossipGraph graph, int rank)
      : plan_(plan), graph_(std::make_unique<GossipGraph>(std::move(graph))) {
    gossip::AlgorithmOptions options;
    options.topology = &graph_->topology;
    options.mixing = &graph_->mixing;
    options.rank = rank;
    options.timeout = plan.timeout;
    options.seed = plan.seed;
    const GossipSpec& spec = plan.arch.gossip;
    options.atc = spec.atc || plan.sync.kind == SyncKind::kLocal;
    options.gamma = spec.gamma;
    options.overlap = spec.overlap;
    if (plan.compressed) {
      options.compressor = DefaultCompressorRegistry().Create(plan.compressed->spec).value();
      options.compress_min_bytes = plan.compressed->min_bytes;
    }
    if (plan.sync.kind == SyncKind::kAsp) {
      algorithm_ = gossip::MakePairwise(options);
      return;
    }
    switch (spec.algorithm) {
      case GossipAlgorithm::kDpsgd:
        algorithm_ = gossip::MakeDpsgd(options);
        break;
      case GossipAlgorithm::kChoco:
        algorithm_ = gossip::MakeChoco(options);
        break;
      case GossipAlgorithm::kDcd:
        algorithm_ = gossip::MakeDcd(options);
        break;
      case GossipAlgorithm::kEcd:
        algorithm_ = gossip::MakeEcd(options);
        break;
      case GossipAlgorithm::kSgp:
        algorithm_ = gossip::MakePushSum(options);
        break;
    }
  }

  ~GossipStrategy() override {
    stop_.store(true, std::memory_order_release);
    if (progress_) (void)progress_->Wait(plan_.timeout + std::chrono::seconds(1));
  }

  // The synchronization only: the graph and the algorithm are the exchange (traits().exchange),
  // which the start line and the summary name beside it.
  std::string name() const override { return SyncSpecName(plan_.sync); }

  StrategyTraits traits() const override {
    StrategyTraits traits;
    traits.identical_replicas = false;
    GossipSpec spec = plan_.arch.gossip;
    spec.mixing = graph_->mixing.kind();
    traits.exchange = "gossip:" + GossipSpecName(spec);
    return traits;
  }

  Status Begin(ModelBuffers& model) override {
    gossip::FlatLayout layout;
    for (const NamedBuffer& b : Parts(model)) layout.Add(b.name, b.data.size());
    Pack(Parts(model), flat_);
    return algorithm_->Begin(layout, flat_);
  }

  bool ActsBeforeForward(const StepPoint& p) const override {
    const std::optional<uint64_t> round = Round(p);
    return round && algorithm_->ActsBeforeStep(*round);
  }

  Status BeforeForward(const StepPoint& p, ModelBuffers& model, TransportRunner& runner) override {
    const uint64_t round = *Round(p);
    return Exchange(model, runner, "gossip before the step",
                    [&](Transport& t) { return algorithm_->BeforeStep(t, round, flat_); });
  }

  bool AveragesGradients(const StepPoint&) const override { return false; }
  bool ExchangesAfterStep(const StepPoint& p) const override { return Round(p).has_value(); }

  Status AfterOptimizerStep(const StepPoint& p, ModelBuffers& model,
                            TransportRunner& runner) override {
    const uint64_t round = *Round(p);
    return Exchange(model, runner, "gossip", [&](Transport& t) {
      return algorithm_->AfterStep(t, round, flat_).Annotate(fmt::format("step {}", p.step));
    });
  }

  Status Settle(ModelBuffers& model, TransportRunner& runner) override {
    return Exchange(model, runner, "gossip settle",
                    [&](Transport& t) { return algorithm_->Settle(t, flat_); });
  }

  uint64_t bytes_sent() const override { return bytes_; }

  void VisitState(const std::function<void(std::string_view, std::span<float>)>& visit) override {
    algorithm_->VisitState(visit);
  }

  void Report(const std::function<void(std::string_view, double)>& report) const override {
    report("spectral_gap", SpectralGap(graph_->mixing));
    report("graph_edges", static_cast<double>(graph_->topology.EdgeCount()));
    algorithm_->Report(report);
  }

 private:
  std::vector<NamedBuffer> Parts(const ModelBuffers& model) const {
    std::vector<NamedBuffer> parts = model.parameters;
    if (plan_.sync.kind != SyncKind::kLocal || plan_.sync.average_buffers) {
      parts.insert(parts.end(), model.buffers.begin(), model.buffers.end());
    }
    return parts;
  }

  // The gossip round after step `p`, or nothing when the step does not gossip.
  std::optional<uint64_t> Round(const StepPoint& p) const {
    if (plan_.sync.kind != SyncKind::kLocal) return p.step;
    const uint64_t period = static_cast<uint64_t>(plan_.sync.period);
    if ((p.step + 1) % period != 0) return std::nullopt;
    return (p.step + 1) / period - 1;
  }

  // Runs `fn` on the packed model and unpacks the result, counting the bytes sent; then keeps
  // what it left in flight moving in the background.
  Status Exchange(ModelBuffers& model, TransportRunner& runner, std::string_view what,
                  const std::function<Status(Transport&)>& fn) {
    FRUGAL_RETURN_IF_ERROR(StopProgress());
    const std::vector<NamedBuffer> parts = Parts(model);
    Pack(parts, flat_);
    bool in_flight = false;
    FRUGAL_RETURN_IF_ERROR(runner.Run(what, [&](Transport& t) -> Status {
      const uint64_t before = t.bytes_sent();
      Status status = fn(t);
      bytes_ += t.bytes_sent() - before;
      in_flight = status.ok() && !algorithm_->Progress(t);
      return status;
    }));
    Unpack(flat_, parts);
    if (in_flight) {
      progress_ = runner.RunInBackground("gossip in flight", [this](Transport& t) -> Status {
        const auto deadline = Clock::now() + plan_.timeout;
        // On expiry the next exchange's wait names the neighbours that did not answer.
        while (!stop_.load(std::memory_order_acquire) && !algorithm_->Progress(t) &&
               Clock::now() < deadline) {
          std::this_thread::sleep_for(kProgressInterval);
        }
        return Status::Ok();
      });
    }
    return Status::Ok();
  }

  // Ends the background call of the previous exchange (at most one poll interval away).
  Status StopProgress() {
    if (!progress_) return Status::Ok();
    stop_.store(true, std::memory_order_release);
    Status status = progress_->Wait(plan_.timeout + std::chrono::seconds(1));
    progress_.reset();
    stop_.store(false, std::memory_order_release);
    return status.Annotate("gossip: the background progress of the previous exchange");
  }

  StrategyPlan plan_;
  std::unique_ptr<GossipGraph> graph_;  // the algorithm keeps pointers into it
  std::unique_ptr<gossip::Algorithm> algorithm_;
  std::vector<float> flat_;
  uint64_t bytes_ = 0;
  std::unique_ptr<Work> progress_;  // the background call of the last exchange, if any
  std::atomic<bool> stop_{false};
};

}  // namespace

StatusOr<std::unique_ptr<Strategy>> MakeGossipStrategy(const StrategyPlan& plan,
                                                       Transport& workers) {
  FRUGAL_ASSIGN_OR_RETURN(GossipGraph graph, MakeGossipGraph(plan, workers.size()));
  return std::unique_ptr<Strategy>(
      std::make_unique<GossipStrategy>(plan, std::move(graph), workers.rank()));
}

}  // namespace frugal::strategy_internal
