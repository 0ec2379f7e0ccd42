// Tier 2: the gossip strategies over the MPI transport across real processes (run with 1, 2, 3, 4
// and 8 ranks), against the single-process reference that every rank computes for itself.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "gossip/gossip_reference.h"
#include "mpi/mpi_test_main.h"

namespace frugal::gossip_test {
namespace {

struct Case {
  const char* arch;
  const char* sync;
  const char* compress;
  bool exact;
};

TEST(GossipMpi, EveryAlgorithmMatchesTheReference) {
  const Case cases[] = {
      {"topology=ring", "bsp", "", true},
      {"topology=exp,order=atc", "bsp", "", true},
      {"topology=torus", "local:period=2", "", true},
      {"topology=onepeer-exp", "bsp", "", true},
      {"topology=ring,algorithm=choco", "bsp", "topk:ratio=0.1", false},
      {"topology=exp,algorithm=dcd", "bsp", "qsgd:levels=64", false},
      {"topology=ring,algorithm=ecd", "bsp", "qsgd:levels=64", false},
      {"algorithm=sgp", "bsp", "", true},
      {"algorithm=sgp,overlap=1", "bsp", "", true},
  };
  auto world = mpitest::TestWorld();
  ASSERT_NE(world, nullptr);
  const int n = world->size();
  for (const Case& c : cases) {
    ReferenceConfig config;
    config.spec = ParseGossipSpec(c.arch).value();
    config.sync = ParseSyncSpec(c.sync).value();
    config.compress = c.compress;
    config.seed = 9;
    const auto plan = PlanOf(config, n);
    ASSERT_TRUE(plan.ok()) << c.arch << " on " << n << " ranks: " << plan.status().ToString();
    constexpr int kSteps = 10;
    StatusOr<std::vector<float>> model = RunStrategy(config, *world, kSteps, nullptr, nullptr);
    ASSERT_TRUE(model.ok()) << c.arch << ": " << model.status().ToString();
    const std::vector<float> expected = RunReference(config, n, kSteps)[world->rank()];
    if (c.exact) {
      EXPECT_EQ(*model, expected) << c.arch << " " << c.sync;
    } else {
      for (size_t e = 0; e < expected.size(); ++e) {
        ASSERT_NEAR((*model)[e], expected[e], 2e-5 * (1 + std::fabs(expected[e])))
            << c.arch << " element " << e;
      }
    }
  }
}

// AD-PSGD across processes: the sum of the models is the sum of the initial models and of every
// local update.
TEST(GossipMpi, AdPsgdConservesTheSum) {
  auto world = mpitest::TestWorld();
  ASSERT_NE(world, nullptr);
  const int n = world->size();
  ReferenceConfig config;
  config.spec = ParseGossipSpec("topology=ring").value();
  config.sync = ParseSyncSpec("asp").value();
  config.initial = Initial::kPerRank;
  config.local.lr = 0;
  if (!PlanOf(config, n).ok()) GTEST_SKIP() << "a ring of " << n << " is not bipartite";
  constexpr int kSteps = 30;
  StatusOr<std::vector<float>> model = RunStrategy(config, *world, kSteps, nullptr, nullptr);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // This rank's model minus its initial model and its own updates; the sum over the ranks is 0.
  std::vector<float> updates(kTotal, 0.0f);
  for (int s = 0; s < kSteps; ++s) LocalStep(config.local, world->rank(), s, updates);
  const std::vector<float> initial = InitialModel(world->rank(), Initial::kPerRank);
  std::vector<float> excess(kTotal);
  for (size_t e = 0; e < kTotal; ++e) excess[e] = (*model)[e] - initial[e] - updates[e];
  AllreduceOptions options;
  options.op = ReduceOp::kSum;
  ASSERT_TRUE(Allreduce(*world, std::span<float>(excess), options).ok());
  for (size_t e = 0; e < kTotal; ++e) EXPECT_NEAR(excess[e], 0.0, 1e-4) << e;
}

}  // namespace
}  // namespace frugal::gossip_test
