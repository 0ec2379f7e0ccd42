// The BSP training loop.
//
// Set-up: the model is built from options.seed on every rank and BroadcastParameters makes rank
// 0's copy everyone's (so ranks agree even if their builds differed); torch's SGD (momentum,
// Nesterov, weight decay) is wrapped in a DistributedOptimizer whose bucket plan is verified
// across ranks, and BroadcastOptimizerState aligns the optimizer state.
//
// Each step: the ShardSampler's batch `step` of the epoch is gathered from the in-memory training
// tensors with index_select, the learning rate of the schedule for the global step is written
// into every parameter group, forward + cross-entropy + backward run, then
// DistributedOptimizer::Step averages the gradients over the ranks and steps SGD. The step's
// wall time minus the reducer's time is compute time. Global batch = batch_size x ranks, and the
// averaged gradient is the gradient of the mean loss over the global batch.
//
// With options.overlap the communication engine takes the transport after set-up
// (EngineSession): the step becomes EngineOptimizer's BeginStep / Backward / Step, whose gradient
// hooks submit each gradient as backward produces it, the pending updates are applied
// (Synchronize) before each evaluation, and the evaluation's collectives and the final parameter
// check run on the engine thread. Compute time is then the step's wall time minus the time the
// training thread was blocked on communication.
//
// Strategies that share epochs (Strategy::SharesEpochs: a parameter server's asynchronous models)
// end an epoch when the strategy says that the workers together took its steps; each worker takes
// as many steps as its pace allows meanwhile, going round its shard again if it is faster than the
// others, and the epoch's record counts the steps and samples of all.
//
// Each epoch ends with an evaluation: batch-norm buffers are broadcast from rank 0 (as DDP does
// before forward) so that every rank evaluates the same model, rank r evaluates block r of the
// BlockPartition of the 10k test images, and one SumAcrossRanks exchanges the loss and accuracy
// sums together with the epoch's training loss, time and byte counters. Every rank therefore
// returns the same EpochRecord. The run ends with ParametersConsistent over the final model.
#include "frugal_torch/trainer.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "evaluate.h"
#include "frugal/collectives.h"
#include "frugal/timer.h"
#include "frugal_torch/checkpoint.h"
#include "frugal_torch/distributed.h"
#include "frugal_torch/models.h"
#include "frugal_torch/step_driver.h"
#include "run_checkpoints.h"
#include "train_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::StatusOr;

using internal::ImagesTensor;
using internal::LabelsTensor;

// The loop's position for checkpoints: steps done, the running sums of the epoch under way, the
// training bytes sent so far and the last epoch's evaluation (last.done: the epochs evaluated).
// Shared epochs also keep the steps the summary counts over the epochs done (the sum of the
// epochs' mean steps per worker) and the steps of all workers together.
struct LoopPosition {
  int64_t step = 0;
  double loss_sum = 0;
  double samples = 0;
  uint64_t bytes = 0;
  internal::LastEvaluation last;
  int64_t epoch_steps = 0;
  int64_t worker_steps = 0;
  void VisitState(frugal::StateVisitor& v, bool shared_epochs) {
    v.I64("step", step);
    v.F64("loss_sum", loss_sum);
    v.F64("samples", samples);
    v.U64("bytes", bytes);
    last.VisitState(v);
    if (!shared_epochs) return;
    v.I64("epoch_steps", epoch_steps);
    v.I64("worker_steps", worker_steps);
  }
};

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(mid), values.end());
  return values[mid];
}

StatusOr<TrainSummary> TrainImpl(frugal::Transport& t, frugal::GradientReducer& reducer,
                                 frugal::Strategy& strategy, const FashionMnist& data,
                                 const TrainOptions& options, const TrainCallbacks& callbacks) {
  FRUGAL_RETURN_IF_ERROR(ValidateTrainOptions(options));
  FRUGAL_RETURN_IF_ERROR(ValidateCheckpointOptions(options.checkpoint));
  torch::set_num_threads(options.threads);
  const int rank = t.rank();
  const int world = t.size();
  const frugal::Duration timeout = options.timeout;
  if (data.train.count < world) {
    return frugal::InvalidArgumentError("more ranks than training samples");
  }
  for (const Straggler& s : options.stragglers) {
    if (s.rank >= world) {
      return frugal::InvalidArgumentError(
          fmt::format("--straggler {}:{}: there are only {} ranks", s.rank, s.factor, world));
    }
  }
  const frugal::StrategyTraits traits = strategy.traits();
  const bool shared_epochs = strategy.SharesEpochs();

  FRUGAL_ASSIGN_OR_RETURN(std::shared_ptr<Classifier> model,
                          MakeModel(options.model, options.seed));
  FRUGAL_RETURN_IF_ERROR(BroadcastParameters(t, *model, 0, timeout));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(options.lr)
                                                       .momentum(options.momentum)
                                                       .weight_decay(options.weight_decay)
                                                       .nesterov(options.nesterov));
  FRUGAL_RETURN_IF_ERROR(BroadcastOptimizerState(t, optimizer, 0, timeout));
  StepDriverOptions driver_options;
  driver_options.overlap = options.overlap;
  driver_options.bucket_cap_bytes = options.bucket_cap_bytes;
  driver_options.timeout = timeout;
  for (const Straggler& s : options.stragglers) {
    if (s.rank == rank) driver_options.straggler_factor = s.factor;
  }
  driver_options.nan_policy = options.nan_policy;
  for (const NanFault& f : options.nan_faults) {
    if (f.rank == rank) driver_options.inject_nan = f;
  }
  // From here on the transport belongs to the driver (its engine thread, when there is one):
  // the loop's collectives run through driver->Run.
  FRUGAL_ASSIGN_OR_RETURN(
      std::unique_ptr<StepDriver> driver,
      StepDriver::Start(t, reducer, strategy, *model, optimizer, driver_options));
  auto collective = [&](const char* name,
                        const std::function<Status(frugal::Transport&)>& fn) -> Status {
    return driver->Run(name, fn);
  };
  std::vector<double> step_seconds;

  const torch::Tensor train_images = ImagesTensor(data.train);
  const torch::Tensor train_labels = LabelsTensor(data.train);
  const int64_t test_count =
      options.test_samples > 0 ? std::min(options.test_samples, data.test.count) : data.test.count;
  const torch::Tensor test_images = ImagesTensor(data.test).slice(0, 0, test_count);
  const torch::Tensor test_labels = LabelsTensor(data.test).slice(0, 0, test_count);
  const int64_t replica_eval_count = options.replica_eval_samples > 0
                                         ? std::min(options.replica_eval_samples, test_count)
                                         : test_count;
  const ShardSampler sampler(data.train.labels, rank, world, options.batch_size, options.partition,
                             options.seed);
  const int64_t steps_per_epoch = sampler.steps_per_epoch();
  int64_t total_steps = options.epochs * steps_per_epoch;
  if (options.max_steps > 0) total_steps = std::min(total_steps, options.max_steps);
  const int64_t epochs_to_run = (total_steps + steps_per_epoch - 1) / steps_per_epoch;

  const LrSchedule schedule = internal::ScheduleOf(options, steps_per_epoch);

  TrainSummary summary;
  summary.model = options.model;
  summary.params = CountParameters(*model);
  summary.workers = world;
  summary.global_batch = options.batch_size * world;
  summary.reducer = frugal::ExchangeName(strategy, reducer);
  summary.strategy = strategy.name();
  summary.identical_replicas = traits.identical_replicas;
  summary.bytes_counted_by = reducer.bytes_counted_by() == "transport"
                                 ? "transport"
                                 : "transport+" + reducer.bytes_counted_by();
  const bool count_reducer_bytes = reducer.bytes_counted_by() != "transport";
  const uint64_t transport_bytes_start = t.bytes_sent();
  const uint64_t reducer_bytes_start = reducer.bytes_sent();
  // Bytes of evaluating drifting replicas (averaging them for the evaluation): not training.
  uint64_t eval_bytes = 0;
  // Everything of this rank a checkpoint holds (checkpoint.h), with the loop's position.
  internal::RunCheckpoints checkpoints(
      options.checkpoint, *driver, timeout,
      [&](uint64_t step, const std::function<Status(frugal::Transport&)>& save) {
        return strategy.RunCheckpoint(step, *driver, save);
      });
  auto visit_run = [&](frugal::StateVisitor& v, LoopPosition& position) {
    VisitModelState(*model, optimizer, v);
    VisitTorchRng(v);
    const std::pair<const char*, std::function<void()>> parts[] = {
        {"loop", [&] { position.VisitState(v, shared_epochs); }},
        {"driver", [&] { driver->VisitState(v); }},
        {"strategy", [&] { strategy.VisitState(v); }},
        {"reducer", [&] { reducer.VisitState(v); }}};
    for (const auto& [scope, visit] : parts) {
      frugal::StateVisitor::Scope s(v, scope);
      visit();
    }
  };
  LoopPosition resumed;
  if (checkpoints.resuming()) {
    FRUGAL_ASSIGN_OR_RETURN(
        const uint64_t at,
        checkpoints.Resume(rank, world + strategy.checkpoint_peers(),
                           [&](frugal::StateVisitor& v) { visit_run(v, resumed); }));
    summary.resumed_from_step = static_cast<int64_t>(at);
    summary.resumed_parameter_hash = ParameterHash(*model);
  }
  // Read on the thread that owns the transport (the engine thread when there is one); the
  // engine's negotiation messages are reported on their own.
  auto bytes_so_far = [&]() {
    uint64_t bytes = resumed.bytes + t.bytes_sent() - transport_bytes_start -
                     driver->negotiation_bytes() - eval_bytes;
    if (count_reducer_bytes) bytes += reducer.bytes_sent() - reducer_bytes_start;
    return bytes;
  };
  // A checkpoint holds no exchange in flight: pending updates are applied and the strategy
  // settles (a no-op unless it overlaps its exchanges with the next steps). It is named by `at`:
  // the step, or with shared epochs the nominal end of the epoch, the same on every worker.
  auto save = [&](LoopPosition position, int64_t at) -> Status {
    FRUGAL_RETURN_IF_ERROR(driver->Settle());
    FRUGAL_ASSIGN_OR_RETURN(
        const uint64_t exchanged,
        checkpoints.Save(static_cast<uint64_t>(at), [&](frugal::StateVisitor& v) {
          position.bytes = bytes_so_far();
          visit_run(v, position);
        }));
    eval_bytes += exchanged;
    if (callbacks.on_checkpoint) callbacks.on_checkpoint(at, ParameterHash(*model));
    return Status::Ok();
  };

  const frugal::Stopwatch wall;
  int64_t epoch_steps = resumed.epoch_steps;
  int64_t worker_steps = resumed.worker_steps;
  double compute_seconds = 0;
  double eval_seconds = 0;
  int64_t global_step = resumed.step;
  // A checkpoint after an epoch's evaluation resumes with the next epoch; one within an epoch
  // resumes that epoch at its step. After the epoch that reached --stop-at-accuracy nothing is
  // left.
  internal::LastEvaluation last = resumed.last;
  const int64_t first_epoch =
      last.ReachedTarget(options.stop_at_accuracy) ? epochs_to_run + 1 : last.done + 1;
  model->train();
  for (int64_t epoch = first_epoch; epoch <= epochs_to_run; ++epoch) {
    const std::vector<int64_t> order = sampler.EpochOrder(epoch - 1);
    // The nominal end of the epoch, in steps per worker since the start.
    const int64_t epoch_end = std::min(epoch * steps_per_epoch, total_steps);
    int64_t steps_this_epoch = epoch_end - (epoch - 1) * steps_per_epoch;
    const frugal::Stopwatch epoch_watch;
    const bool resumed_epoch = epoch == first_epoch && checkpoints.resuming();
    double loss_sum = resumed_epoch ? resumed.loss_sum : 0;
    double samples = resumed_epoch ? resumed.samples : 0;
    double lr = options.lr;
    // Shared epochs save at the end of epochs only, and each worker starts an epoch at 0.
    int64_t step =
        resumed_epoch && !shared_epochs ? global_step - (epoch - 1) * steps_per_epoch : 0;
    for (;; ++step) {
      if (shared_epochs ? strategy.EpochDone(static_cast<uint64_t>(epoch_end))
                        : step >= steps_this_epoch) {
        break;
      }
      if (callbacks.before_step) callbacks.before_step(global_step, epoch, step);
      const frugal::Stopwatch step_watch;
      const double comm_before = driver->blocked_seconds();
      std::vector<int64_t> batch =
          ShardSampler::BatchOf(order, step % steps_per_epoch, options.batch_size);
      const torch::Tensor index =
          torch::from_blob(batch.data(), {static_cast<int64_t>(batch.size())},
                           torch::TensorOptions().dtype(torch::kLong));
      const torch::Tensor x = train_images.index_select(0, index);
      const torch::Tensor y = train_labels.index_select(0, index);
      lr = LearningRate(schedule, global_step);
      for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
      frugal::StepPoint point;
      point.step = static_cast<uint64_t>(global_step);
      point.epoch = epoch - 1;
      point.step_in_epoch = step;
      point.steps_per_epoch = steps_per_epoch;
      FRUGAL_ASSIGN_OR_RETURN(torch::Tensor loss, driver->Step(point, [&] {
        return torch::nn::functional::cross_entropy(model->forward(x), y);
      }));
      if (const std::string* why = driver->skipped()) {
        ++summary.skipped_steps;
        if (callbacks.on_skipped_step) callbacks.on_skipped_step(*why);
      }
      loss_sum += loss.item<double>();
      samples += static_cast<double>(batch.size());
      ++global_step;
      step_seconds.push_back(step_watch.Seconds());
      compute_seconds += step_seconds.back() - (driver->blocked_seconds() - comm_before);
      if (callbacks.on_step) {
        StepProgress progress;
        progress.epoch = epoch;
        progress.epochs = epochs_to_run;
        progress.step = step + 1;
        progress.steps_in_epoch = std::max(steps_this_epoch, step + 1);
        progress.global_step = global_step;
        progress.loss = loss_sum / static_cast<double>(step + 1);
        progress.lr = lr;
        progress.epoch_seconds = epoch_watch.Seconds();
        progress.samples_per_second = samples * world / std::max(progress.epoch_seconds, 1e-9);
        callbacks.on_step(progress);
      }
      if (checkpoints.DueAfterStep(global_step, step + 1 == steps_this_epoch)) {
        FRUGAL_RETURN_IF_ERROR(save({global_step, loss_sum, samples, 0, last}, global_step));
      }
    }
    steps_this_epoch = step;
    const double epoch_seconds = epoch_watch.Seconds();

    const frugal::Stopwatch eval_watch;
    const double eval_watch_start_total = eval_seconds;
    FRUGAL_RETURN_IF_ERROR(driver->Settle());
    internal::EvalSums eval;
    internal::SpreadReport spread;
    if (traits.identical_replicas) {
      // Batch-norm buffers are not averaged by gradient averaging: rank 0's, as DDP does.
      FRUGAL_RETURN_IF_ERROR(collective("broadcast buffers", [&](frugal::Transport& tt) {
        const uint64_t before = tt.bytes_sent();
        Status status = BroadcastBuffers(tt, *model, 0, timeout);
        eval_bytes += tt.bytes_sent() - before;
        return status;
      }));
      eval = internal::Evaluate(*model, test_images, test_labels, rank, world,
                                options.eval_batch_size);
    } else {
      FRUGAL_ASSIGN_OR_RETURN(
          spread, internal::EvaluateAveragedModel(
                      *model, optimizer, test_images.slice(0, 0, replica_eval_count),
                      test_labels.slice(0, 0, replica_eval_count), options.eval_batch_size, *driver,
                      timeout, [&]() -> Status {
                        eval = internal::Evaluate(*model, test_images, test_labels, rank, world,
                                                  options.eval_batch_size);
                        return Status::Ok();
                      }));
      eval_bytes += spread.bytes_sent;
    }
    eval_seconds += eval_watch.Seconds();
    double local[] = {loss_sum,
                      eval.loss_sum,
                      eval.correct,
                      eval.count,
                      samples,
                      epoch_seconds,
                      0.0,  // bytes so far, read below on the transport's thread
                      compute_seconds,
                      driver->comm_seconds(),
                      eval_seconds,
                      Median(step_seconds),
                      driver->hidden_fraction(),
                      0.0,  // negotiation bytes, read below
                      static_cast<double>(spread.bytes_sent),
                      static_cast<double>(steps_this_epoch)};
    std::vector<double> sums;
    FRUGAL_RETURN_IF_ERROR(collective("metrics", [&](frugal::Transport& tt) -> Status {
      local[6] = static_cast<double>(bytes_so_far());
      local[12] = static_cast<double>(driver->negotiation_bytes());
      const uint64_t before = tt.bytes_sent();
      FRUGAL_ASSIGN_OR_RETURN(sums, SumAcrossRanks(tt, local, timeout));
      // The metric exchange is evaluation traffic too (and was before it was counted here).
      eval_bytes += tt.bytes_sent() - before;
      return Status::Ok();
    }));
    // The exchange itself counts as evaluation time (reported from the next epoch on).
    eval_seconds = eval_watch_start_total + eval_watch.Seconds();
    EpochRecord record;
    record.epoch = epoch;
    // Steps per worker (their mean when the epoch is shared), and the mean loss of all steps.
    record.steps = static_cast<int64_t>(std::llround(sums[14] / world));
    record.train_loss = sums[0] / std::max(sums[14], 1.0);
    record.test_loss = sums[1] / std::max(sums[3], 1.0);
    record.test_accuracy = sums[2] / std::max(sums[3], 1.0);
    record.lr = lr;
    record.epoch_seconds = sums[5] / world;
    record.wall_seconds = wall.Seconds();
    record.samples_per_second = sums[4] / std::max(record.epoch_seconds, 1e-9);
    record.bytes_sent = static_cast<uint64_t>(std::llround(sums[6] / world));
    if (!traits.identical_replicas) {
      record.rank_accuracy_min = spread.accuracy_min;
      record.rank_accuracy_max = spread.accuracy_max;
      record.rank_accuracy_samples = spread.accuracy_samples;
      record.consensus_distance = spread.consensus_distance;
      record.consensus_distance_max = spread.consensus_distance_max;
      record.eval_bytes_sent = static_cast<uint64_t>(std::llround(sums[13] / world));
    }
    strategy.Report([&](std::string_view name, double value) {
      record.strategy_report.emplace_back(std::string(name), value);
    });
    summary.history.push_back(record);
    summary.compute_seconds = sums[7] / world;
    summary.comm_seconds = sums[8] / world;
    summary.eval_seconds = sums[9] / world;
    summary.step_seconds_median = sums[10] / world;
    summary.comm_hidden_fraction = sums[11] / world;
    summary.negotiation_bytes_per_worker = static_cast<uint64_t>(std::llround(sums[12] / world));
    if (callbacks.on_epoch) callbacks.on_epoch(record);
    last = {epoch, record.train_loss, record.test_loss, record.test_accuracy, record.bytes_sent};
    epoch_steps += record.steps;
    worker_steps += static_cast<int64_t>(std::llround(sums[14]));
    if (checkpoints.DueAfterEpoch(global_step)) {
      FRUGAL_RETURN_IF_ERROR(save({global_step, 0, 0, 0, last, epoch_steps, worker_steps},
                                  shared_epochs ? epoch_end : global_step));
    }
    // Every rank holds the same record, so every rank leaves the loop after the same epoch.
    if (options.stop_at_accuracy > 0 && record.test_accuracy >= options.stop_at_accuracy) break;
  }

  FRUGAL_RETURN_IF_ERROR(collective("parameter check", [&](frugal::Transport& tt) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(summary.params_consistent, ParametersConsistent(tt, *model, timeout));
    return Status::Ok();
  }));
  if (driver->uses_engine()) {
    FRUGAL_ASSIGN_OR_RETURN(summary.timeline_json, driver->Finish());
    summary.overlap = std::string(frugal::OverlapModeName(options.overlap->mode));
  }
  summary.parameter_hash = ParameterHash(*model);
  strategy.Report([&](std::string_view name, double value) {
    summary.strategy_report.emplace_back(std::string(name), value);
  });
  if (callbacks.on_final_parameters) {
    callbacks.on_final_parameters(internal::FlatParameters(*model));
  }
  summary.wall_seconds = wall.Seconds();
  summary.epochs = static_cast<int64_t>(summary.history.size());
  // Shared epochs: the mean steps per worker, and the steps of all workers.
  summary.steps = shared_epochs ? epoch_steps : global_step;
  if (shared_epochs) summary.worker_steps = worker_steps;
  summary.checkpoints = checkpoints.saves();
  summary.checkpoint_seconds = checkpoints.seconds();
  summary.checkpoint_bytes = checkpoints.bytes();
  last.ReportIn(summary);
  if (!summary.history.empty()) {
    double samples = 0;
    double seconds = 0;
    for (const EpochRecord& r : summary.history) {
      samples += r.samples_per_second * r.epoch_seconds;
      seconds += r.epoch_seconds;
    }
    summary.samples_per_second = samples / std::max(seconds, 1e-9);
  }
  return summary;
}

}  // namespace

Status ValidateTrainOptions(const TrainOptions& options) {
  const std::vector<std::string> models = ModelNames();
  if (std::find(models.begin(), models.end(), options.model) == models.end()) {
    std::string known;
    for (const std::string& n : models) known += (known.empty() ? "" : ", ") + n;
    return frugal::InvalidArgumentError("unknown model '" + options.model + "' (known: " + known +
                                        ")");
  }
  auto bad = [](const std::string& what) { return frugal::InvalidArgumentError(what); };
  if (options.epochs < 1) return bad("--epochs must be >= 1");
  if (options.batch_size < 1) return bad("--batch-size must be >= 1");
  if (!(options.lr > 0) || !std::isfinite(options.lr)) return bad("--lr must be > 0");
  if (!(options.momentum >= 0 && options.momentum < 1)) return bad("--momentum must be in [0, 1)");
  if (!(options.weight_decay >= 0)) return bad("--weight-decay must be >= 0");
  if (options.nesterov && options.momentum <= 0) return bad("--nesterov needs --momentum > 0");
  if (!(options.warmup_epochs >= 0)) return bad("--warmup-epochs must be >= 0");
  if (!(options.lr_gamma > 0)) return bad("--lr-gamma must be > 0");
  for (double m : options.lr_milestones) {
    if (!(m >= 0)) return bad("--lr-milestones must be >= 0");
  }
  if (options.threads < 1) return bad("--threads must be >= 1");
  if (options.max_steps < 0) return bad("--max-steps must be >= 0");
  if (!(options.stop_at_accuracy >= 0 && options.stop_at_accuracy <= 1)) {
    return bad("--stop-at-accuracy must be in [0, 1]");
  }
  if (options.bucket_cap_bytes < sizeof(float)) return bad("--bucket-cap-mb must be > 0");
  if (options.timeout.count() <= 0) return bad("--timeout must be > 0");
  if (options.eval_batch_size < 1) return bad("eval batch size must be >= 1");
  if (options.test_samples < 0) return bad("test samples must be >= 0");
  if (options.replica_eval_samples < 0) return bad("replica evaluation samples must be >= 0");
  return Status::Ok();
}

std::function<double(int64_t)> LearningRateOf(const TrainOptions& options,
                                              int64_t steps_per_epoch) {
  return [schedule = internal::ScheduleOf(options, steps_per_epoch)](int64_t step) {
    return LearningRate(schedule, step);
  };
}

StatusOr<TrainSummary> Train(frugal::Transport& t, frugal::GradientReducer& reducer,
                             frugal::Strategy& strategy, const FashionMnist& data,
                             const TrainOptions& options, const TrainCallbacks& callbacks) {
  try {
    return TrainImpl(t, reducer, strategy, data, options, callbacks);
  } catch (const c10::Error& e) {
    return frugal::InternalError(std::string("torch: ") + e.what_without_backtrace());
  }
}

StatusOr<TrainSummary> Train(frugal::Transport& t, frugal::GradientReducer& reducer,
                             const FashionMnist& data, const TrainOptions& options,
                             const TrainCallbacks& callbacks) {
  FRUGAL_ASSIGN_OR_RETURN(frugal::StrategyPlan plan, frugal::PlanStrategy({}));
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<frugal::Strategy> bsp,
                          frugal::MakeStrategy(plan, t, reducer));
  return Train(t, reducer, *bsp, data, options, callbacks);
}

}  // namespace frugal_torch
