// Data-parallel training of a Fashion-MNIST classifier with BSP gradient averaging: the loop
// behind `frugal train`. Torch-free interface, so that the command-line layer stays light.
//
// Train() runs on every rank with that rank's transport and gradient reducer. It builds the model
// from the seed, broadcasts the parameters from rank 0, wraps SGD in a DistributedOptimizer,
// trains `epochs` epochs (or stops after max_steps steps in total) on this rank's shard, and after
// every epoch evaluates the full test set (each rank a slice, the sums exchanged) and exchanges
// the metrics, so every rank returns the same records. Global batch = batch_size x ranks.
//
// Callbacks run on the calling thread of every rank (install them on rank 0 only for output).
// Every collective is bounded by options.timeout; on any error Train returns it (kTimeout names
// the peers that did not answer) and the caller should end the job.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal/transport.h"
#include "frugal_torch/checkpoint_options.h"
#include "frugal_torch/data.h"
#include "frugal_torch/engine_options.h"
#include "frugal_torch/nan_policy.h"
#include "frugal_torch/schedule.h"

namespace frugal_torch {

// Names accepted by MakeModel: mlp, cnn, resnet20, vgg.
std::vector<std::string> ModelNames();

// A rank made slow on purpose: its forward + backward take `factor` times as long.
struct Straggler {
  int rank = 0;
  double factor = 1;
};

struct TrainOptions {
  std::string model = "cnn";
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per rank
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0;
  bool nesterov = false;
  LrScheduleKind schedule = LrScheduleKind::kConstant;
  double warmup_epochs = 0;
  std::vector<double> lr_milestones;  // epochs (kStep)
  double lr_gamma = 0.1;
  PartitionSpec partition;
  uint64_t seed = 1;
  int threads = 1;        // torch intra-op threads of this rank
  int64_t max_steps = 0;  // > 0: stop after this many steps in total, then evaluate
  // > 0: stop after the first epoch whose test accuracy reaches this (time-to-accuracy runs).
  double stop_at_accuracy = 0;
  size_t bucket_cap_bytes = frugal::kDefaultBucketCapBytes;
  frugal::Duration timeout = std::chrono::seconds(20);
  int64_t eval_batch_size = 1000;
  // Evaluate on the first test_samples test images only (0: the full 10k test set). For tests.
  int64_t test_samples = 0;
  // Drifting replicas (Local SGD, gossip, asp/ssp over servers): each rank evaluates its own model
  // on the first replica_eval_samples images of the evaluated test set for rank_accuracy_min/max
  // (0: all of them). The averaged model is evaluated on all of them either way.
  int64_t replica_eval_samples = 0;
  // Communication engine (frugal_torch/engine_optimizer.h): when set, the gradients go through
  // frugal's engine thread (overlap with backward, fusion, priority, one-step delay), which owns
  // the transport during training; unset, the blocking DistributedOptimizer reduces them.
  std::optional<OverlapOptions> overlap;
  // Slow ranks (--straggler): each sleeps (factor - 1) x its last forward + backward time
  // between forward and backward, so that its gradients appear that much later.
  std::vector<Straggler> stragglers;
  // Checkpoints and resuming (checkpoint_options.h): a resumed run continues to the same epochs /
  // max_steps target and ends as the run that was never interrupted.
  CheckpointOptions checkpoint;
  // Non-finite gradients (nan_policy.h), and NaNs put into gradients on purpose (each on its rank).
  NanPolicy nan_policy = NanPolicy::kAbort;
  std::vector<NanFault> nan_faults;
};

// kInvalidArgument naming the first bad option (unknown model, lr <= 0, ...).
frugal::Status ValidateTrainOptions(const TrainOptions& options);

// The learning rate of each 0-based step under `options`' schedule with `steps_per_epoch` steps
// in an epoch: what the loop sets, for parameter servers that run the optimizer.
std::function<double(int64_t)> LearningRateOf(const TrainOptions& options, int64_t steps_per_epoch);

struct StepProgress {
  int64_t epoch = 0;           // 1-based
  int64_t epochs = 0;          // epochs that will run
  int64_t step = 0;            // 1-based within the epoch
  int64_t steps_in_epoch = 0;  // steps this epoch will run
  int64_t global_step = 0;     // 1-based over the run
  double loss = 0;             // this rank's mean training loss so far in the epoch
  double lr = 0;
  double samples_per_second = 0;  // all ranks, over the epoch so far
  double epoch_seconds = 0;
};

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  int64_t steps = 0;  // steps run in this epoch
  double train_loss = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  double lr = 0;                  // rate of the epoch's last step
  double epoch_seconds = 0;       // training part of the epoch, without evaluation
  double wall_seconds = 0;        // since training started, evaluation included
  double samples_per_second = 0;  // all ranks, training part of the epoch
  uint64_t bytes_sent = 0;        // per worker (mean over ranks), cumulative, training only
  // Strategies whose replicas differ (Local SGD): test_loss and test_accuracy are those of the
  // averaged model; these are the min and max test accuracy of the ranks' own models, the
  // consensus distance mean_i ||x_i - x_avg|| of the parameters and its max over the ranks, and
  // the bytes per worker of averaging the models for evaluation (not in bytes_sent). Zero for
  // identical replicas.
  double rank_accuracy_min = 0;
  double rank_accuracy_max = 0;
  int64_t rank_accuracy_samples = 0;  // the test images each rank's own model was evaluated on
  double consensus_distance = 0;
  double consensus_distance_max = 0;
  uint64_t eval_bytes_sent = 0;
  // The strategy's numbers after the epoch (Strategy::Report; a parameter server's counts so far).
  std::vector<std::pair<std::string, double>> strategy_report;
};

struct TrainSummary {
  std::string model;
  int64_t params = 0;
  int workers = 1;
  int64_t epochs = 0;  // epochs run (the last one may be partial with max_steps)
  int64_t steps = 0;
  int64_t global_batch = 0;
  std::string reducer;
  std::string strategy = "bsp";    // Strategy::name()
  bool identical_replicas = true;  // the strategy keeps replicas identical
  double train_loss = 0;           // of the last epoch
  double test_loss = 0;
  double test_accuracy = 0;
  uint64_t bytes_sent_per_worker = 0;  // mean over ranks, whole run
  std::string bytes_counted_by;        // "transport" or "transport+model:ring"
  double wall_seconds = 0;             // training and evaluation, after set-up
  double compute_seconds = 0;          // mean over ranks: forward, backward, optimizer, data
  double comm_seconds = 0;             // mean over ranks: gradient reduction
  double eval_seconds = 0;             // mean over ranks: evaluation and metric exchange
  double samples_per_second = 0;       // all ranks, training parts only
  bool params_consistent = false;
  uint32_t parameter_hash = 0;  // this rank's
  // Communication engine: the overlap mode ("off" without the engine), the median wall time of a
  // training step (mean over ranks of each rank's median), the share of the engine's
  // communication time that ran while the training thread computed (mean over ranks), and the
  // Chrome trace of every rank when TrainOptions::overlap->timeline was set.
  std::string overlap = "off";
  // Bytes of the engine's negotiation messages (mean over ranks); not in bytes_sent_per_worker.
  uint64_t negotiation_bytes_per_worker = 0;
  double step_seconds_median = 0;
  double comm_hidden_fraction = 0;
  std::string timeline_json;
  std::vector<EpochRecord> history;  // of the epochs this run finished (after a resume: from it)
  // Checkpoints: the step this run resumed at (-1: it started afresh; with shared epochs the
  // checkpoint's step, the nominal end of its epoch), the hash of this rank's parameters as the
  // checkpoint restored them (before the first step), the checkpoints it saved, this rank's
  // seconds saving them (flushing to disk included) and the size of its last file.
  int64_t resumed_from_step = -1;
  uint32_t resumed_parameter_hash = 0;
  int64_t checkpoints = 0;
  double checkpoint_seconds = 0;
  uint64_t checkpoint_bytes = 0;
  // Shared epochs (Strategy::SharesEpochs): the steps of all workers together over the run
  // (-1 otherwise).
  int64_t worker_steps = -1;
  // Steps whose update this rank skipped (--nan-policy skip).
  int64_t skipped_steps = 0;
  // Strategy::Report of this rank's strategy (gossip: the spectral gap, ...), in its order.
  std::vector<std::pair<std::string, double>> strategy_report;
};

struct TrainCallbacks {
  // As step `step` (0-based over the run), step `step_in_epoch` (0-based) of epoch `epoch` (from
  // 1), begins, before anything of it is computed.
  std::function<void(int64_t step, int64_t epoch, int64_t step_in_epoch)> before_step;
  std::function<void(const StepProgress&)> on_step;
  // A step's update was skipped (--nan-policy skip): why, naming the step, the rank and the tensor.
  std::function<void(const std::string&)> on_skipped_step;
  std::function<void(const EpochRecord&)> on_epoch;
  // After a checkpoint is committed: its name (the step, or with shared epochs the nominal end of
  // the epoch) and the hash of this rank's parameters it holds (ParameterHash).
  std::function<void(int64_t step, uint64_t params_hash)> on_checkpoint;
  // After the last epoch: every parameter of the final model, flattened in registration order.
  std::function<void(const std::vector<float>&)> on_final_parameters;
};

// Trains with `strategy` (frugal/strategy.h), whose exchanges and the gradient averaging go
// through `reducer`. Both must have been made for `t`.
frugal::StatusOr<TrainSummary> Train(frugal::Transport& t, frugal::GradientReducer& reducer,
                                     frugal::Strategy& strategy, const FashionMnist& data,
                                     const TrainOptions& options,
                                     const TrainCallbacks& callbacks = {});
// BSP: the gradients of every step averaged through `reducer`.
frugal::StatusOr<TrainSummary> Train(frugal::Transport& t, frugal::GradientReducer& reducer,
                                     const FashionMnist& data, const TrainOptions& options,
                                     const TrainCallbacks& callbacks = {});

}  // namespace frugal_torch
