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
// Roles: the last `servers` ranks of the world serve (RunServerRole), the others train.
#include "strategy/ps_strategy.h"

#include <fmt/format.h>

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
    traits.worker_runs_optimizer = false;
    traits.identical_replicas = !SharesEpochs();
    return traits;
  }

  Status Begin(ModelBuffers& model) override {
    parameters_.clear();
    for (const NamedBuffer& p : model.parameters) {
      parameters_.emplace_back(p.name, std::span<const float>(p.data));
    }
    return Status::Ok();
  }

  bool AveragesGradients(const StepPoint&) const override { return true; }
  bool ExchangesAfterStep(const StepPoint&) const override { return false; }
  Status AfterOptimizerStep(const StepPoint&, ModelBuffers&, TransportRunner&) override {
    return Status::Ok();
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
  // The client's clocks, versions, LAG rules and compression state (on the client's thread).
  using Strategy::VisitState;
  void VisitState(StateVisitor& visitor) override {
    if (client_) client_->VisitState(visitor);
  }

  void Report(
      const std::function<void(std::string_view name, double value)>& report) const override {
    if (stats_.workers.empty()) return;
    const WorkerPushStats total = stats_.Total();
    report("ps_pushes_applied", static_cast<double>(total.applied));
    report("ps_pushes_dropped", static_cast<double>(total.dropped));
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
  StrategyPlan plan_;
  Transport& workers_;
  Transport& world_;
  ParameterServerConfig config_;
  std::vector<std::pair<std::string, std::span<const float>>> parameters_;
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
  config.seed = plan.seed;
  config.timeout = plan.timeout;
  return config;
}

std::unique_ptr<Strategy> MakeParameterServerStrategy(const StrategyPlan& plan, Transport& workers,
                                                      Transport& world) {
  return std::make_unique<ParameterServerStrategy>(plan, workers, world);
}

}  // namespace frugal::strategy_internal
