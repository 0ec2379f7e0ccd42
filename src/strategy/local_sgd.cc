// BSP and the Local SGD family.
//
// BspStrategy: every step's gradients are averaged (through the engine: hooks, fusion,
// compression, overlap); nothing is exchanged after the step. Replicas stay identical.
//
// LocalSgdStrategy (Stich 2019; Lin et al. 2020 for post-local and hierarchical Local SGD):
//   - steps of epochs before `start_epoch` are BSP steps (post-local SGD's warm phase);
//   - from the first step of `start_epoch` on, each worker applies its own gradient, and counts
//     its local steps j = 1, 2, ... (j = step - start_epoch * steps_per_epoch + 1);
//   - after local step j with j % period == 0 the parameters are averaged over all workers (one
//     fused all-reduce through the strategy's reducer; with a compressing reducer, the model
//     delta since the last average, with error feedback, see model_average.h);
//   - hierarchical (intra_period = h > 0): after local step j with j % h == 0 but
//     j % period != 0, the parameters are averaged exactly within each host (hosts as the
//     hierarchical all-reduce knows them: ranks_per_host, or equal host names);
//   - batch-norm statistics are averaged with the parameters unless buffers=0; the optimizer's
//     momentum buffers stay local unless momenta=1 (then they are averaged too, as a "global
//     momentum" variant).
// So with period H and start epoch 0 the averaging steps (0-based global) are H-1, 2H-1, ...
// Replicas differ between averages: traits().identical_replicas is false.
//   - overlap=1 (overlap_average.h): at an averaging step the average taken at the previous one
//     is applied (x = avg + (x - x_then)) and the model is taken for the next, whose average runs
//     on the transport's thread while the next H local steps compute; Settle applies the one in
//     flight (before an evaluation, a checkpoint, the end of the run).
#include "strategy/local_sgd.h"

#include <fmt/format.h>

#include <atomic>
#include <optional>

#include "frugal/collectives.h"
#include "strategy/model_average.h"
#include "strategy/overlap_average.h"

namespace frugal::strategy_internal {
namespace {

class BspStrategy final : public Strategy {
 public:
  std::string name() const override { return "bsp"; }
  StrategyTraits traits() const override { return {}; }
  bool AveragesGradients(const StepPoint&) const override { return true; }
  bool ExchangesAfterStep(const StepPoint&) const override { return false; }
  Status AfterOptimizerStep(const StepPoint&, ModelBuffers&, TransportRunner&) override {
    return Status::Ok();
  }
  uint64_t bytes_sent() const override { return 0; }
};

class LocalSgdStrategy final : public Strategy {
 public:
  LocalSgdStrategy(const StrategyPlan& plan, GradientReducer& reducer)
      : plan_(plan), reducer_(reducer), averager_(reducer, /*deltas=*/plan.compressed.has_value()) {
    if (plan.sync.overlap) {
      overlapped_.emplace(
          Parts(), plan.timeout, [this](Transport& t, uint64_t step, ModelBuffers& copy) -> Status {
            return Counted(
                t, [&] { return averager_.Average(t, step, copy, Parts(), plan_.timeout); });
          });
    }
  }

  std::string name() const override { return SyncSpecName(plan_.sync); }
  StrategyTraits traits() const override {
    StrategyTraits traits;
    traits.identical_replicas = false;
    return traits;
  }

  Status Begin(ModelBuffers& model) override {
    averager_.SetAnchor(model);
    if (overlapped_) overlapped_->Shape(model);
    return Status::Ok();
  }

  bool AveragesGradients(const StepPoint& p) const override { return LocalStep(p) == 0; }

  bool ExchangesAfterStep(const StepPoint& p) const override { return Kind(p) != Exchange::kNone; }

  Status AfterOptimizerStep(const StepPoint& p, ModelBuffers& model,
                            TransportRunner& runner) override {
    const Exchange kind = Kind(p);
    if (kind == Exchange::kNone) return Status::Ok();
    if (overlapped_) {
      FRUGAL_RETURN_IF_ERROR(overlapped_->Complete(model).Annotate(fmt::format("step {}", p.step)));
      return overlapped_->Start(p.step, model, runner);
    }
    return runner.Run(kind == Exchange::kGlobal ? "model average" : "host model average",
                      [&](Transport& t) -> Status {
                        return Counted(t,
                                       [&] {
                                         return kind == Exchange::kGlobal
                                                    ? averager_.Average(t, p.step, model, Parts(),
                                                                        plan_.timeout)
                                                    : AverageInHost(t, model, Parts());
                                       })
                            .Annotate(fmt::format("step {}", p.step));
                      });
  }

  Status Settle(ModelBuffers& model, TransportRunner&) override {
    return overlapped_ ? overlapped_->Complete(model) : Status::Ok();
  }

  uint64_t bytes_sent() const override { return bytes_.load(std::memory_order_relaxed); }

  void VisitState(const std::function<void(std::string_view, std::span<float>)>& visit) override {
    averager_.VisitState(visit);
  }

 private:
  enum class Exchange { kNone, kHost, kGlobal };

  AverageParts Parts() const {
    return AverageParts{plan_.sync.average_buffers, plan_.sync.average_momenta};
  }

  // Runs `average` on the transport's thread, adding what it sent to bytes_.
  template <typename Fn>
  Status Counted(Transport& t, Fn&& average) {
    const uint64_t before = t.bytes_sent();
    const uint64_t reducer_before = reducer_.bytes_sent();
    Status status = average();
    uint64_t sent = t.bytes_sent() - before;
    if (reducer_.bytes_counted_by() != "transport") sent += reducer_.bytes_sent() - reducer_before;
    bytes_.fetch_add(sent, std::memory_order_relaxed);
    return status;
  }

  // 1-based index of the local step `p`, 0 for a BSP step.
  int64_t LocalStep(const StepPoint& p) const {
    const int64_t first = plan_.sync.start_epoch * p.steps_per_epoch;
    const int64_t step = static_cast<int64_t>(p.step);
    return step < first ? 0 : step - first + 1;
  }

  Exchange Kind(const StepPoint& p) const {
    const int64_t j = LocalStep(p);
    if (j == 0) return Exchange::kNone;
    if (j % plan_.sync.period == 0) return Exchange::kGlobal;
    if (plan_.sync.intra_period > 0 && j % plan_.sync.intra_period == 0) return Exchange::kHost;
    return Exchange::kNone;
  }

  Status AverageInHost(Transport& t, ModelBuffers& model, AverageParts parts) {
    if (!host_group_) {
      FRUGAL_ASSIGN_OR_RETURN(std::vector<int> host,
                              HostOfEachRank(t, plan_.ranks_per_host, plan_.timeout));
      FRUGAL_ASSIGN_OR_RETURN(
          host_group_, t.Split(host[static_cast<size_t>(t.rank())], t.rank(), plan_.timeout));
    }
    return AverageExactly(*host_group_, AveragedBuffers(model, parts), plan_.timeout);
  }

  StrategyPlan plan_;
  GradientReducer& reducer_;
  ModelAverager averager_;
  std::unique_ptr<Transport> host_group_;
  std::atomic<uint64_t> bytes_{0};  // grows on the transport's thread when averages overlap
  std::optional<OverlappedAverage> overlapped_;  // overlap=1; after the members it uses
};

}  // namespace

std::unique_ptr<Strategy> MakeBspStrategy() { return std::make_unique<BspStrategy>(); }

std::unique_ptr<Strategy> MakeLocalSgdStrategy(const StrategyPlan& plan, GradientReducer& reducer) {
  return std::make_unique<LocalSgdStrategy>(plan, reducer);
}

}  // namespace frugal::strategy_internal
