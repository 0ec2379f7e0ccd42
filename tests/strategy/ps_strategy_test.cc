// The parameter server on the strategy seam: its --arch spec, the factory's rules for it, and the
// roles it gives the ranks.
#include "strategy/ps_strategy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"

namespace frugal {
namespace {

TEST(ParameterServerSpec, ParsesAndNames) {
  const ArchSpec arch = ParseArchSpec("ps:servers=2").value();
  EXPECT_EQ(arch.kind, ArchKind::kParameterServer);
  EXPECT_EQ(arch.servers, 2);
  EXPECT_DOUBLE_EQ(arch.shard_mb, 0.125);
  EXPECT_EQ(ArchSpecName(arch), "ps:servers=2,shard-mb=0.125");
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

TEST(ParameterServerSpec, ParsesItsSynchronizations) {
  const SyncSpec ssp = ParseSyncSpec("ssp:staleness=3").value();
  EXPECT_EQ(ssp.kind, SyncKind::kSsp);
  EXPECT_EQ(ssp.staleness, 3);
  EXPECT_EQ(SyncSpecName(ssp), "ssp:staleness=3");
  EXPECT_EQ(SyncSpecName(ParseSyncSpec("backup:workers=1").value()), "backup:workers=1");
  const SyncSpec lag = ParseSyncSpec("lag:window=5,xi=0.5").value();
  EXPECT_EQ(lag.kind, SyncKind::kLag);
  EXPECT_EQ(lag.lag.window, 5);
  EXPECT_DOUBLE_EQ(lag.lag.xi, 0.5);
  EXPECT_EQ(lag.lag.max_skip, 10);
  EXPECT_EQ(SyncSpecName(lag), "lag:window=5,xi=0.5,max-skip=10");
  EXPECT_EQ(SyncSpecName(ParseSyncSpec("lag").value()), "lag:window=10,xi=1,max-skip=10");
  for (const auto& [spec, message] : std::vector<std::pair<const char*, const char*>>{
           {"ssp", "ssp needs staleness=S"},
           {"ssp:staleness=-1", "out of range"},
           {"backup", "backup needs workers=B"},
           {"backup:workers=0", "out of range"},
           {"lag:window=0", "out of range"},
           {"lag:speed=2", "unknown parameter 'speed'"}}) {
    const Status status = ParseSyncSpec(spec).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(status.message().find(message), std::string::npos)
        << spec << ": " << status.message();
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
  // FedAvg runs over the servers (weighted pushes); its plan keeps both specs.
  o = OverServers();
  o.sync = "fedavg:clients=4";
  const StatusOr<StrategyPlan> fedavg = PlanStrategy(o);
  ASSERT_TRUE(fedavg.ok()) << fedavg.status().ToString();
  EXPECT_EQ(fedavg->sync.kind, SyncKind::kFedAvg);
  EXPECT_EQ(fedavg->arch.servers, 1);
  // Local SGD runs over the servers as plain periodic averaging only.
  for (const char* sync : {"local:period=4,start-epoch=1", "local:period=4,intra-period=2",
                           "local:period=4,momenta=1", "local:period=4,overlap=1"}) {
    o = OverServers();
    o.sync = sync;
    ExpectRefused(o, "start-epoch, intra-period, momenta=1 and overlap=1 do not apply");
  }
  o = OverServers();
  o.sync = "local:period=4";
  o.compress = "topk:ratio=0.1";
  o.compress_pull = "fp16";
  const StrategyPlan local = PlanStrategy(o).value();
  EXPECT_TRUE(local.push_error_feedback) << "model deltas always keep a residual";
  EXPECT_EQ(local.pull_compress, "fp16");
  // The consistency models of a parameter server need one.
  for (const char* sync : {"ssp:staleness=2", "backup:workers=1", "lag"}) {
    StrategyOptions allreduce;
    allreduce.sync = sync;
    ExpectRefused(allreduce, "needs --arch ps:servers=S");
    StrategyOptions gossip;
    gossip.arch = "gossip:topology=ring";
    gossip.sync = sync;
    ExpectRefused(gossip, "runs over a parameter server");
  }
  StrategyOptions asp;
  asp.sync = "asp";
  ExpectRefused(asp, "--sync asp needs --arch gossip[:topology=T] (AD-PSGD) or --arch ps");
  // Backup workers: B < W, known with the number of workers.
  o = OverServers();
  o.sync = "backup:workers=3";
  EXPECT_TRUE(PlanStrategy(o).ok());
  o.workers = 3;
  ExpectRefused(o, "needs fewer backup workers than the 3 workers");
  o.workers = 0;
  const StrategyPlan backup = PlanStrategy(o).value();
  EXPECT_TRUE(CheckWorldSize(backup, 5).ok());  // 4 workers
  EXPECT_EQ(CheckWorldSize(backup, 4).code(), StatusCode::kInvalidArgument);
  // The staleness policy applies to stale updates: ssp and asp over ps.
  o = OverServers();
  o.sync = "asp";
  o.staleness_policy = "drop:4";
  const StrategyPlan drop = PlanStrategy(o).value();
  EXPECT_EQ(drop.staleness_policy, StalenessPolicy::kDrop);
  EXPECT_EQ(drop.drop_above, 4u);
  o.staleness_policy = "scale";
  EXPECT_EQ(PlanStrategy(o).value().staleness_policy, StalenessPolicy::kScale);
  o.staleness_policy = "drop:x";
  ExpectRefused(o, "drop:T needs a whole number");
  o.staleness_policy = "halve";
  ExpectRefused(o, "unknown policy (accepted: none, drop:T, scale)");
  o.sync = "bsp";
  o.staleness_policy = "scale";
  ExpectRefused(o, "only --sync ssp and asp over --arch ps apply");
  StrategyOptions gossip_asp;
  gossip_asp.arch = "gossip:topology=ring";
  gossip_asp.sync = "asp";
  gossip_asp.staleness_policy = "scale";
  ExpectRefused(gossip_asp, "--staleness-policy applies to --arch ps");
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
// --compress on the pushes (with --ef), --compress-pull on the answers, into the servers'
// configuration; what cannot work is refused with one line.
TEST(ParameterServerSpec, CompressionBothWays) {
  StrategyOptions o = OverServers();
  o.sync = "lag";
  o.compress = "topk:ratio=0.01";
  o.error_feedback = true;
  o.compress_pull = "qsgd:levels=16,bucket=512";
  o.seed = 11;
  const StrategyPlan plan = PlanStrategy(o).value();
  EXPECT_FALSE(plan.compressed.has_value());  // the workers' own exchanges stay dense
  const ParameterServerConfig config = strategy_internal::ParameterServerConfigOf(plan, 3);
  EXPECT_EQ(config.push_compress, "topk:ratio=0.01");
  EXPECT_TRUE(config.push_error_feedback);
  EXPECT_EQ(config.pull_compress, "qsgd:levels=16,bucket=512");
  EXPECT_EQ(config.seed, 11u);
  EXPECT_NE(config.Describe().find("pulls compressed with qsgd"), std::string::npos);

  for (const char* sync : {"ssp:staleness=1", "asp", "backup:workers=1"}) {
    StrategyOptions async = OverServers();
    async.sync = sync;
    async.compress_pull = "fp16";
    ExpectRefused(async, "does not run with --sync");
    async.compress_pull.clear();
    async.compress = "qsgd";
    EXPECT_TRUE(PlanStrategy(async).ok()) << sync;  // compressed pushes run in every mode
  }
  for (const char* spec : {"sign", "powersgd", "gtopk:k=4"}) {
    o = OverServers();
    o.compress = spec;
    ExpectRefused(o, "decodes each worker's payload on its own");
    o.compress.clear();
    o.compress_pull = spec;
    ExpectRefused(o, "decodes each worker's payload on its own");
  }
  o = OverServers();
  o.compress = "dgc:ratio=0.01";
  ExpectRefused(o, "dgc moves the optimizer's momentum onto the workers");
  o = OverServers();
  o.compress = "topk:ratio=0.1";
  o.worker_momentum = true;
  o.momentum = 0.9;
  ExpectRefused(o, "do not apply to --arch ps");
  o = OverServers();
  o.error_feedback = true;
  ExpectRefused(o, "need --compress");
  o = OverServers();
  o.compress_pull = "nonesuch";
  ExpectRefused(o, "--compress-pull nonesuch");
  StrategyOptions allreduce;
  allreduce.compress_pull = "fp16";
  ExpectRefused(allreduce, "it needs --arch ps:servers=S");
}

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
    if (strategy->SharesEpochs()) return InternalError("bsp shares epochs");
    for (const char* sync : {"asp", "ssp:staleness=1", "backup:workers=1"}) {
      StrategyOptions async = options;
      async.sync = sync;
      FRUGAL_ASSIGN_OR_RETURN(auto s, MakeStrategy(PlanStrategy(async).value(), t, *reducer, &t));
      if (s->traits().identical_replicas || !s->SharesEpochs()) {
        return InternalError(fmt::format("{}: replicas identical or epochs not shared", sync));
      }
    }
    StrategyOptions lag = options;
    lag.sync = "lag";
    FRUGAL_ASSIGN_OR_RETURN(auto s, MakeStrategy(PlanStrategy(lag).value(), t, *reducer, &t));
    if (!s->traits().identical_replicas || s->SharesEpochs()) {
      return InternalError("lag: replicas differ or epochs shared");
    }
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace frugal
