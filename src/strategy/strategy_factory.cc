// The strategy factory and the assignment of roles to ranks.
//
// Roles: all-reduce and gossip make every rank a worker, and the worker group is then the world
// transport itself (no Split, so that peers that need the world in rank order, such as
// MPI_Allreduce, keep it). The parameter server makes the last `servers` ranks servers; the world
// is then split by role (color 0 for workers, 1 for servers, key = rank).
#include <fmt/format.h>

#include <algorithm>

#include "frugal/strategy.h"
#include "strategy/gossip_strategy.h"
#include "strategy/local_sgd.h"
#include "strategy/ps_strategy.h"

namespace frugal {

StatusOr<std::unique_ptr<Strategy>> MakeStrategy(const StrategyPlan& plan, Transport& workers,
                                                 GradientReducer& reducer, Transport* world) {
  if (plan.arch.kind == ArchKind::kParameterServer && plan.sync.kind != SyncKind::kFedAvg) {
    if (world == nullptr) {
      return FailedPreconditionError(
          fmt::format("--arch {} needs the transport of the whole job", ArchSpecName(plan.arch)));
    }
    return strategy_internal::MakeParameterServerStrategy(plan, workers, *world);
  }
  if (plan.arch.kind == ArchKind::kGossip) {
    return strategy_internal::MakeGossipStrategy(plan, workers);
  }
  switch (plan.sync.kind) {
    case SyncKind::kBsp:
      return strategy_internal::MakeBspStrategy();
    case SyncKind::kLocal:
      return strategy_internal::MakeLocalSgdStrategy(plan, reducer);
    case SyncKind::kAsp:
    case SyncKind::kSsp:
    case SyncKind::kBackup:
    case SyncKind::kLag:
      return InvalidArgumentError(fmt::format("--sync {} runs over --arch gossip or ps:servers=S",
                                              SyncSpecName(plan.sync)));
    case SyncKind::kFedAvg:
      break;
  }
  return InvalidArgumentError(
      fmt::format("--sync {} runs in rounds of client training, not as a per-step strategy",
                  SyncSpecName(plan.sync)));
}

RoleAssignment AssignRoles(const ArchSpec& arch, int world_size, int rank) {
  RoleAssignment roles;
  roles.roles.assign(static_cast<size_t>(world_size), Role::kWorker);
  roles.workers = world_size;
  if (arch.kind == ArchKind::kParameterServer) {
    const int servers = std::min(arch.servers, world_size);
    for (int r = world_size - servers; r < world_size; ++r) {
      roles.roles[static_cast<size_t>(r)] = Role::kServer;
    }
    roles.workers = world_size - servers;
  }
  roles.mine = roles.roles[static_cast<size_t>(rank)];
  return roles;
}

Status CheckWorldSize(const StrategyPlan& plan, int world_size) {
  if (plan.arch.kind != ArchKind::kParameterServer) return Status::Ok();
  if (plan.arch.servers >= world_size) {
    return InvalidArgumentError(fmt::format(
        "--arch {} needs more than {} ranks (the servers and at least one worker); the job has {}",
        ArchSpecName(plan.arch), plan.arch.servers, world_size));
  }
  const int workers = world_size - plan.arch.servers;
  if (plan.sync.kind == SyncKind::kBackup && plan.sync.backup_workers >= workers) {
    return InvalidArgumentError(
        fmt::format("--sync {} needs fewer backup workers than the {} workers (B < W)",
                    SyncSpecName(plan.sync), workers));
  }
  return Status::Ok();
}

Status RunServerRole(Transport& world, const StrategyPlan& plan, const ServerOptimizer& optimizer,
                     const Logger& logger, const ServerCheckpointHooks* checkpoints) {
  if (plan.arch.kind != ArchKind::kParameterServer) {
    return FailedPreconditionError(
        fmt::format("--arch {} has no servers", ArchSpecName(plan.arch)));
  }
  const ParameterServerConfig config =
      strategy_internal::ParameterServerConfigOf(plan, world.size());
  if (plan.sync.kind == SyncKind::kLocal || plan.sync.kind == SyncKind::kFedAvg) {
    return RunParameterServer(world, config, strategy_internal::ModelAveragingOptimizer(), logger,
                              nullptr, checkpoints);
  }
  return RunParameterServer(world, config, optimizer, logger, nullptr, checkpoints);
}

StatusOr<RoleGroup> JoinRoleGroup(Transport& world, const RoleAssignment& roles, Duration timeout) {
  RoleGroup group;
  if (roles.all_workers()) {
    group.transport = &world;
    return group;
  }
  const int color = roles.mine == Role::kWorker ? 0 : 1;
  FRUGAL_ASSIGN_OR_RETURN(group.owned, world.Split(color, world.rank(), timeout));
  group.transport = group.owned.get();
  return group;
}

}  // namespace frugal
