// The parameter server on the strategy seam: its --arch spec, the factory's rules for it, and the
// roles it gives the ranks.
#include <gtest/gtest.h>

#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"

namespace frugal {
namespace {

TEST(ParameterServerSpec, ParsesAndNames) {
  const ArchSpec arch = ParseArchSpec("ps:servers=2").value();
  EXPECT_EQ(arch.kind, ArchKind::kParameterServer);
  EXPECT_EQ(arch.servers, 2);
  EXPECT_DOUBLE_EQ(arch.shard_mb, 4);
  EXPECT_EQ(ArchSpecName(arch), "ps:servers=2,shard-mb=4");
  const ArchSpec small = ParseArchSpec("ps:servers=3,shard-mb=0.5").value();
  EXPECT_DOUBLE_EQ(small.shard_mb, 0.5);
  EXPECT_EQ(ArchSpecName(small), "ps:servers=3,shard-mb=0.5");
  struct Bad {
    const char* spec;
    const char* message;
  };
  for (const Bad& bad : {Bad{"ps", "ps needs servers=S"}, Bad{"ps:servers=0", "out of range"},
                         Bad{"ps:servers=2,shard-mb=0", "out of range"},
                         Bad{"ps:servers=2,keys=4", "unknown parameter 'keys'"}}) {
    const Status status = ParseArchSpec(bad.spec).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad.spec;
    EXPECT_NE(status.message().find(bad.message), std::string::npos)
        << bad.spec << ": " << status.message();
  }
}

// PlanStrategy refuses `options` with a message containing `message`.
void ExpectRefused(const StrategyOptions& options, const std::string& message) {
  const Status status = PlanStrategy(options).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << message;
  EXPECT_NE(status.message().find(message), std::string::npos)
      << message << " vs " << status.message();
}

StrategyOptions OverServers() {
  StrategyOptions o;
  o.arch = "ps:servers=1";
  return o;
}

TEST(ParameterServerSpec, RefusesWhatDoesNotRunOverIt) {
  StrategyOptions o = OverServers();
  o.od_sgd = true;
  ExpectRefused(o, "--od-sgd runs over all-reduce");
  o = OverServers();
  o.skip_comm = true;
  ExpectRefused(o, "--skip-comm runs over all-reduce");
  for (const char* sync : {"local:period=4", "fedavg:clients=4"}) {
    o = OverServers();
    o.sync = sync;
    ExpectRefused(o, "does not run over --arch ps");
  }
  StrategyOptions ok;
  ok.arch = "ps:servers=2,shard-mb=1";
  const StrategyPlan plan = PlanStrategy(ok).value();
  EXPECT_EQ(plan.arch.kind, ArchKind::kParameterServer);
  EXPECT_TRUE(CheckWorldSize(plan, 3).ok());
  const Status too_few = CheckWorldSize(plan, 2);
  EXPECT_EQ(too_few.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_few.message().find("needs more than 2 ranks"), std::string::npos)
      << too_few.message();
}

// The last S ranks serve; rank 0 is a worker; the groups are split by role.
TEST(ParameterServerRoles, LastRanksServeInTheirOwnGroup) {
  const ArchSpec arch = ParseArchSpec("ps:servers=2").value();
  const RoleAssignment roles = AssignRoles(arch, 5, 0);
  EXPECT_EQ(roles.workers, 3);
  EXPECT_EQ(roles.roles, std::vector<Role>({Role::kWorker, Role::kWorker, Role::kWorker,
                                            Role::kServer, Role::kServer}));
  EXPECT_EQ(roles.mine, Role::kWorker);
  EXPECT_EQ(AssignRoles(arch, 5, 4).mine, Role::kServer);
  std::vector<int> group_sizes(5);
  const std::vector<Status> statuses = RunRanks(5, [&](Transport& t) -> Status {
    const RoleAssignment mine = AssignRoles(arch, t.size(), t.rank());
    FRUGAL_ASSIGN_OR_RETURN(RoleGroup group, JoinRoleGroup(t, mine, std::chrono::seconds(10)));
    group_sizes[static_cast<size_t>(t.rank())] = group.transport->size();
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(group_sizes, std::vector<int>({3, 3, 3, 2, 2}));
}

// A worker's strategy needs the world to reach the servers.
TEST(ParameterServerRoles, TheStrategyNeedsTheWorld) {
  StrategyOptions options;
  options.arch = "ps:servers=1";
  const StrategyPlan plan = PlanStrategy(options).value();
  const std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(auto reducer,
                            MakeStrategyReducer(plan, t, 0, DefaultCompressorRegistry()));
    const Status without = MakeStrategy(plan, t, *reducer).status();
    if (without.code() != StatusCode::kFailedPrecondition) return InternalError(without.ToString());
    FRUGAL_ASSIGN_OR_RETURN(auto strategy, MakeStrategy(plan, t, *reducer, &t));
    if (strategy->traits().worker_runs_optimizer) return InternalError("workers run the optimizer");
    if (!strategy->traits().identical_replicas) return InternalError("bsp replicas differ");
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace frugal
