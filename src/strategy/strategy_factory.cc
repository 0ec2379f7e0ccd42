// The strategy factory and the assignment of roles to ranks.
//
// Roles: every architecture built so far (all-reduce, gossip) makes every rank a worker, and the
// worker group is then the world transport itself (no Split, so that peers that need the world in
// rank order, such as MPI_Allreduce, keep it). Architectures with servers split the world by role
// (color 0 for workers, 1 for servers, key = rank).
#include <fmt/format.h>

#include "frugal/strategy.h"
#include "strategy/gossip_strategy.h"
#include "strategy/local_sgd.h"

namespace frugal {

StatusOr<std::unique_ptr<Strategy>> MakeStrategy(const StrategyPlan& plan, Transport& workers,
                                                 GradientReducer& reducer) {
  if (plan.arch.kind == ArchKind::kGossip) {
    return strategy_internal::MakeGossipStrategy(plan, workers);
  }
  switch (plan.sync.kind) {
    case SyncKind::kBsp:
      return strategy_internal::MakeBspStrategy();
    case SyncKind::kLocal:
      return strategy_internal::MakeLocalSgdStrategy(plan, reducer);
    case SyncKind::kAsp:
    case SyncKind::kFedAvg:
      break;
  }
  return InvalidArgumentError(fmt::format(
      "--sync {} runs in rounds of client training, not as a per-step strategy",
      SyncSpecName(plan.sync)));
}

RoleAssignment AssignRoles(const ArchSpec& arch, int world_size, int rank) {
  RoleAssignment roles;
  (void)arch;  // all-reduce: every rank a worker
  roles.roles.assign(static_cast<size_t>(world_size), Role::kWorker);
  roles.workers = world_size;
  roles.mine = roles.roles[static_cast<size_t>(rank)];
  return roles;
}

StatusOr<RoleGroup> JoinRoleGroup(Transport& world, const RoleAssignment& roles,
                                  Duration timeout) {
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
