// `frugal train`'s flags and how they become options: TrainFlags holds every flag as given,
// AddTrainFlags declares them, ApplyConfigFile reads --config, and ToStrategyOptions /
// ToTrainOptions turn them into the strategy factory's options (frugal/strategy.h, which owns
// every rule about which options combine) and the training loop's (frugal_torch/trainer.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal_torch/data.h"
#include "frugal_torch/trainer.h"

namespace frugal::apps {

struct TrainFlags {
  std::string model = "cnn";
  int64_t epochs = 1;
  int64_t batch_size = 64;
  double lr = 0.05;
  bool lr_given = true;  // false: --lr was not given (train: set from the command line)
  double momentum = 0.9;
  double weight_decay = 0;
  bool nesterov = false;
  std::string lr_schedule = "constant";
  double warmup_epochs = 0;
  std::vector<double> lr_milestones;
  double lr_gamma = 0.1;
  std::string partition = "iid";
  uint64_t seed = 1;
  std::string arch = "allreduce:ring";
  std::string allreduce;  // alias of --arch allreduce:ALGO
  std::string sync = "bsp";
  std::string staleness_policy = "none";
  std::vector<std::string> stragglers;  // RANK:FACTOR
  int threads = 1;
  int64_t max_steps = 0;
  double stop_at_accuracy = 0;
  int64_t test_samples = 0;
  int64_t replica_eval_samples = 0;
  double bucket_cap_mb = 25;
  int timeout_ms = 20000;
  std::string dataset;   // empty: the model's (frugal_torch/dataset.h)
  std::string data_dir;  // empty: the dataset's Debian directory
  std::string json;
  std::string progress = "auto";
  std::string config;
  // Communication engine (frugal/engine.h, frugal_torch/engine_optimizer.h).
  std::string overlap = "priority";
  std::string fusion = "mgwfbp";
  bool od_sgd = false;
  bool skip_comm = false;
  double cycle_time_ms = 1;
  double fusion_threshold_mb = 64;
  double partition_mb = 4;
  double stall_warning_s = -1;  // < 0: half of --timeout-ms
  double stall_shutdown_s = 0;
  int engine_nice = 0;
  std::string timeline;
  // Gradient compression (frugal/compressed_reducer.h).
  std::string compress;
  bool ef = false;
  bool worker_momentum = false;
  size_t compress_min_bytes = 65536;
  std::string aggregate = "auto";
  std::string compress_pull;  // --arch ps: the servers' answers
  // Checkpoints (frugal_torch/checkpoint_options.h).
  std::string checkpoint_dir;
  std::string checkpoint_every;  // N (steps) or "epoch"; empty: "epoch" with a directory
  int keep = 2;
  std::string resume;
  // Faults on demand (inject_spec.h).
  std::vector<std::string> injects;
  std::string nan_policy = "abort";
};

void AddTrainFlags(CLI::App& cmd, TrainFlags& flags);

// Applies the `key = value` items of a TOML file to the options of `cmd` that the command line
// did not set. Throws CLI::ConfigError (a bad command line: exit 2) for an unreadable file, an
// unknown key or a bad value.
void ApplyConfigFile(CLI::App& cmd, const std::string& path);

// Records whether --lr was given (on the command line or in --config) and, when it was not and
// the strategy plan sets a learning rate of its own (the sign votes), takes that one. A plan that
// fails is left for the validation to report.
void ApplyPlannedLearningRate(const CLI::App& cmd, TrainFlags& flags);

// The strategy factory's options from the flags (--arch and its alias --allreduce, --sync,
// compression, optimizer, overlap); kInvalidArgument for a bad flag.
StatusOr<StrategyOptions> ToStrategyOptions(const TrainFlags& flags);

// The training loop's options, with the optimizer as the strategy's plan says (DGC and worker
// momentum take its momentum over); kInvalidArgument naming the first bad flag.
StatusOr<frugal_torch::TrainOptions> ToTrainOptions(const TrainFlags& flags,
                                                    const StrategyPlan& plan);

// Both of the above with every check: what `frugal train` validates before it launches anything.
Status ValidateTrainFlags(const TrainFlags& flags);

// The data set of the flags (--dataset, or the model's) and its directory (--data-dir, or the
// package's).
std::string DatasetName(const TrainFlags& flags);
std::string DataDir(const TrainFlags& flags);

// What must be equal for a run to resume another's checkpoint: every flag that changes the
// numbers a run computes (model, strategy, compressor, optimizer, schedule, batch, seed, overlap,
// buckets, threads), normalised (--arch and --sync as the factory names them).
CheckpointIdentity CheckpointIdentityOf(const TrainFlags& flags, const StrategyPlan& plan);

// --resume DIR before a run of `world_size` ranks starts: the checkpoint exists, fits this run
// and its files are intact; with rank >= 0 only that rank's file is read (every rank checks its
// own), otherwise every rank's. kInvalidArgument ("--resume DIR: ...", one line naming the file
// and the field) for any refusal.
Status CheckResume(const TrainFlags& flags, int world_size, int rank);

// The dataset must be installed: kNotFound naming the package otherwise.
Status CheckDataset(const TrainFlags& flags);

}  // namespace frugal::apps
