// frugal_train_baseline: frugal's single-rank training throughput against a plain LibTorch loop.
//
// Every side trains the same model (same seed, hence the same initial parameters) on the same
// batches (ShardSampler for one rank) with the same SGD settings for --steps steps. The plain
// loop is what a LibTorch user writes: index_select the batch, zero_grad, forward,
// cross_entropy, backward, step, read the loss. frugal's sides are frugal_torch::Train on a
// one-rank in-process transport with the dense ring reducer: "blocking" reduces the gradient
// buckets with the DistributedOptimizer after backward; "engine" sends them through the
// communication engine with the overlap mode of --overlap (default priority, what `frugal train`
// does by default), with its hooks, engine thread and negotiation. The three run in turn,
// --repeats times each, and the medians are compared: overhead = plain samples/s / frugal
// samples/s - 1, and likewise for the process CPU time per sample (all threads), which the load
// of a shared machine disturbs far less than wall time. Both are taken from the end of the first
// step to the end of the last (set-up, the first step and the evaluation are excluded).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "frugal/engine.h"
#include "frugal/inproc_transport.h"
#include "frugal/reducer.h"
#include "frugal/timer.h"
#include "frugal_torch/data.h"
#include "frugal_torch/engine_options.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"

namespace {

using frugal_torch::FashionMnist;
using frugal_torch::TrainOptions;

// Wall and process CPU time (all threads) from the end of the first step to the end of the
// last one, and the samples trained in between.
struct Measurement {
  double wall = 0;
  double cpu = 0;
  double samples = 0;
  double SamplesPerSecond() const { return samples / wall; }
  double CpuMillisPerSample() const { return 1e3 * cpu / samples; }
};

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Marks the end of each step; the first one starts the clocks.
class StepClock {
 public:
  void StepDone(double samples) {
    if (!started_) {
      started_ = true;
      wall_.Reset();
      cpu_start_ = ProcessCpuSeconds();
      return;
    }
    result_.samples += samples;
    result_.wall = wall_.Seconds();
    result_.cpu = ProcessCpuSeconds() - cpu_start_;
  }
  const Measurement& result() const { return result_; }

 private:
  bool started_ = false;
  frugal::Stopwatch wall_;
  double cpu_start_ = 0;
  Measurement result_;
};

Measurement PlainLoop(const FashionMnist& data, const TrainOptions& options) {
  torch::set_num_threads(options.threads);
  auto model = frugal_torch::MakeModel(options.model, options.seed).value();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(options.lr)
                                                       .momentum(options.momentum)
                                                       .weight_decay(options.weight_decay));
  const torch::Tensor images =
      torch::from_blob(const_cast<float*>(data.train.images.data()),
                       {data.train.count, 1, data.train.rows, data.train.cols});
  const torch::Tensor labels = torch::from_blob(const_cast<uint8_t*>(data.train.labels.data()),
                                                {data.train.count}, torch::kUInt8)
                                   .to(torch::kLong);
  const frugal_torch::ShardSampler sampler(data.train.labels, 0, 1, options.batch_size,
                                           options.partition, options.seed);
  StepClock clock;
  int64_t done = 0;
  for (int64_t epoch = 0; done < options.max_steps; ++epoch) {
    std::vector<int64_t> order = sampler.EpochOrder(epoch);
    for (int64_t step = 0; step < sampler.steps_per_epoch() && done < options.max_steps;
         ++step, ++done) {
      std::vector<int64_t> batch =
          frugal_torch::ShardSampler::BatchOf(order, step, options.batch_size);
      const torch::Tensor index =
          torch::from_blob(batch.data(), {static_cast<int64_t>(batch.size())}, torch::kLong);
      const torch::Tensor x = images.index_select(0, index);
      const torch::Tensor y = labels.index_select(0, index);
      optimizer.zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      optimizer.step();
      (void)loss.item<double>();
      clock.StepDone(static_cast<double>(batch.size()));
    }
  }
  return clock.result();
}

Measurement FrugalLoop(const FashionMnist& data, TrainOptions options,
                       std::optional<frugal::OverlapMode> overlap) {
  if (overlap) {
    frugal_torch::OverlapOptions overlap_options;
    overlap_options.mode = *overlap;
    options.overlap = overlap_options;
  }
  frugal::InProcWorld world(1);
  std::unique_ptr<frugal::Transport> transport = world.Connect(0);
  frugal::DenseReducerOptions reducer_options;
  reducer_options.algorithm = "ring";
  auto reducer = frugal::MakeDenseReducer(*transport, reducer_options).value();
  StepClock clock;
  frugal_torch::TrainCallbacks callbacks;
  int64_t previous = 0;
  callbacks.on_step = [&](const frugal_torch::StepProgress& p) {
    // One rank: every batch is full but the last one of an epoch.
    const int64_t batch =
        std::min<int64_t>(options.batch_size, data.train.count - (p.step - 1) * options.batch_size);
    clock.StepDone(static_cast<double>(batch));
    previous = p.global_step;
  };
  auto summary = frugal_torch::Train(*transport, *reducer, data, options, callbacks);
  if (!summary.ok()) {
    std::fprintf(stderr, "frugal_train_baseline: %s\n", summary.status().ToString().c_str());
    std::exit(1);
  }
  if (previous != options.max_steps) {
    std::fprintf(stderr, "frugal_train_baseline: ran %lld steps\n",
                 static_cast<long long>(previous));
    std::exit(1);
  }
  return clock.result();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("frugal's single-rank training throughput against a plain LibTorch loop");
  TrainOptions options;
  options.max_steps = 300;
  int repeats = 3;
  std::string overlap_name = "priority";
  std::string json_path;
  std::string data_dir = frugal_torch::kFashionMnistDir;
  app.add_option("--model", options.model, "mlp, cnn, resnet20 or vgg")->capture_default_str();
  app.add_option("--steps", options.max_steps, "training steps per run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", options.batch_size, "batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", options.threads, "torch threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--repeats", repeats, "runs of each loop")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", options.lr, "learning rate")->capture_default_str();
  app.add_option("--momentum", options.momentum, "momentum")->capture_default_str();
  app.add_option("--seed", options.seed, "seed")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Fashion-MNIST directory")->capture_default_str();
  app.add_option("--overlap", overlap_name, "overlap mode of the engine side")
      ->capture_default_str();
  app.add_option("--json", json_path, "write the result as one JSON object to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "frugal_train_baseline: %s\n", e.what());
    return 2;
  }
  if (frugal::Status s = frugal_torch::ValidateTrainOptions(options); !s.ok()) {
    std::fprintf(stderr, "frugal_train_baseline: %s\n", s.message().c_str());
    return 2;
  }
  auto overlap = frugal::ParseOverlapMode(overlap_name);
  if (!overlap.ok()) {
    std::fprintf(stderr, "frugal_train_baseline: %s\n", overlap.status().message().c_str());
    return 2;
  }
  options.epochs = 1 << 20;  // bounded by --steps
  auto data = frugal_torch::LoadFashionMnist(data_dir);
  if (!data.ok()) {
    std::fprintf(stderr, "frugal_train_baseline: %s\n", data.status().message().c_str());
    return 2;
  }
  options.test_samples = 1000;  // the evaluation after the last step is not measured
  std::vector<Measurement> runs[3];
  const char* kNames[3] = {"plain", "blocking", "engine"};
  for (int r = 0; r < repeats; ++r) {
    runs[0].push_back(PlainLoop(*data, options));
    runs[1].push_back(FrugalLoop(*data, options, std::nullopt));
    runs[2].push_back(FrugalLoop(*data, options, *overlap));
    std::fprintf(stderr, "run %d:", r + 1);
    for (int k = 0; k < 3; ++k) {
      std::fprintf(stderr, " %s %.1f samples/s %.3f cpu-ms/sample;", kNames[k],
                   runs[k].back().SamplesPerSecond(), runs[k].back().CpuMillisPerSample());
    }
    std::fprintf(stderr, "\n");
  }
  double rate[3];
  double cpu[3];
  nlohmann::json result = {{"bench", "train-baseline"},  {"model", options.model},
                           {"steps", options.max_steps}, {"batch_size", options.batch_size},
                           {"threads", options.threads}, {"repeats", repeats},
                           {"overlap", overlap_name}};
  for (int k = 0; k < 3; ++k) {
    std::vector<double> rates, cpus;
    for (const Measurement& m : runs[k]) {
      rates.push_back(m.SamplesPerSecond());
      cpus.push_back(m.CpuMillisPerSample());
    }
    rate[k] = Median(rates);
    cpu[k] = Median(cpus);
    result[std::string(kNames[k]) + "_samples_per_second"] = rates;
    result[std::string(kNames[k]) + "_cpu_ms_per_sample"] = cpus;
  }
  std::printf("%-9s %10s %14s %12s %14s  (%s, %lld steps of %lld, %d thread%s, median of %d)\n",
              "loop", "samples/s", "wall overhead", "cpu-ms/smp", "cpu overhead",
              options.model.c_str(), static_cast<long long>(options.max_steps),
              static_cast<long long>(options.batch_size), options.threads,
              options.threads > 1 ? "s" : "", repeats);
  for (int k = 0; k < 3; ++k) {
    const double wall_overhead = rate[0] / rate[k] - 1.0;
    const double cpu_overhead = cpu[k] / cpu[0] - 1.0;
    std::printf("%-9s %10.1f %13.2f%% %12.4f %13.2f%%\n", kNames[k], rate[k], 100.0 * wall_overhead,
                cpu[k], 100.0 * cpu_overhead);
    result[std::string(kNames[k]) + "_median_samples_per_second"] = rate[k];
    result[std::string(kNames[k]) + "_median_cpu_ms_per_sample"] = cpu[k];
    if (k > 0) {
      result[std::string(kNames[k]) + "_wall_overhead"] = wall_overhead;
      result[std::string(kNames[k]) + "_cpu_overhead"] = cpu_overhead;
    }
  }
  std::printf("%s\n", result.dump().c_str());
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << result.dump() << "\n";
    if (!out) {
      std::fprintf(stderr, "frugal_train_baseline: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
