// frugal_train_baseline: frugal's single-rank training throughput against a plain LibTorch loop.
//
// Both sides train the same model (same seed, hence the same initial parameters) on the same
// batches (ShardSampler for one rank) with the same SGD settings for --steps steps. The plain
// loop is what a LibTorch user writes: index_select the batch, zero_grad, forward,
// cross_entropy, backward, step, read the loss. frugal's side is frugal_torch::Train on a
// one-rank in-process transport with the dense ring reducer: bucket packing, the (trivial)
// reduction, the learning-rate schedule, progress bookkeeping. Runs alternate, --repeats times
// each, and the medians are compared: overhead = plain samples/s / frugal samples/s - 1.
// Evaluation time is excluded on both sides (Train reports training throughput separately).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/reducer.h"
#include "frugal/timer.h"
#include "frugal_torch/data.h"
#include "frugal_torch/models.h"
#include "frugal_torch/trainer.h"

namespace {

using frugal_torch::FashionMnist;
using frugal_torch::TrainOptions;

double PlainLoop(const FashionMnist& data, const TrainOptions& options) {
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
  int64_t done = 0;
  double samples = 0;
  const frugal::Stopwatch watch;
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
      samples += static_cast<double>(batch.size());
    }
  }
  return samples / watch.Seconds();
}

double FrugalLoop(const FashionMnist& data, const TrainOptions& options) {
  frugal::InProcWorld world(1);
  std::unique_ptr<frugal::Transport> transport = world.Connect(0);
  frugal::DenseReducerOptions reducer_options;
  reducer_options.algorithm = "ring";
  auto reducer = frugal::MakeDenseReducer(*transport, reducer_options).value();
  auto summary = frugal_torch::Train(*transport, *reducer, data, options);
  if (!summary.ok()) {
    std::fprintf(stderr, "frugal_train_baseline: %s\n", summary.status().ToString().c_str());
    std::exit(1);
  }
  return summary->samples_per_second;
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
  options.epochs = 1 << 20;  // bounded by --steps
  auto data = frugal_torch::LoadFashionMnist(data_dir);
  if (!data.ok()) {
    std::fprintf(stderr, "frugal_train_baseline: %s\n", data.status().message().c_str());
    return 2;
  }
  std::vector<double> plain;
  std::vector<double> frugal;
  for (int r = 0; r < repeats; ++r) {
    plain.push_back(PlainLoop(*data, options));
    frugal.push_back(FrugalLoop(*data, options));
    std::fprintf(stderr, "run %d: plain %.1f samples/s, frugal %.1f samples/s\n", r + 1,
                 plain.back(), frugal.back());
  }
  const double plain_median = Median(plain);
  const double frugal_median = Median(frugal);
  const double overhead = plain_median / frugal_median - 1.0;
  std::printf("%-8s %6s %6s %8s %16s %16s %9s\n", "model", "steps", "batch", "threads",
              "plain samples/s", "frugal samples/s", "overhead");
  std::printf("%-8s %6lld %6lld %8d %16.1f %16.1f %8.2f%%\n", options.model.c_str(),
              static_cast<long long>(options.max_steps), static_cast<long long>(options.batch_size),
              options.threads, plain_median, frugal_median, 100.0 * overhead);
  nlohmann::json result = {{"bench", "train-baseline"},
                           {"model", options.model},
                           {"steps", options.max_steps},
                           {"batch_size", options.batch_size},
                           {"threads", options.threads},
                           {"repeats", repeats},
                           {"plain_samples_per_second", plain},
                           {"frugal_samples_per_second", frugal},
                           {"plain_median", plain_median},
                           {"frugal_median", frugal_median},
                           {"overhead", overhead}};
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
