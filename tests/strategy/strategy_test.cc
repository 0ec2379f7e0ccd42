// The strategy seam without torch: spec parsing, the factory's rules, the exact steps at which
// the Local SGD family exchanges, and model averaging over ranks as threads.
#include "frugal/strategy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "frugal/gloo.h"
#include "frugal/inproc_transport.h"
#include "strategy/strategy_test_util.h"

namespace frugal {
namespace {

class DirectRunner final : public TransportRunner {
 public:
  explicit DirectRunner(Transport& t) : t_(t) {}
  Status Run(std::string_view, const std::function<Status(Transport&)>& fn) override {
    return fn(t_);
  }

 private:
  Transport& t_;
};

using strategy_test::ExpectAllOk;
using strategy_test::Plan;

TEST(StrategySpec, ParsesArchitectures) {
  EXPECT_EQ(ParseArchSpec("allreduce").value().algorithm, "ring");
  EXPECT_EQ(ParseArchSpec("allreduce:dbtree").value().algorithm, "dbtree");
  EXPECT_EQ(ParseArchSpec("allreduce:mpi").value().algorithm, "mpi");
  const Status unknown = ParseArchSpec("allreduce:nccl").status();
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("unknown all-reduce algorithm 'nccl'"), std::string::npos)
      << unknown.message();
  EXPECT_NE(ParseArchSpec("butterfly").status().message().find("accepted: allreduce"),
            std::string::npos);
}

// Gloo's all-reduces are dense peers like MPI_Allreduce: accepted by --arch, refused with
// --compress, modelled as ring and Rabenseifner by the cost model.
TEST(StrategySpec, GlooIsAnotherLibrarysAllreduce) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  EXPECT_EQ(ParseArchSpec("allreduce:gloo").value().algorithm, "gloo");
  EXPECT_EQ(ParseArchSpec("allreduce:gloo:halving_doubling").value().algorithm,
            "gloo:halving_doubling");
  EXPECT_NE(ParseArchSpec("allreduce:gloo:ring")
                .status()
                .message()
                .find("unknown all-reduce algorithm 'gloo:ring'"),
            std::string::npos);
  StrategyOptions options;
  options.arch = "allreduce:gloo:halving_doubling";
  EXPECT_TRUE(PlanStrategy(options).ok());
  options.compress = "efsign";
  const Status refused = PlanStrategy(options).status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--arch allreduce:gloo:halving_doubling does not apply"),
            std::string::npos)
      << refused.message();
}

TEST(StrategySpec, ParsesSynchronizations) {
  EXPECT_EQ(ParseSyncSpec("bsp").value().kind, SyncKind::kBsp);
  const SyncSpec local = ParseSyncSpec("local:period=8,start-epoch=2,intra-period=2").value();
  EXPECT_EQ(local.kind, SyncKind::kLocal);
  EXPECT_EQ(local.period, 8);
  EXPECT_EQ(local.start_epoch, 2);
  EXPECT_EQ(local.intra_period, 2);
  EXPECT_TRUE(local.average_buffers);
  EXPECT_FALSE(local.average_momenta);
  EXPECT_EQ(SyncSpecName(local), "local:period=8,start-epoch=2,intra-period=2");
  const SyncSpec fed = ParseSyncSpec("fedavg:clients=32,fraction=0.25,local-epochs=2").value();
  EXPECT_EQ(fed.clients, 32);
  EXPECT_DOUBLE_EQ(fed.fraction, 0.25);
  EXPECT_EQ(fed.local_epochs, 2);
  struct Bad {
    const char* spec;
    const char* message;
  };
  for (const Bad& bad :
       {Bad{"sgd", "unknown synchronization"}, Bad{"local", "local needs period=H"},
        Bad{"local:period=0", "out of range"},
        Bad{"local:period=4,intra-period=3", "intra-period must divide period"},
        Bad{"local:period=4,intra-period=4", "intra-period must divide period"},
        Bad{"local:period=4,every=2", "unknown parameter 'every'"},
        Bad{"fedavg:fraction=0.5", "fedavg needs clients=K"},
        Bad{"fedavg:clients=8,fraction=1.5", "out of range"},
        Bad{"local:period=x", "not an integer"}}) {
    const Status status = ParseSyncSpec(bad.spec).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad.spec;
    EXPECT_NE(status.message().find(bad.message), std::string::npos)
        << bad.spec << ": " << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << "one line: " << bad.spec;
  }
}

TEST(StrategyPlanRules, RefusesMeaninglessCombinations) {
  struct Case {
    StrategyOptions options;
    const char* message;
  };
  std::vector<Case> cases;
  auto add = [&](auto edit, const char* message) {
    StrategyOptions o;
    o.momentum = 0.9;
    edit(o);
    cases.push_back({o, message});
  };
  add([](StrategyOptions& o) { o.sync = "local:period=4", o.od_sgd = true; },
      "--od-sgd applies to --sync bsp only");
  add([](StrategyOptions& o) { o.sync = "local:period=4", o.skip_comm = true; },
      "--skip-comm applies to --sync bsp only");
  add([](StrategyOptions& o) { o.od_sgd = true, o.skip_comm = true; }, "exclude each other");
  add([](StrategyOptions& o) { o.sync = "local:period=4", o.compress = "dgc:ratio=0.01"; },
      "dgc works on gradients");
  add(
      [](StrategyOptions& o) {
        o.sync = "local:period=4", o.compress = "topk:ratio=0.01", o.worker_momentum = true;
      },
      "--worker-momentum works on gradients");
  add([](StrategyOptions& o) { o.arch = "allreduce:mpi", o.compress = "fp16"; },
      "--arch allreduce:mpi does not apply");
  add([](StrategyOptions& o) { o.error_feedback = true; }, "need --compress");
  add([](StrategyOptions& o) { o.compress = "dgc:ratio=0.01", o.nesterov = true; },
      "--nesterov does not combine with dgc");
  add([](StrategyOptions& o) { o.compress = "dgc:ratio=0.01", o.worker_momentum = true; },
      "--worker-momentum does not combine with dgc");
  add(
      [](StrategyOptions& o) {
        o.compress = "topk:ratio=0.01", o.worker_momentum = true, o.momentum = 0;
      },
      "needs a --momentum above 0");
  for (const Case& c : cases) {
    const Status status = PlanStrategy(c.options).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(status.message().find(c.message), std::string::npos)
        << c.message << " vs " << status.message();
  }
}

TEST(StrategyPlanRules, MovesMomentumWhereTheMethodSaysAndKeepsDeltasErrorFed) {
  StrategyOptions options;
  options.momentum = 0.9;
  options.nesterov = true;
  EXPECT_DOUBLE_EQ(PlanStrategy(options).value().optimizer_momentum, 0.9);
  options.nesterov = false;
  options.compress = "dgc:ratio=0.01";
  const StrategyPlan dgc = PlanStrategy(options).value();
  EXPECT_EQ(dgc.optimizer_momentum, 0);
  EXPECT_NE(dgc.compressed->spec.find("momentum=0.9"), std::string::npos);
  options.compress = "topk:ratio=0.01";
  options.worker_momentum = true;
  const StrategyPlan wm = PlanStrategy(options).value();
  EXPECT_EQ(wm.optimizer_momentum, 0);
  EXPECT_DOUBLE_EQ(wm.compressed->worker_momentum, 0.9);
  options.worker_momentum = false;
  options.sync = "local:period=4";
  EXPECT_TRUE(PlanStrategy(options).value().compressed->error_feedback);
  options.sync = "bsp";
  EXPECT_FALSE(PlanStrategy(options).value().compressed->error_feedback);
}

TEST(StrategyPlanRules, OneBitCompressorsGetAllgatherWorkerMomentumAndErrorFeedback) {
  StrategyOptions options;
  options.momentum = 0.9;
  options.compress = "onebit";
  const StrategyPlan onebit = PlanStrategy(options).value();
  EXPECT_EQ(onebit.compressed->path, AggregationPath::kAllgather);
  EXPECT_DOUBLE_EQ(onebit.compressed->worker_momentum, 0.9);
  EXPECT_EQ(onebit.optimizer_momentum, 0);
  EXPECT_TRUE(onebit.compressed->error_feedback);
  EXPECT_EQ(onebit.implied,
            (std::vector<std::string>{"--aggregate allgather", "--worker-momentum", "--ef"}));
  // efsign keeps its own error feedback: nothing to add there.
  options.compress = "efsign";
  const StrategyPlan efsign = PlanStrategy(options).value();
  EXPECT_EQ(efsign.compressed->path, AggregationPath::kAllgather);
  EXPECT_EQ(efsign.implied,
            (std::vector<std::string>{"--aggregate allgather", "--worker-momentum"}));
  // Without momentum there is none to move to the workers.
  options.momentum = 0;
  const StrategyPlan plain = PlanStrategy(options).value();
  EXPECT_EQ(plain.compressed->worker_momentum, 0);
  EXPECT_EQ(plain.implied, (std::vector<std::string>{"--aggregate allgather"}));
  // An explicit path or worker momentum leaves the choice to the user.
  options.momentum = 0.9;
  options.aggregate = "twophase";
  const StrategyPlan twophase = PlanStrategy(options).value();
  EXPECT_EQ(twophase.compressed->path, AggregationPath::kTwoPhase);
  EXPECT_EQ(twophase.compressed->worker_momentum, 0);
  EXPECT_DOUBLE_EQ(twophase.optimizer_momentum, 0.9);
  EXPECT_TRUE(twophase.implied.empty());
  options.aggregate = "auto";
  options.worker_momentum = true;
  EXPECT_EQ(PlanStrategy(options).value().compressed->path, AggregationPath::kAuto);
  EXPECT_TRUE(PlanStrategy(options).value().implied.empty());
  // Other compressors: unbiased (qsgd), or not re-quantizable (top-k), keep the automatic path.
  options.worker_momentum = false;
  for (const char* spec : {"qsgd", "topk:ratio=0.01", "fp16"}) {
    options.compress = spec;
    const StrategyPlan other = PlanStrategy(options).value();
    EXPECT_EQ(other.compressed->path, AggregationPath::kAuto) << spec;
    EXPECT_TRUE(other.implied.empty()) << spec;
  }
  // Random-k without its scale needs error feedback, and gets it when given alone; with the
  // scale (unbiased), or with an explicit path, it runs as given.
  options.compress = "randomk";
  const StrategyPlan randomk = PlanStrategy(options).value();
  EXPECT_TRUE(randomk.compressed->error_feedback);
  EXPECT_EQ(randomk.compressed->path, AggregationPath::kAuto);
  EXPECT_EQ(randomk.implied, (std::vector<std::string>{"--ef"}));
  options.compress = "randomk:scale=1";
  EXPECT_FALSE(PlanStrategy(options).value().compressed->error_feedback);
  options.compress = "randomk";
  options.aggregate = "allreduce";
  EXPECT_FALSE(PlanStrategy(options).value().compressed->error_feedback);
  EXPECT_TRUE(PlanStrategy(options).value().implied.empty());
  options.aggregate = "auto";
  // Local SGD compresses model deltas: no gradient-side defaults.
  options.compress = "onebit";
  options.sync = "local:period=4";
  EXPECT_TRUE(PlanStrategy(options).value().implied.empty());
}

// Signum keeps its momentum on the worker (the optimizer runs without); the sign votes take a
// learning rate of their scale when none was given, and say so.
TEST(StrategyPlanRules, SignVotesTakeTheirMomentumAndLearningRate) {
  StrategyOptions options;
  options.momentum = 0.9;
  options.compress = "signum";
  const StrategyPlan given = PlanStrategy(options).value();
  EXPECT_EQ(given.compressed->spec, "signum:beta=0.9");
  EXPECT_EQ(given.optimizer_momentum, 0);
  EXPECT_FALSE(given.lr.has_value());
  EXPECT_TRUE(given.implied.empty());
  options.lr_given = false;
  const StrategyPlan signum = PlanStrategy(options).value();
  EXPECT_DOUBLE_EQ(signum.lr.value(), 1e-3);
  EXPECT_EQ(signum.implied, (std::vector<std::string>{"--lr 0.001"}));
  // An explicit beta is kept; beta=0 is signSGD and leaves the optimizer's momentum alone.
  options.compress = "signum:beta=0.5";
  EXPECT_EQ(PlanStrategy(options).value().compressed->spec, "signum:beta=0.5");
  options.compress = "signum:beta=0";
  const StrategyPlan beta0 = PlanStrategy(options).value();
  EXPECT_DOUBLE_EQ(beta0.optimizer_momentum, 0.9);
  EXPECT_DOUBLE_EQ(beta0.lr.value(), 1e-4);
  options.compress = "sign";
  const StrategyPlan sign = PlanStrategy(options).value();
  EXPECT_EQ(sign.compressed->spec, "sign");
  EXPECT_DOUBLE_EQ(sign.optimizer_momentum, 0.9);
  EXPECT_DOUBLE_EQ(sign.lr.value(), 1e-4);
  // Other compressors keep the given learning rate.
  options.compress = "efsign";
  EXPECT_FALSE(PlanStrategy(options).value().lr.has_value());
  // Signum's momentum on the worker excludes a second one.
  options.compress = "signum";
  options.nesterov = true;
  EXPECT_NE(
      PlanStrategy(options).status().message().find("--nesterov does not combine with signum"),
      std::string::npos);
  options.nesterov = false;
  options.worker_momentum = true;
  EXPECT_NE(PlanStrategy(options).status().message().find(
                "--worker-momentum does not combine with signum"),
            std::string::npos);
}

// The steps (0-based, global) at which a strategy averages gradients and exchanges models.
struct Schedule {
  std::set<uint64_t> gradient_steps;
  std::set<uint64_t> exchange_steps;
};

Schedule ScheduleOf(const std::string& sync, int64_t steps_per_epoch, uint64_t steps) {
  const StrategyPlan plan = Plan(sync);
  Schedule schedule;
  ExpectAllOk(RunRanks(1, [&](Transport& t) -> Status {
    std::unique_ptr<GradientReducer> reducer =
        MakeStrategyReducer(plan, t, steps_per_epoch, DefaultCompressorRegistry()).value();
    std::unique_ptr<Strategy> strategy = MakeStrategy(plan, t, *reducer).value();
    for (uint64_t s = 0; s < steps; ++s) {
      StepPoint p;
      p.step = s;
      p.steps_per_epoch = steps_per_epoch;
      p.epoch = static_cast<int64_t>(s) / steps_per_epoch;
      p.step_in_epoch = static_cast<int64_t>(s) % steps_per_epoch;
      if (strategy->AveragesGradients(p)) schedule.gradient_steps.insert(s);
      if (strategy->ExchangesAfterStep(p)) schedule.exchange_steps.insert(s);
    }
    return Status::Ok();
  }));
  return schedule;
}

TEST(LocalSgdSchedule, AveragesAfterEveryPeriodOfLocalSteps) {
  const Schedule bsp = ScheduleOf("bsp", 5, 12);
  EXPECT_EQ(bsp.gradient_steps.size(), 12u);
  EXPECT_TRUE(bsp.exchange_steps.empty());

  const Schedule p1 = ScheduleOf("local:period=1", 5, 6);
  EXPECT_TRUE(p1.gradient_steps.empty());
  EXPECT_EQ(p1.exchange_steps, (std::set<uint64_t>{0, 1, 2, 3, 4, 5}));

  const Schedule p4 = ScheduleOf("local:period=4", 5, 17);
  EXPECT_TRUE(p4.gradient_steps.empty());
  EXPECT_EQ(p4.exchange_steps, (std::set<uint64_t>{3, 7, 11, 15}));

  // Post-local SGD: epochs 0 and 1 (steps 0-9) are BSP; local steps count from step 10.
  const Schedule post = ScheduleOf("local:period=3,start-epoch=2", 5, 20);
  EXPECT_EQ(post.gradient_steps, (std::set<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(post.exchange_steps, (std::set<uint64_t>{12, 15, 18}));

  // Hierarchical: host averages after local steps 2, 6, 10 (j % 2 == 0, j % 4 != 0), global
  // ones after 4, 8, 12.
  const Schedule hier = ScheduleOf("local:period=4,intra-period=2", 5, 12);
  EXPECT_EQ(hier.exchange_steps, (std::set<uint64_t>{1, 3, 5, 7, 9, 11}));
}

using strategy_test::kA;
using strategy_test::ModelOfRank;
using strategy_test::RankModel;

TEST(LocalSgdAveraging, ParametersSetToTheRankBecomeTheirMean) {
  for (int n : {1, 2, 3, 4, 5}) {
    for (const std::string sync : {"local:period=2", "local:period=2,buffers=0,momenta=1"}) {
      const StrategyPlan plan = Plan(sync);
      std::vector<RankModel> models(static_cast<size_t>(n));
      std::vector<uint64_t> bytes(static_cast<size_t>(n));
      ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
        RankModel& m = models[static_cast<size_t>(t.rank())];
        FRUGAL_ASSIGN_OR_RETURN(strategy_test::BegunStrategy begun,
                                strategy_test::BeginDrifted(plan, t, m));
        Strategy* strategy = begun.strategy.get();
        ModelBuffers view = m.View();
        DirectRunner runner(t);
        StepPoint p;
        p.steps_per_epoch = 10;
        p.step = 0;  // local step 1: no exchange
        FRUGAL_RETURN_IF_ERROR(strategy->AfterOptimizerStep(p, view, runner));
        if (m.a[0] != static_cast<float>(t.rank())) return InternalError("averaged too early");
        p.step = 1;  // local step 2: average
        FRUGAL_RETURN_IF_ERROR(strategy->AfterOptimizerStep(p, view, runner));
        bytes[static_cast<size_t>(t.rank())] = strategy->bytes_sent();
        return Status::Ok();
      }));
      const double mean = (n - 1) / 2.0;
      const bool buffers = sync.find("buffers=0") == std::string::npos;
      const bool momenta = sync.find("momenta=1") != std::string::npos;
      for (int r = 0; r < n; ++r) {
        const RankModel& m = models[static_cast<size_t>(r)];
        for (float x : m.a) ASSERT_FLOAT_EQ(x, mean) << sync << " n=" << n;
        for (float x : m.b) ASSERT_FLOAT_EQ(x, 2 * mean) << sync << " n=" << n;
        EXPECT_FLOAT_EQ(m.stats[0], buffers ? 10 * mean : 10.0f * r) << sync;
        EXPECT_FLOAT_EQ(m.momentum[0], momenta ? mean : r) << sync;
        // One fused ring all-reduce: 2 (n - 1) / n of the floats averaged, per rank, within the
        // rounding of the block partition.
        const size_t floats = kA + 7 + (buffers ? 3 : 0) + (momenta ? kA : 0);
        const double expected = 2.0 * (n - 1) / n * 4 * static_cast<double>(floats);
        EXPECT_NEAR(static_cast<double>(bytes[static_cast<size_t>(r)]), expected, 8.0 * n)
            << sync << " n=" << n;
      }
    }
  }
}

TEST(LocalSgdAveraging, CompressedDeltasKeepEveryReplicaEqualAndSendLess) {
  const int n = 3;
  const StrategyPlan dense = Plan("local:period=1");
  const StrategyPlan topk = Plan("local:period=1", "topk:ratio=0.1");
  std::vector<uint64_t> sent;
  for (const StrategyPlan* plan : {&dense, &topk}) {
    std::vector<RankModel> models(n);
    std::vector<uint64_t> bytes(n);
    ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
      RankModel& m = models[static_cast<size_t>(t.rank())];
      m = ModelOfRank(1);
      ModelBuffers view = m.View();
      FRUGAL_ASSIGN_OR_RETURN(strategy_test::BegunStrategy begun,
                              strategy_test::BeginStrategy(*plan, t, view));
      Strategy* strategy = begun.strategy.get();
      DirectRunner runner(t);
      for (uint64_t s = 0; s < 5; ++s) {
        // Every rank moves its parameters by a different, uneven amount.
        for (size_t i = 0; i < m.a.size(); ++i) {
          m.a[i] += 0.01f * static_cast<float>((i * 7 + t.rank() * 13 + s) % 17);
        }
        StepPoint p;
        p.step = s;
        p.steps_per_epoch = 10;
        FRUGAL_RETURN_IF_ERROR(strategy->AfterOptimizerStep(p, view, runner));
      }
      bytes[static_cast<size_t>(t.rank())] = strategy->bytes_sent();
      return Status::Ok();
    }));
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(models[r].a, models[0].a) << "replicas equal after an average";
      EXPECT_EQ(models[r].b, models[0].b);
    }
    sent.push_back(bytes[0]);
  }
  // Top-k 10% of the large tensor (value and index per element, gathered from 2 peers) against
  // its dense ring all-reduce (2 (n-1)/n floats per element): well under half.
  EXPECT_GT(sent[1], 0u);
  EXPECT_LT(sent[1], sent[0] / 2) << "dense " << sent[0] << " top-k " << sent[1];
}

TEST(LocalSgdAveraging, HierarchicalAveragesWithinHostsThenAcross) {
  const int n = 4;
  StrategyOptions options;
  options.sync = "local:period=4,intra-period=2";
  options.ranks_per_host = 2;
  const StrategyPlan plan = PlanStrategy(options).value();
  std::vector<RankModel> after_host(n);
  std::vector<RankModel> after_global(n);
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    RankModel m;
    FRUGAL_ASSIGN_OR_RETURN(strategy_test::BegunStrategy begun,
                            strategy_test::BeginDrifted(plan, t, m));
    Strategy* strategy = begun.strategy.get();
    ModelBuffers view = m.View();
    DirectRunner runner(t);
    StepPoint p;
    p.steps_per_epoch = 10;
    p.step = 1;  // local step 2: within hosts
    FRUGAL_RETURN_IF_ERROR(strategy->AfterOptimizerStep(p, view, runner));
    after_host[static_cast<size_t>(t.rank())] = m;
    m.a[0] += static_cast<float>(t.rank());
    p.step = 3;  // local step 4: across hosts
    FRUGAL_RETURN_IF_ERROR(strategy->AfterOptimizerStep(p, view, runner));
    after_global[static_cast<size_t>(t.rank())] = m;
    return Status::Ok();
  }));
  EXPECT_FLOAT_EQ(after_host[0].a[5], 0.5f);
  EXPECT_FLOAT_EQ(after_host[1].a[5], 0.5f);
  EXPECT_FLOAT_EQ(after_host[2].a[5], 2.5f);
  EXPECT_FLOAT_EQ(after_host[3].a[5], 2.5f);
  for (int r = 0; r < n; ++r) {
    EXPECT_FLOAT_EQ(after_global[r].a[5], 1.5f);
    EXPECT_FLOAT_EQ(after_global[r].a[0], 1.5f + 1.5f);  // (0.5+0.5+2.5+2.5 + 0+1+2+3) / 4
  }
}

TEST(Roles, AllReduceMakesEveryRankAWorkerOnTheWorldItself) {
  ExpectAllOk(RunRanks(3, [&](Transport& t) -> Status {
    const RoleAssignment roles = AssignRoles(ArchSpec{}, t.size(), t.rank());
    if (!roles.all_workers() || roles.mine != Role::kWorker) return InternalError("roles");
    FRUGAL_ASSIGN_OR_RETURN(RoleGroup group, JoinRoleGroup(t, roles, std::chrono::seconds(5)));
    if (group.transport != &t || group.owned) return InternalError("split although all work");
    return Status::Ok();
  }));
}

TEST(Roles, ServersAndWorkersSplitIntoTheirOwnGroups) {
  ExpectAllOk(RunRanks(4, [&](Transport& t) -> Status {
    RoleAssignment roles;
    roles.roles = {Role::kServer, Role::kWorker, Role::kWorker, Role::kServer};
    roles.workers = 2;
    roles.mine = roles.roles[static_cast<size_t>(t.rank())];
    FRUGAL_ASSIGN_OR_RETURN(RoleGroup group, JoinRoleGroup(t, roles, std::chrono::seconds(5)));
    if (group.transport->size() != 2) return InternalError("group size");
    const int expected = t.rank() == 0 || t.rank() == 1 ? 0 : 1;  // servers 0, 3; workers 1, 2
    if (group.transport->rank() != expected) return InternalError("group rank");
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace frugal
