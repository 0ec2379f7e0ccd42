// The parameter server on the strategy seam.
//
// The workers' side: every step's gradients are exchanged (AveragesGradients), but not averaged
// by the engine: StartExchange connects a ParameterClient (parameter_server.h) with the model's
// parameters as Begin saw them, and the loop submits each gradient to it as backward produces it;
// what comes back are the parameters the servers computed, which the loop writes into the model
// (before each layer's next forward under priority overlap). The workers' optimizer does not run
// (traits().worker_runs_optimizer is false); the servers run SGD with the loop's momentum,
// Nesterov, weight decay and learning-rate schedule, by server step.
//
// With bsp and lag every worker pulls every version, so the replicas stay identical. With ssp,
// asp and backup each worker goes at its own pace and pulls what is there: the replicas differ,
// and the epochs are shared (SharesEpochs): an epoch ends when the servers have received the
// epoch's steps x W pushes of every key (ParameterClient::progress), whichever workers made them.
// At the end of an epoch (Settle) every worker tells the servers that it rests, so that no pull
// waits for it while it evaluates; then it fetches the servers' counts, which Report gives the
// summary: pushes applied, dropped and skipped, the staleness distribution over all
// workers and per worker, and each server's bytes in and out.
//
// Local SGD over the servers (`local:period=H`): the workers run their own optimizer and take
// local steps; after local step j (j = step + 1) with j % H == 0 each worker pushes, for every
// parameter (and float buffer unless buffers=0), its model delta d_i = anchor - x_i, where the
// anchor is the model it last pulled (the start model first). The servers run BSP with the
// averaging rule (ModelAveragingOptimizer: plain SGD at learning rate 1), so each key becomes
// anchor - (1/W) sum_i d_i, the workers' average model up to float rounding, which every worker
// pulls into its model and keeps as its next anchor. Pushes take --compress (the residual of
// error feedback keeps what compression dropped from a delta), answers --compress-pull. The
// optimizer's momentum stays on each worker; the replicas differ between averages.
//
// Roles: the last `servers` ranks of the world serve (RunServerRole), the others train.
#include "strategy/ps_strategy.h"

#include <fmt/format.h>

#include <algorithm>

namespace frugal::strategy_internal {
namespace {

PsConsistency ConsistencyOf(SyncKind kind) {
  switch (kind) {
    case SyncKind::kSsp:
      return PsConsistency::kSsp;
    case SyncKind::kAsp:
      return PsConsistency::kAsp;
    case SyncKind::kBackup:
      return PsConsistency::kBackup;
    case SyncKind::kLag:
      return PsConsistency::kLag;
    default:
      return PsConsistency::kBsp;
  }
}

class ParameterServerStrategy final : public Strategy {
 public:
  ParameterServerStrategy(const StrategyPlan& plan, Transport& workers, Transport& world)
      : plan_(plan),
        workers_(workers),
        world_(world),
        config_(ParameterServerConfigOf(plan, world.size())) {}

  std::string name() const override { return SyncSpecName(plan_.sync); }
  StrategyTraits traits() const override {
    StrategyTraits traits;
    traits.worker_runs_optimizer = local_;
    traits.own_exchange = true;
    traits.exchange = ArchSpecName(plan_.arch);
    traits.identical_replicas = !SharesEpochs() && !local_;
    return traits;
  }

  Status Begin(ModelBuffers& model) override {
    parameters_.clear();
    anchors_.clear();
    deltas_.clear();
    for (const NamedBuffer& p : AveragedParts(model)) {
      parameters_.emplace_back(p.name, std::span<const float>(p.data));
      if (local_) {
        anchors_.emplace_back(p.data.begin(), p.data.end());
        deltas_.emplace_back(p.data.size());
      }
    }
    return Status::Ok();
  }

  bool AveragesGradients(const StepPoint&) const override { return !local_; }
  bool ExchangesAfterStep(const StepPoint& p) const override {
    return local_ && (p.step + 1) % static_cast<uint64_t>(plan_.sync.period) == 0;
  }
  Status AfterOptimizerStep(const StepPoint& p, ModelBuffers& model, TransportRunner&) override {
    if (!ExchangesAfterStep(p)) return Status::Ok();
    return AverageModels(p, model).Annotate(fmt::format("step {}", p.step));
  }

  bool SharesEpochs() const override {
    return config_.consistency == PsConsistency::kSsp ||
           config_.consistency == PsConsistency::kAsp ||
           config_.consistency == PsConsistency::kBackup;
  }
  bool EpochDone(uint64_t end) const override {
    return client_ != nullptr &&
           client_->progress() >= end * static_cast<uint64_t>(config_.workers());
  }

  // Every pull of this worker is answered when the loop calls Settle, so its pushes are with the
  // servers. A server answers the stats request of a resting worker once every worker rests: then
  // everybody's pushes are in, and every worker gets the same counts.
  Status Settle(ModelBuffers&, TransportRunner&) override {
    if (!client_) return Status::Ok();
    const Duration timeout = 2 * config_.timeout;
    FRUGAL_RETURN_IF_ERROR(client_->Rest()->Wait(timeout));
    return client_->FetchStats(&stats_)->Wait(timeout);
  }

  uint64_t bytes_sent() const override { return client_ ? client_->push_bytes() : 0; }

  // The servers write their own files of every checkpoint: the set spans the whole world, taken
  // when every worker asked for the same step (ParameterClient::Checkpoint).
  int checkpoint_peers() const override { return config_.servers(); }
  Status RunCheckpoint(uint64_t step, TransportRunner& runner,
                       const std::function<Status(Transport&)>& save) override {
    if (!client_) return runner.Run("checkpoint", save);
    return client_->Checkpoint(step, save)->Wait(4 * config_.timeout);
  }

  void VisitState(const std::function<void(std::string_view, std::span<float>)>& visit) override {
    for (size_t i = 0; i < anchors_.size(); ++i) {
      visit("anchor/" + parameters_[i].first, anchors_[i]);
    }
  }
  // The anchors (above), and the client's clocks, versions, LAG rules and compression state (on
  // the client's thread).
  void VisitState(StateVisitor& visitor) override {
    Strategy::VisitState(visitor);
    if (!client_) return;
    StateVisitor::Scope scope(visitor, "client");
    client_->VisitState(visitor);
  }

  void Report(
      const std::function<void(std::string_view name, double value)>& report) const override {
    if (stats_.workers.empty()) return;
    const WorkerPushStats total = stats_.Total();
    report("ps_pushes_applied", static_cast<double>(total.applied));
    report("ps_pushes_dropped", static_cast<double>(total.dropped));
    report("ps_pushes", static_cast<double>(stats_.pushes));
    report("ps_updates", static_cast<double>(stats_.updates));
    if (config_.consistency == PsConsistency::kLag) {
      report("ps_pushes_skipped", static_cast<double>(total.skipped));
    }
    report("staleness_min", static_cast<double>(total.Quantile(0)));
    report("staleness_median", static_cast<double>(total.Quantile(0.5)));
    report("staleness_p95", static_cast<double>(total.Quantile(0.95)));
    report("staleness_max", static_cast<double>(total.Max()));
    for (size_t w = 0; w < stats_.workers.size(); ++w) {
      const WorkerPushStats& s = stats_.workers[w];
      const std::string who = fmt::format("worker{}_", w);
      report(who + "applied", static_cast<double>(s.applied));
      report(who + "dropped", static_cast<double>(s.dropped));
      if (config_.consistency == PsConsistency::kLag) {
        report(who + "skipped", static_cast<double>(s.skipped));
      }
      report(who + "staleness_median", static_cast<double>(s.Quantile(0.5)));
      report(who + "staleness_p95", static_cast<double>(s.Quantile(0.95)));
      report(who + "staleness_max", static_cast<double>(s.Max()));
    }
    for (size_t s = 0; s < stats_.bytes_in.size(); ++s) {
      report(fmt::format("server{}_bytes_in", s), static_cast<double>(stats_.bytes_in[s]));
      report(fmt::format("server{}_bytes_out", s), static_cast<double>(stats_.bytes_out[s]));
    }
  }

  StatusOr<TensorExchange*> StartExchange(Timeline* timeline) override {
    if (client_) return FailedPreconditionError("the parameter-server client was started twice");
    ParameterClientOptions options;
    options.timeline = timeline;
    FRUGAL_ASSIGN_OR_RETURN(
        client_, ParameterClient::Connect(world_, workers_, config_, parameters_, options));
    return client_.get();
  }

 private:
  // What the servers hold: the parameters, and under local the float buffers unless buffers=0.
  std::vector<NamedBuffer> AveragedParts(const ModelBuffers& model) const {
    std::vector<NamedBuffer> parts = model.parameters;
    if (local_ && plan_.sync.average_buffers) {
      parts.insert(parts.end(), model.buffers.begin(), model.buffers.end());
    }
    return parts;
  }

  // Local SGD's average: every part's delta pushed, the servers' average pulled (see above).
  Status AverageModels(const StepPoint& p, ModelBuffers& model) {
    if (!client_) return FailedPreconditionError("the parameter-server client is not started");
    const std::vector<NamedBuffer> parts = AveragedParts(model);
    FRUGAL_INTERNAL_ASSERT(parts.size() == anchors_.size(), "the model has ", parts.size(),
                           " parts, the servers ", anchors_.size());
    std::vector<std::unique_ptr<Work>> pulls;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::span<const float> x = parts[i].data;
      std::transform(anchors_[i].begin(), anchors_[i].end(), x.begin(), deltas_[i].begin(),
                     [](float anchor, float mine) { return anchor - mine; });
      TensorRequest request;
      request.name = parts[i].name;
      request.priority = static_cast<int>(i);
      request.step = p.step;
      pulls.push_back(client_->Submit(std::move(request), deltas_[i]));
    }
    Status first;
    for (std::unique_ptr<Work>& pull : pulls) {
      Status status = pull->Wait(2 * config_.timeout);
      if (first.ok() && !status.ok()) first = status;
    }
    FRUGAL_RETURN_IF_ERROR(first);
    for (size_t i = 0; i < parts.size(); ++i) {
      std::copy(deltas_[i].begin(), deltas_[i].end(), parts[i].data.begin());
      anchors_[i] = deltas_[i];
    }
    return Status::Ok();
  }

  StrategyPlan plan_;
  Transport& workers_;
  Transport& world_;
  ParameterServerConfig config_;
  const bool local_ = plan_.sync.kind == SyncKind::kLocal;
  std::vector<std::pair<std::string, std::span<const float>>> parameters_;
  std::vector<std::vector<float>> anchors_;  // local: the model last pulled, by part
  std::vector<std::vector<float>> deltas_;   // local: the pushes, then the pulls
  std::unique_ptr<ParameterClient> client_;
  ParameterServerStats stats_;
};

}  // namespace

ParameterServerConfig ParameterServerConfigOf(const StrategyPlan& plan, int world_size) {
  ParameterServerConfig config;
  const RoleAssignment roles = AssignRoles(plan.arch, world_size, 0);
  for (int r = 0; r < world_size; ++r) {
    (roles.roles[static_cast<size_t>(r)] == Role::kServer ? config.server_ranks
                                                          : config.worker_ranks)
        .push_back(r);
  }
  config.part_bytes = std::max<size_t>(
      sizeof(float), static_cast<size_t>(plan.arch.shard_mb * static_cast<double>(1 << 20)));
  config.consistency = ConsistencyOf(plan.sync.kind);
  config.staleness = static_cast<int>(plan.sync.staleness);
  config.backup = static_cast<int>(plan.sync.backup_workers);
  config.lag = plan.sync.lag;
  config.staleness_policy = plan.staleness_policy;
  config.drop_above = plan.drop_above;
  config.push_compress = plan.push_compress;
  config.push_error_feedback = plan.push_error_feedback;
  config.pull_compress = plan.pull_compress;
  config.weighted = plan.sync.kind == SyncKind::kFedAvg;
  config.seed = plan.seed;
  config.timeout = plan.timeout;
  return config;
}

ServerOptimizer ModelAveragingOptimizer() {
  ServerOptimizer optimizer;
  optimizer.lr = [](int64_t) { return 1.0; };
  return optimizer;
}

std::unique_ptr<Strategy> MakeParameterServerStrategy(const StrategyPlan& plan, Transport& workers,
                                                      Transport& world) {
  return std::make_unique<ParameterServerStrategy>(plan, workers, world);
}

}  // namespace frugal::strategy_internal
