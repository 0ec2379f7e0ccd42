// The LibTorch adapter and the training loop over ranks as threads (in-process transport):
// BSP equivalence with one large-batch rank, parameter/optimizer broadcast, metric sums,
// bucket-plan agreement, the summary's fields, and a silent rank making the others time out.
#include "frugal_torch/distributed.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/reducer.h"
#include "frugal_torch/data.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::StatusCode;
using frugal::Transport;

using testing_torch::Data;
using testing_torch::ExpectAllOk;
using testing_torch::Ring;

TEST(Models, ShapesAndParameterCounts) {
  torch::set_num_threads(1);
  const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> expected = {
      {"mlp", {269322, 269322}},
      {"cnn", {350000, 500000}},
      {"resnet20", {250000, 300000}},
      {"vgg", {5000001, 6000000}}};
  const torch::Tensor x = torch::randn({3, 1, 28, 28});
  for (const auto& [name, range] : expected) {
    auto model = MakeModel(name, 1);
    ASSERT_TRUE(model.ok()) << name;
    const int64_t params = CountParameters(**model);
    EXPECT_GE(params, range.first) << name;
    EXPECT_LE(params, range.second) << name;
    EXPECT_EQ((*model)->forward(x).sizes(), (std::vector<int64_t>{3, 10})) << name;
  }
  EXPECT_EQ(MakeModel("alexnet", 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(Models, SeedDeterminesTheInitialParameters) {
  auto a = MakeModel("cnn", 5).value();
  auto b = MakeModel("cnn", 5).value();
  auto c = MakeModel("cnn", 6).value();
  EXPECT_EQ(ParameterHash(*a), ParameterHash(*b));
  EXPECT_NE(ParameterHash(*a), ParameterHash(*c));
}

TEST(Distributed, BroadcastParametersMakesRankZerosModelEveryones) {
  const int n = 3;
  std::vector<uint32_t> before(n), after(n);
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    auto model = MakeModel("resnet20", 100 + t.rank()).value();  // parameters and BN buffers
    before[t.rank()] = ParameterHash(*model);
    FRUGAL_RETURN_IF_ERROR(BroadcastParameters(t, *model, 0, std::chrono::seconds(30)));
    after[t.rank()] = ParameterHash(*model);
    return Status::Ok();
  }));
  EXPECT_NE(before[0], before[1]);
  for (int r = 0; r < n; ++r) EXPECT_EQ(after[r], before[0]) << r;
}

TEST(Distributed, BroadcastOptimizerStateCopiesMomentumBuffers) {
  const int n = 2;
  std::vector<std::vector<float>> momentum(n);
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    torch::set_num_threads(1);
    auto model = MakeModel("mlp", 1).value();
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    if (t.rank() == 0) {
      // Only rank 0 has momentum buffers: one step on a batch.
      const torch::Tensor x = torch::randn({4, 1, 28, 28});
      torch::nn::functional::cross_entropy(model->forward(x), torch::tensor({0, 1, 2, 3}))
          .backward();
      sgd.step();
    }
    FRUGAL_RETURN_IF_ERROR(BroadcastOptimizerState(t, sgd, 0, std::chrono::seconds(30)));
    for (const auto& p : model->parameters()) {
      auto it = sgd.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (it == sgd.state().end()) return frugal::InternalError("no momentum buffer");
      const auto& buf = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
      const torch::Tensor c = buf.contiguous();
      momentum[t.rank()].insert(momentum[t.rank()].end(), c.data_ptr<float>(),
                                c.data_ptr<float>() + c.numel());
    }
    return Status::Ok();
  }));
  ASSERT_FALSE(momentum[0].empty());
  EXPECT_EQ(momentum[0], momentum[1]);
}

TEST(Distributed, SumAcrossRanksIsExactAndIdentical) {
  for (int n : {1, 3, 4}) {
    std::vector<std::vector<double>> results(n);
    ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
      const double values[] = {0.1 * (t.rank() + 1), 1e10 + t.rank(), -1.0};
      FRUGAL_ASSIGN_OR_RETURN(results[t.rank()],
                              SumAcrossRanks(t, values, std::chrono::seconds(30)));
      return Status::Ok();
    }));
    double first = 0, second = 0;
    for (int r = 0; r < n; ++r) {
      first += 0.1 * (r + 1);
      second += 1e10 + r;
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(results[r], (std::vector<double>{first, second, -1.0 * n})) << n;
    }
  }
}

TEST(Distributed, DifferentModelsOnOneRankFailOnEveryRank) {
  const int n = 3;
  std::vector<Status> statuses = frugal::RunRanks(n, [&](Transport& t) -> Status {
    auto model = MakeModel(t.rank() == 2 ? "mlp" : "cnn", 1).value();
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
    auto reducer = Ring(t);
    DistributedOptimizerOptions options;
    options.timeout = std::chrono::seconds(30);
    return DistributedOptimizer::Create(t, *reducer, *model, sgd, options).status();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kInvalidArgument) << statuses[r].ToString();
    EXPECT_NE(statuses[r].message().find("rank(s) 2"), std::string::npos) << statuses[r].ToString();
  }
}

TEST(Distributed, BucketsFollowReverseRegistrationOrderUnderTheCap) {
  ExpectAllOk(frugal::RunRanks(1, [&](Transport& t) -> Status {
    auto model = MakeModel("cnn", 1).value();
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
    auto reducer = Ring(t);
    DistributedOptimizerOptions options;
    options.bucket_cap_bytes = 256 * 1024;  // fc1.weight (1.6 MB) alone, the rest around it
    auto dist = DistributedOptimizer::Create(t, *reducer, *model, sgd, options).value();
    std::vector<std::string> names;
    for (const auto& b : dist->buckets()) {
      for (const auto& e : b.entries) names.push_back(b.name + ":" + e.name);
    }
    const std::vector<std::string> expected = {
        "bucket0:fc2.bias",   "bucket0:fc2.weight",   "bucket0:fc1.bias",   "bucket1:fc1.weight",
        "bucket2:conv2.bias", "bucket2:conv2.weight", "bucket2:conv1.bias", "bucket2:conv1.weight"};
    EXPECT_EQ(names, expected);
    return Status::Ok();
  }));
}

// n ranks with batch b and one rank with batch n*b see the same samples at every step, so BSP
// averaging must give the same parameters up to float summation order.
void ExpectEquivalentToOneLargeBatchRank(const std::string& model, int n, int64_t b,
                                         const std::string& algorithm) {
  TrainOptions options;
  options.model = model;
  options.batch_size = b;
  options.lr = 0.05;
  options.momentum = 0.9;
  options.weight_decay = 1e-4;
  options.max_steps = 4;
  options.seed = 9;
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 500;

  std::vector<float> reference;
  ExpectAllOk(frugal::RunRanks(1, [&](Transport& t) -> Status {
    TrainOptions single = options;
    single.batch_size = b * n;
    auto reducer = Ring(t);
    TrainCallbacks callbacks;
    callbacks.on_final_parameters = [&](const std::vector<float>& p) { reference = p; };
    return Train(t, *reducer, Data(), single, callbacks).status();
  }));

  std::vector<std::vector<float>> params(n);
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    frugal::DenseReducerOptions reducer_options;
    reducer_options.algorithm = algorithm;
    reducer_options.timeout = std::chrono::seconds(60);
    FRUGAL_ASSIGN_OR_RETURN(auto reducer, frugal::MakeDenseReducer(t, reducer_options));
    TrainCallbacks callbacks;
    callbacks.on_final_parameters = [&](const std::vector<float>& p) { params[t.rank()] = p; };
    return Train(t, *reducer, Data(), options, callbacks).status();
  }));

  ASSERT_FALSE(reference.empty());
  // The training moved the parameters by far more than the tolerance below.
  std::vector<float> initial;
  for (const auto& p : MakeModel(model, options.seed).value()->parameters()) {
    const torch::Tensor c = p.detach().contiguous();
    initial.insert(initial.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  ASSERT_EQ(initial.size(), reference.size());
  double max_change = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    max_change = std::max(max_change, double{std::fabs(reference[i] - initial[i])});
  }
  EXPECT_GT(max_change, 1e-2) << model;
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(params[r].size(), reference.size());
    EXPECT_EQ(params[r], params[0]) << "rank " << r << " differs from rank 0";
    double max_diff = 0;
    for (size_t i = 0; i < reference.size(); ++i) {
      max_diff = std::max(max_diff, double{std::fabs(params[r][i] - reference[i])});
    }
    EXPECT_LT(max_diff, 1e-6) << model << " n=" << n << " " << algorithm;
    if (r == 0)
      std::printf("%s n=%d %s: max |n ranks - 1 rank| = %.3g, max change from init = %.3g\n",
                  model.c_str(), n, algorithm.c_str(), max_diff, max_change);
  }
}

TEST(Training, BspEquivalentToOneRankWithTheGlobalBatchMlp) {
  ExpectEquivalentToOneLargeBatchRank("mlp", 2, 32, "ring");
  ExpectEquivalentToOneLargeBatchRank("mlp", 3, 16, "rabenseifner");
  ExpectEquivalentToOneLargeBatchRank("mlp", 4, 16, "dbtree");
}

TEST(Training, BspEquivalentToOneRankWithTheGlobalBatchCnn) {
  ExpectEquivalentToOneLargeBatchRank("cnn", 2, 16, "ring");
}

TEST(Training, RanksEndIdenticalAndTheSummaryIsSane) {
  const int n = 3;
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = 32;
  options.max_steps = 30;
  options.lr = 0.05;
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 3000;
  std::vector<TrainSummary> summaries(n);
  std::vector<std::vector<EpochRecord>> epochs(n);
  std::vector<int64_t> last_step(n, 0);
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    auto reducer = Ring(t);
    TrainCallbacks callbacks;
    callbacks.on_step = [&](const StepProgress& p) { last_step[t.rank()] = p.global_step; };
    callbacks.on_epoch = [&](const EpochRecord& r) { epochs[t.rank()].push_back(r); };
    FRUGAL_ASSIGN_OR_RETURN(summaries[t.rank()], Train(t, *reducer, Data(), options, callbacks));
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    const TrainSummary& s = summaries[r];
    EXPECT_TRUE(s.params_consistent);
    EXPECT_EQ(s.parameter_hash, summaries[0].parameter_hash);
    EXPECT_EQ(s.workers, n);
    EXPECT_EQ(s.model, "mlp");
    EXPECT_EQ(s.params, 269322);
    EXPECT_EQ(s.steps, 30);
    EXPECT_EQ(s.epochs, 1);
    EXPECT_EQ(s.global_batch, 96);
    EXPECT_EQ(s.reducer, "allreduce:ring");
    EXPECT_EQ(s.bytes_counted_by, "transport");
    EXPECT_EQ(last_step[r], 30);
    // Ring all-reduce sends 2 (n-1)/n of the gradient per step; broadcasts and metrics add a
    // little on top.
    const double ring_bytes = 30.0 * 2.0 * (n - 1) / n * 4.0 * 269322;
    EXPECT_GE(static_cast<double>(s.bytes_sent_per_worker), ring_bytes * 0.99);
    EXPECT_LE(static_cast<double>(s.bytes_sent_per_worker), ring_bytes * 1.5);
    // 30 steps of lr 0.05 on an MLP already beat chance by far.
    EXPECT_GT(s.test_accuracy, 0.6);
    EXPECT_LE(s.test_accuracy, 1.0);
    EXPECT_GT(s.train_loss, 0.0);
    EXPECT_LT(s.train_loss, std::log(10.0));
    EXPECT_GT(s.wall_seconds, 0.0);
    EXPECT_GT(s.compute_seconds, 0.0);
    EXPECT_GE(s.comm_seconds, 0.0);
    EXPECT_LE(s.compute_seconds + s.comm_seconds, s.wall_seconds * 1.05);
    EXPECT_GT(s.samples_per_second, 0.0);
    // Every rank reports the same (exchanged) records.
    ASSERT_EQ(epochs[r].size(), 1u);
    EXPECT_EQ(epochs[r][0].test_accuracy, epochs[0][0].test_accuracy);
    EXPECT_EQ(epochs[r][0].train_loss, epochs[0][0].train_loss);
    EXPECT_EQ(epochs[r][0].steps, 30);
  }
}

// Trains on n in-process ranks over the ring reducer; every rank must succeed.
std::vector<TrainSummary> TrainOnRing(int n, const TrainOptions& options) {
  std::vector<TrainSummary> summaries(n);
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    auto reducer = Ring(t);
    FRUGAL_ASSIGN_OR_RETURN(summaries[t.rank()], Train(t, *reducer, Data(), options));
    return Status::Ok();
  }));
  return summaries;
}

// --stop-at-accuracy ends the run on every rank after the first epoch that reaches the target,
// and only then.
TEST(Training, StopsAfterTheEpochThatReachesTheTargetAccuracy) {
  const int n = 2;
  for (const double target : {0.5, 0.999}) {
    TrainOptions options;
    options.model = "mlp";
    options.batch_size = 256;
    options.lr = 0.1;
    options.epochs = 2;
    options.stop_at_accuracy = target;
    options.timeout = std::chrono::seconds(60);
    options.test_samples = 500;
    const std::vector<TrainSummary> summaries = TrainOnRing(n, options);
    const int64_t expected_epochs = target < 0.9 ? 1 : 2;
    for (const TrainSummary& s : summaries) {
      EXPECT_EQ(s.epochs, expected_epochs) << "target " << target;
      EXPECT_TRUE(s.params_consistent);
    }
    if (target < 0.9) {
      EXPECT_GE(summaries[0].test_accuracy, target);
    }
  }
  TrainOptions bad;
  bad.stop_at_accuracy = 1.5;
  EXPECT_EQ(ValidateTrainOptions(bad).code(), StatusCode::kInvalidArgument);
}

TEST(Training, DirichletPartitionTrains) {
  const int n = 2;
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = 16;
  options.max_steps = 5;
  options.partition = {PartitionKind::kDirichlet, 0.3};
  options.timeout = std::chrono::seconds(60);
  options.test_samples = 500;
  const std::vector<TrainSummary> summaries = TrainOnRing(n, options);
  EXPECT_TRUE(summaries[0].params_consistent);
  EXPECT_EQ(summaries[0].steps, 5);
}

TEST(Training, ASilentRankMakesTheOthersTimeOutNamingIt) {
  const int n = 3;
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = 8;
  options.max_steps = 3;
  options.timeout = std::chrono::milliseconds(1500);
  options.test_samples = 100;
  std::vector<Status> statuses = frugal::RunRanks(n, [&](Transport& t) -> Status {
    if (t.rank() == 1) return Status::Ok();  // never joins
    auto reducer = Ring(t);
    return Train(t, *reducer, Data(), options).status();
  });
  for (int r : {0, 2}) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kTimeout) << statuses[r].ToString();
    EXPECT_NE(statuses[r].message().find("1"), std::string::npos) << statuses[r].ToString();
  }
}

TEST(Training, RejectsBadOptions) {
  TrainOptions options;
  options.model = "nope";
  EXPECT_EQ(ValidateTrainOptions(options).code(), StatusCode::kInvalidArgument);
  options.model = "cnn";
  options.lr = 0;
  EXPECT_EQ(ValidateTrainOptions(options).code(), StatusCode::kInvalidArgument);
  options.lr = 0.1;
  options.batch_size = 0;
  EXPECT_EQ(ValidateTrainOptions(options).code(), StatusCode::kInvalidArgument);
  options.batch_size = 4;
  options.momentum = 0;
  options.nesterov = true;
  EXPECT_EQ(ValidateTrainOptions(options).code(), StatusCode::kInvalidArgument);
  options.nesterov = false;
  EXPECT_TRUE(ValidateTrainOptions(options).ok());
}

}  // namespace
}  // namespace frugal_torch
