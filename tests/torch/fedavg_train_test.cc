// FedAvg training through frugal_torch, ranks as threads: one local step of one client per rank
// against BSP, the sample-count weights against a serial computation, the round records' bytes,
// FedAvg over parameter servers against FedAvg over all-reduce, and a run over parameter servers
// resumed from a checkpoint against the run never stopped.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "frugal/compress_wire.h"
#include "frugal/fedavg.h"
#include "frugal/inproc_transport.h"
#include "frugal/parameter_server.h"
#include "frugal/strategy.h"
#include "frugal_torch/checkpoint.h"
#include "frugal_torch/fedavg_trainer.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::Transport;
using testing_torch::ExpectAllOk;

// The first `train` training images (and the first 200 test images) of Fashion-MNIST.
FashionMnist Subset(int64_t train) {
  const FashionMnist& all = testing_torch::Data();
  FashionMnist data;
  auto cut = [](const ImageSet& set, int64_t count) {
    ImageSet out;
    out.count = count;
    out.rows = set.rows;
    out.cols = set.cols;
    const size_t pixels = static_cast<size_t>(set.rows * set.cols);
    out.images.assign(set.images.begin(), set.images.begin() + static_cast<long>(count * pixels));
    out.labels.assign(set.labels.begin(), set.labels.begin() + count);
    return out;
  };
  data.train = cut(all.train, train);
  data.test = cut(all.test, 200);
  return data;
}

TrainOptions Plain(int64_t batch) {
  TrainOptions options;
  options.model = "mlp";
  options.batch_size = batch;
  options.epochs = 1;
  options.seed = 5;
  options.lr = 0.1;
  options.momentum = 0;
  options.timeout = std::chrono::seconds(60);
  return options;
}

// Batch 32, `rounds` rounds, clients' shards drawn from Dirichlet(0.5).
TrainOptions DirichletRounds(int64_t rounds) {
  TrainOptions options = Plain(32);
  options.epochs = rounds;
  options.partition = PartitionSpec{PartitionKind::kDirichlet, 0.5};
  return options;
}

frugal::StrategyPlan PlanOf(const std::string& sync, const std::string& compress = "",
                            uint64_t seed = 5, const std::string& arch = "allreduce") {
  frugal::StrategyOptions o;
  o.arch = arch;
  o.sync = sync;
  o.compress = compress;
  o.seed = seed;
  o.timeout = std::chrono::seconds(60);
  return frugal::PlanStrategy(o).value();
}

struct FedRun {
  std::vector<std::vector<float>> parameters;  // per rank
  std::vector<FedAvgSummary> summaries;
};

FedRun RunFedAvg(int n, const frugal::StrategyPlan& plan, const FashionMnist& data,
                 const TrainOptions& options) {
  FedRun run;
  run.parameters.resize(n);
  run.summaries.resize(n);
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(
        auto reducer, frugal::MakeStrategyReducer(plan, t, 0, frugal::DefaultCompressorRegistry()));
    FRUGAL_ASSIGN_OR_RETURN(
        auto fedavg, frugal::FederatedAveraging::Create(
                         plan, *reducer, frugal::DefaultCompressorRegistry(), t.rank(), t.size()));
    FedAvgCallbacks callbacks;
    const int rank = t.rank();
    callbacks.on_final_parameters = [&, rank](const std::vector<float>& p) {
      run.parameters[rank] = p;
    };
    FRUGAL_ASSIGN_OR_RETURN(run.summaries[rank],
                            TrainFedAvg(t, *reducer, *fedavg, data, options, callbacks));
    return Status::Ok();
  }));
  return run;
}

// `n` workers and plan.arch.servers servers (the last ranks), FedAvg over the servers; the
// servers save and resume their part of options.checkpoint.
FedRun RunFedAvgOverServers(int n, const frugal::StrategyPlan& plan, const FashionMnist& data,
                            const TrainOptions& options) {
  FedRun run;
  run.parameters.resize(n);
  run.summaries.resize(n);
  ExpectAllOk(frugal::RunRanks(n + plan.arch.servers, [&](Transport& world) -> Status {
    const frugal::RoleAssignment roles = frugal::AssignRoles(plan.arch, world.size(), world.rank());
    FRUGAL_ASSIGN_OR_RETURN(frugal::RoleGroup group,
                            frugal::JoinRoleGroup(world, roles, plan.timeout));
    if (roles.mine == frugal::Role::kServer) {
      // The servers' files in the set of options.checkpoint, as `frugal train` has them.
      const frugal::ServerCheckpointHooks checkpoints =
          ServerCheckpointHooksOf(options.checkpoint, world.rank(), world.size(), plan.timeout);
      return frugal::RunServerRole(world, plan, frugal::ServerOptimizer{},
                                   frugal::Logger(frugal::LogLevel::kOff), &checkpoints);
    }
    Transport& t = *group.transport;
    FRUGAL_ASSIGN_OR_RETURN(auto fedavg, frugal::FederatedAveraging::CreateOverServers(
                                             plan, world, t, frugal::DefaultCompressorRegistry()));
    FedAvgCallbacks callbacks;
    const int rank = t.rank();
    callbacks.on_final_parameters = [&, rank](const std::vector<float>& p) {
      run.parameters[rank] = p;
    };
    FRUGAL_ASSIGN_OR_RETURN(run.summaries[rank], TrainFedAvg(t, *fedavg, data, options, callbacks));
    return Status::Ok();
  }));
  return run;
}

std::vector<float> RunBsp(int n, const FashionMnist& data, const TrainOptions& options) {
  std::vector<float> parameters;
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    auto reducer = testing_torch::Ring(t);
    TrainCallbacks callbacks;
    if (t.rank() == 0)
      callbacks.on_final_parameters = [&](const std::vector<float>& p) { parameters = p; };
    return Train(t, *reducer, data, options, callbacks).status();
  }));
  return parameters;
}

double MaxAbsDifference(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// One client per rank, every client every round, one local step over the client's whole shard,
// equal shards (the IID shards are the ranks' first-epoch shards): each client's delta is
// -lr g_r, and their average is BSP's step with the averaged gradient.
TEST(FedAvgTraining, OneClientPerRankAndOneLocalStepIsBsp) {
  torch::set_num_threads(1);
  const FashionMnist data = Subset(600);
  for (int n : {2, 3}) {
    const TrainOptions options = Plain(600 / n);  // one batch: the whole shard
    TrainOptions bsp_options = options;
    bsp_options.max_steps = 1;
    const std::vector<float> bsp = RunBsp(n, data, bsp_options);
    const FedRun fed = RunFedAvg(
        n, PlanOf(fmt::format("fedavg:clients={},fraction=1,local-steps=1", n)), data, options);
    for (int r = 0; r < n; ++r) {
      EXPECT_LT(MaxAbsDifference(fed.parameters[r], ToDouble(bsp)), 1e-5)
          << "n=" << n << " rank " << r;
      EXPECT_EQ(fed.parameters[r], fed.parameters[0]) << "identical replicas";
    }
    EXPECT_TRUE(fed.summaries[0].train.params_consistent);
    // Two local steps are another algorithm: measurably elsewhere.
    const FedRun two = RunFedAvg(
        n, PlanOf(fmt::format("fedavg:clients={},fraction=1,local-steps=2", n)), data, options);
    EXPECT_GT(MaxAbsDifference(two.parameters[0], ToDouble(bsp)), 1e-4);
  }
}

// Unequal Dirichlet shards: the global model after one round is sum_c n_c x_c / sum_c n_c, with
// x_c computed here serially (one full-batch SGD step from the initial model on client c's shard).
TEST(FedAvgTraining, GlobalModelWeightsClientsBySampleCount) {
  torch::set_num_threads(1);
  const FashionMnist data = Subset(400);
  const TrainOptions options = Plain(400);  // every shard in one batch
  const int clients = 5;
  const frugal::StrategyPlan plan =
      PlanOf(fmt::format("fedavg:clients={},local-steps=1,min-samples=1", clients));
  TrainOptions dirichlet = options;
  dirichlet.partition = PartitionSpec{PartitionKind::kDirichlet, 0.5};
  const ClientPartition partition =
      PartitionClients(data.train.labels, clients, dirichlet.partition, options.seed, 1).value();
  const std::vector<int64_t> counts = partition.Counts();
  ASSERT_NE(*std::min_element(counts.begin(), counts.end()),
            *std::max_element(counts.begin(), counts.end()));

  std::vector<double> weighted;
  std::vector<double> unweighted;
  double total = 0;
  const torch::Tensor images =
      torch::from_blob(const_cast<float*>(data.train.images.data()), {data.train.count, 1, 28, 28});
  const torch::Tensor labels =
      torch::from_blob(const_cast<uint8_t*>(data.train.labels.data()), {data.train.count},
                       torch::TensorOptions().dtype(torch::kUInt8))
          .to(torch::kLong);
  for (int c = 0; c < clients; ++c) {
    auto model = MakeModel("mlp", options.seed).value();
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(options.lr));
    std::vector<int64_t> shard = partition.shards[static_cast<size_t>(c)];
    const torch::Tensor index = torch::from_blob(shard.data(), {static_cast<int64_t>(shard.size())},
                                                 torch::TensorOptions().dtype(torch::kLong));
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(images.index_select(0, index)),
                                         labels.index_select(0, index))
        .backward();
    sgd.step();
    std::vector<double> x;
    for (const torch::Tensor& p : model->parameters()) {
      const torch::Tensor flat = p.detach().contiguous().view(-1);
      x.insert(x.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
    }
    weighted.resize(x.size(), 0.0);
    unweighted.resize(x.size(), 0.0);
    const double w = static_cast<double>(shard.size());
    for (size_t i = 0; i < x.size(); ++i) {
      weighted[i] += w * x[i];
      unweighted[i] += x[i] / clients;
    }
    total += w;
  }
  for (double& v : weighted) v /= total;
  for (int n : {1, 2, 3}) {
    const FedRun fed = RunFedAvg(n, plan, data, dirichlet);
    EXPECT_LT(MaxAbsDifference(fed.parameters[0], weighted), 1e-5) << "n=" << n;
    EXPECT_GT(MaxAbsDifference(fed.parameters[0], unweighted), 1e-4) << "the weights matter";
    for (int r = 1; r < n; ++r) EXPECT_EQ(fed.parameters[r], fed.parameters[0]);
    EXPECT_EQ(fed.summaries[0].partition.Counts(), counts);
  }
}

// Round records: the sampled clients, the bytes each client downloads and uploads, the samples
// and steps, and the aggregate's bytes on the transport.
TEST(FedAvgTraining, RoundRecordsCountClientsStepsAndBytesExactly) {
  torch::set_num_threads(1);
  const FashionMnist data = Subset(800);
  TrainOptions options = Plain(32);
  options.epochs = 3;
  const std::string sync = "fedavg:clients=8,fraction=0.25,local-steps=2";
  for (const std::string compress : {"", "fp16"}) {
    const FedRun fed = RunFedAvg(2, PlanOf(sync, compress), data, options);
    const FedAvgSummary& s = fed.summaries[0];
    ASSERT_EQ(s.rounds.size(), 3u);
    const uint64_t params = static_cast<uint64_t>(s.train.params);
    // mlp: fc1.weight (200704) and fc2.weight (65536) are at least 64 KiB: compressed with fp16.
    uint64_t upload = 4 * params;
    if (!compress.empty()) {
      for (uint64_t numel : {200704, 65536})
        upload += frugal::kWireHeaderBytes + 2 * numel - 4 * numel;
    }
    for (size_t r = 0; r < 3; ++r) {
      const RoundRecord& rec = s.rounds[r];
      EXPECT_EQ(rec.round, static_cast<int64_t>(r) + 1);
      EXPECT_EQ(rec.clients, frugal::SampleClients(5, static_cast<int64_t>(r), 8, 0.25));
      EXPECT_EQ(rec.steps, 2 * 2);
      EXPECT_EQ(rec.samples, 2 * 2 * 32);
      EXPECT_EQ(rec.bytes_down, 2 * 4 * params);
      EXPECT_EQ(rec.bytes_up, 2 * upload) << compress;
      // The aggregate: one ring all-reduce of params + 1 floats per round (2 ranks: the whole
      // bucket once from each rank).
      EXPECT_EQ(rec.bytes_sent, (r + 1) * 4 * (params + 1));
      EXPECT_EQ(rec.lr, options.lr);
    }
    EXPECT_EQ(s.bytes_up, 3 * 2 * upload);
    EXPECT_EQ(s.train.steps, 12);
    EXPECT_TRUE(s.train.params_consistent);
  }
}

// FedAvg over parameter servers: the servers' weighted average of the workers' uploads is the
// all-reduce's, bit for bit with two workers (a sum of two in either order, and the ring's division
// of the sums and the weights by 2 is exact), to float rounding with three; dense and with
// compressed uploads; the clients' records equal.
TEST(FedAvgTraining, OverServersEqualsFedAvgOverAllreduce) {
  torch::set_num_threads(1);
  const FashionMnist data = Subset(800);
  const TrainOptions options = DirichletRounds(3);
  const std::string sync = "fedavg:clients=8,fraction=0.5,local-steps=3,min-samples=8";
  for (const std::string compress : {"", "fp16"}) {
    for (int n : {2, 3}) {
      const FedRun allreduce = RunFedAvg(n, PlanOf(sync, compress), data, options);
      ASSERT_FALSE(allreduce.parameters[0].empty());
      for (const std::string arch : {"ps:servers=1", "ps:servers=2,shard-mb=0.05"}) {
        const std::string what = fmt::format("{} workers, {}, '{}'", n, arch, compress);
        const FedRun ps = RunFedAvgOverServers(n, PlanOf(sync, compress, 5, arch), data, options);
        for (int r = 0; r < n; ++r) {
          if (n == 2) {
            EXPECT_EQ(ps.parameters[r], allreduce.parameters[0]) << what << " rank " << r;
          } else {
            const double d = MaxAbsDifference(ps.parameters[r], ToDouble(allreduce.parameters[0]));
            // Measured (deterministic on one CPU): 1.1e-8 dense, 7.5e-7 with fp16 uploads on an
            // AMD EPYC guest, 1.04e-6 on an Intel guest with AVX-512 (libtorch's kernels round
            // differently); an aggregate off by one upload's weight is off by ~1e-2.
            EXPECT_LT(d, 3e-6) << what << " rank " << r;
          }
          EXPECT_EQ(ps.parameters[r], ps.parameters[0]) << what << ": identical replicas";
        }
        const FedAvgSummary& a = allreduce.summaries[0];
        const FedAvgSummary& b = ps.summaries[0];
        EXPECT_TRUE(b.train.params_consistent) << what;
        EXPECT_EQ(b.train.reducer, "ps") << what;
        ASSERT_EQ(b.rounds.size(), a.rounds.size()) << what;
        for (size_t i = 0; i < a.rounds.size(); ++i) {
          EXPECT_EQ(b.rounds[i].clients, a.rounds[i].clients) << what;
          EXPECT_EQ(b.rounds[i].steps, a.rounds[i].steps) << what;
          EXPECT_EQ(b.rounds[i].bytes_up, a.rounds[i].bytes_up) << what;
          EXPECT_EQ(b.rounds[i].bytes_down, a.rounds[i].bytes_down) << what;
          EXPECT_NEAR(b.rounds[i].test_loss, a.rounds[i].test_loss, 1e-5) << what;
        }
      }
    }
  }
}

// The bytes a worker pushes to the servers, exactly: per round and key a 52-byte header, and the
// key's floats when the worker played a sampled client; a worker whose clients were all left out
// sends the headers alone (weight 0).
TEST(FedAvgTraining, OverServersAWorkerPushesOnlyForItsSampledClients) {
  torch::set_num_threads(1);
  const FashionMnist data = Subset(800);
  TrainOptions options = Plain(32);
  options.epochs = 4;
  const int n = 3;
  const int64_t clients = 8;
  const FedRun ps = RunFedAvgOverServers(
      n, PlanOf("fedavg:clients=8,fraction=0.25,local-steps=1", "", 5, "ps:servers=1"), data,
      options);
  const FedAvgSummary& s = ps.summaries[0];
  ASSERT_EQ(s.rounds.size(), 4u);
  // mlp: 6 tensors cut into keys of at most 128 KiB (32768 floats): 7 + 1 + 2 + 1 + 1 + 1 = 13 keys
  // on the one server; no float buffers.
  const uint64_t params = static_cast<uint64_t>(s.train.params);
  const uint64_t headers = 13 * 52;
  std::vector<uint64_t> sent(n, 0);
  int rounds_with_an_idle_worker = 0;
  for (size_t r = 0; r < 4; ++r) {
    const std::vector<int64_t> sampled =
        frugal::SampleClients(5, static_cast<int64_t>(r), clients, 0.25);
    ASSERT_EQ(s.rounds[r].clients, sampled);
    std::vector<char> plays(n, 0);
    for (int64_t c : sampled) plays[static_cast<size_t>(frugal::ClientRank(c, n))] = 1;
    rounds_with_an_idle_worker += std::count(plays.begin(), plays.end(), 0) > 0;
    for (int w = 0; w < n; ++w) sent[w] += headers + (plays[w] != 0 ? 4 * params : 0);
    const uint64_t total = sent[0] + sent[1] + sent[2];
    EXPECT_EQ(s.rounds[r].bytes_sent, (total + n / 2) / n) << "round " << r + 1;
  }
  // 2 clients of 8 over 3 workers: some round leaves a worker out.
  EXPECT_GT(rounds_with_an_idle_worker, 0);
  EXPECT_TRUE(s.train.params_consistent);
}

// FedAvg over two parameter servers, stopped after round 2 and resumed from that round's
// checkpoint in a new job (new workers, new servers: only the files carry over), ends with the
// bits of the run that was never stopped: every worker's parameters, rounds 3 and 4 (clients,
// steps, losses, accuracy, the clients' bytes and the aggregate's bytes on the transport) and the
// whole run's counts. The state that carries over: the global model on the servers with its
// version and the workers' clocks, the clients' top-k residuals, the parameter clients' clocks,
// the round and the running totals.
TEST(FedAvgTraining, OverServersResumedAfterARoundEndsAsTheRunNeverStopped) {
  torch::set_num_threads(1);
  const FashionMnist data = Subset(800);
  const TrainOptions options = DirichletRounds(4);
  const frugal::StrategyPlan plan =
      PlanOf("fedavg:clients=6,fraction=0.5,local-steps=5", "topk:ratio=0.01", 5, "ps:servers=2");
  const int n = 2;
  const FedRun whole = RunFedAvgOverServers(n, plan, data, options);
  ASSERT_EQ(whole.summaries[0].rounds.size(), 4u);

  std::string dir = (std::filesystem::temp_directory_path() / "frugal-fedavg-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  TrainOptions stopped_options = options;
  stopped_options.epochs = 2;
  stopped_options.checkpoint.dir = dir;
  stopped_options.checkpoint.every_epoch = true;
  const FedRun stopped = RunFedAvgOverServers(n, plan, data, stopped_options);
  ASSERT_EQ(stopped.summaries[0].train.checkpoints, 2);
  ASSERT_NE(stopped.parameters[0], whole.parameters[0]) << "two rounds short of the end";

  TrainOptions resumed_options = options;
  resumed_options.checkpoint.resume = dir;
  const FedRun resumed = RunFedAvgOverServers(n, plan, data, resumed_options);
  std::filesystem::remove_all(dir);

  const FedAvgSummary& a = whole.summaries[0];
  const FedAvgSummary& b = resumed.summaries[0];
  EXPECT_EQ(b.train.resumed_from_step, 2);
  EXPECT_EQ(b.train.resumed_parameter_hash, stopped.summaries[0].train.parameter_hash);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(resumed.parameters[r], whole.parameters[r]) << "worker " << r;
  }
  EXPECT_EQ(b.train.parameter_hash, a.train.parameter_hash);
  EXPECT_TRUE(b.train.params_consistent);
  ASSERT_EQ(b.rounds.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const RoundRecord& x = a.rounds[i + 2];
    const RoundRecord& y = b.rounds[i];
    EXPECT_EQ(y.round, x.round);
    EXPECT_EQ(y.clients, x.clients);
    EXPECT_EQ(y.steps, x.steps);
    EXPECT_EQ(y.samples, x.samples);
    EXPECT_EQ(y.train_loss, x.train_loss) << "round " << x.round;
    EXPECT_EQ(y.test_loss, x.test_loss) << "round " << x.round;
    EXPECT_EQ(y.test_accuracy, x.test_accuracy) << "round " << x.round;
    EXPECT_EQ(y.bytes_up, x.bytes_up) << "round " << x.round;
    EXPECT_EQ(y.bytes_down, x.bytes_down) << "round " << x.round;
    EXPECT_EQ(y.bytes_sent, x.bytes_sent) << "round " << x.round;
  }
  EXPECT_EQ(b.train.steps, a.train.steps);
  EXPECT_EQ(b.bytes_up, a.bytes_up);
  EXPECT_EQ(b.bytes_down, a.bytes_down);
  EXPECT_EQ(b.train.test_loss, a.train.test_loss);
}

TEST(FedAvgTraining, OverServersRefusesWhatDoesNotApply) {
  frugal::StrategyOptions o;
  o.arch = "ps:servers=1";
  o.sync = "fedavg:clients=4";
  o.compress_pull = "fp16";
  EXPECT_THAT(frugal::PlanStrategy(o).status().message(),
              testing::HasSubstr("--compress-pull and --staleness-policy do not apply"));
  o.compress_pull.clear();
  o.staleness_policy = "scale";
  EXPECT_EQ(frugal::PlanStrategy(o).status().code(), frugal::StatusCode::kInvalidArgument);
  o.staleness_policy = "none";
  o.compress = "powersgd";
  EXPECT_THAT(frugal::PlanStrategy(o).status().message(),
              testing::HasSubstr("compresses each client's upload on its own"));
  o.compress = "topk:ratio=0.1";
  EXPECT_TRUE(frugal::PlanStrategy(o).ok());
}

}  // namespace
}  // namespace frugal_torch
