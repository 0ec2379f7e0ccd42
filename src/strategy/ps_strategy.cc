// The parameter server on the strategy seam.
//
// The workers' side: every step's gradients are exchanged (AveragesGradients), but not averaged
// by the engine: StartExchange connects a ParameterClient (parameter_server.h) with the model's
// parameters as Begin saw them, and the loop submits each gradient to it as backward produces it;
// what comes back are the parameters the servers computed, which the loop writes into the model
// (before each layer's next forward under priority overlap). The workers' optimizer does not run
// (traits().worker_runs_optimizer is false); the servers run SGD with the loop's momentum,
// Nesterov, weight decay and learning-rate schedule, by server step (the key's version).
// With bsp every worker pulls every version, so the replicas stay identical.
//
// Roles: the last `servers` ranks of the world serve (RunServerRole), the others train.
#include "strategy/ps_strategy.h"

#include <fmt/format.h>

namespace frugal::strategy_internal {
namespace {

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
  uint64_t bytes_sent() const override { return client_ ? client_->push_bytes() : 0; }

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
  config.consistency = PsConsistency::kBsp;
  config.timeout = plan.timeout;
  return config;
}

std::unique_ptr<Strategy> MakeParameterServerStrategy(const StrategyPlan& plan, Transport& workers,
                                                      Transport& world) {
  return std::make_unique<ParameterServerStrategy>(plan, workers, world);
}

}  // namespace frugal::strategy_internal
