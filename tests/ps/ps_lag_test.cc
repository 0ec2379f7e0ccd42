// LAG over the parameter server on a convex least-squares problem with heterogeneous workers
// (Chen et al. 2018's setting): worker m holds f_m(x) = 1/2 sum_i a_mi (x_i - c_mi)^2 with
// curvatures a_m scaled by 1, 0.1, 0.01, 0.001, the servers run gradient descent on the average
// with step 1/L. After the same number of steps LAG reaches plain gradient descent's loss (bsp over
// the same servers) with far fewer uploads, and the servers count every push as an upload or a
// skip.
#include <gtest/gtest.h>

#include "ps/ps_test_util.h"

namespace frugal::ps_test {
namespace {

constexpr int kLagWorkers = 4;
constexpr size_t kDim = 6;
constexpr int kLagSteps = 20;

double Curvature(int m, size_t i) {
  const double scale[kLagWorkers] = {1.0, 0.1, 0.01, 0.001};
  return 0.5 * static_cast<double>(i + 1) * scale[m];
}
double Center(int m, size_t i) { return 0.3 * (m + 1) - 0.2 * static_cast<double>(i); }

std::vector<float> GradientOf(int m, const std::vector<float>& x) {
  std::vector<float> g(kDim);
  for (size_t i = 0; i < kDim; ++i) {
    g[i] = static_cast<float>(Curvature(m, i) * (static_cast<double>(x[i]) - Center(m, i)));
  }
  return g;
}

// f(x) - f(x*) of the average objective.
double Suboptimality(const std::vector<float>& x) {
  double gap = 0;
  for (size_t i = 0; i < kDim; ++i) {
    double a_sum = 0;
    double ac_sum = 0;
    for (int m = 0; m < kLagWorkers; ++m) {
      a_sum += Curvature(m, i);
      ac_sum += Curvature(m, i) * Center(m, i);
    }
    const double best = ac_sum / a_sum;
    gap += 0.5 * a_sum / kLagWorkers * (x[i] - best) * (x[i] - best);
  }
  return gap;
}

struct Result {
  std::vector<float> x;
  WorkerPushStats total;
  std::vector<WorkerPushStats> workers;
};

Result Descend(PsConsistency kind) {
  double lipschitz = 0;
  for (size_t i = 0; i < kDim; ++i) {
    double a = 0;
    for (int m = 0; m < kLagWorkers; ++m) a += Curvature(m, i) / kLagWorkers;
    lipschitz = std::max(lipschitz, a);
  }
  ServerOptimizer gd;
  gd.lr = [step = 1.0 / lipschitz](int64_t) { return step; };
  Model initial;
  initial.names = {"x"};
  initial.values = {std::vector<float>(kDim, 0.0f)};
  ParameterServerConfig config = Config(kLagWorkers, 1, size_t{1} << 20);
  config.consistency = kind;
  Result result;
  const ClusterResult run = RunCluster(
      config, gd, initial, [&](int w, ParameterClient& client, Transport&, Model& model) -> Status {
        std::vector<float> x = model.values[0];
        for (int k = 0; k < kLagSteps; ++k) {
          std::vector<float> g = GradientOf(w, x);
          TensorRequest request;
          request.name = "x";
          request.step = static_cast<uint64_t>(k);
          FRUGAL_RETURN_IF_ERROR(client.Submit(request, g)->Wait(kWait));
          x = g;
        }
        if (w == 0) result.x = x;
        return Status::Ok();
      });
  for (const Status& s : run.statuses) EXPECT_TRUE(s.ok()) << s.ToString();
  result.workers = run.reports[0].workers;
  for (const WorkerPushStats& s : result.workers) result.total.Merge(s);
  return result;
}

TEST(ParameterServerLag, ReachesGradientDescentsLossWithFewerUploads) {
  const Result gd = Descend(PsConsistency::kBsp);
  const Result lag = Descend(PsConsistency::kLag);
  ASSERT_EQ(gd.x.size(), kDim);
  ASSERT_EQ(lag.x.size(), kDim);
  const double gd_gap = Suboptimality(gd.x);
  const double lag_gap = Suboptimality(lag.x);
  EXPECT_GT(gd_gap, 0.0);
  EXPECT_LE(lag_gap, 1.1 * gd_gap) << "gradient descent " << gd_gap << ", lag " << lag_gap;
  EXPECT_EQ(gd.total.applied, static_cast<uint64_t>(kLagWorkers * kLagSteps));
  EXPECT_EQ(gd.total.skipped, 0u);
  // The double-precision run of the same rule uploads 17 times in 80 pushes.
  EXPECT_LE(lag.total.applied, 25u);
  EXPECT_GE(lag.total.applied, static_cast<uint64_t>(kLagWorkers));  // everyone's first push
  for (int m = 0; m < kLagWorkers; ++m) {
    EXPECT_EQ(lag.workers[m].applied + lag.workers[m].skipped, static_cast<uint64_t>(kLagSteps))
        << "worker " << m;
    // max-skip = 10: at least one upload in every 11 pushes.
    EXPECT_GE(lag.workers[m].applied, static_cast<uint64_t>((kLagSteps + 10) / 11))
        << "worker " << m;
  }
}

}  // namespace
}  // namespace frugal::ps_test
