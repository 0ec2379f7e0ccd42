// The FedAvg round loop (see fedavg_trainer.h).
//
// A round on one worker:
//   lr = the schedule's rate at step `round` (rounds count as epochs);
//   sampled = fedavg.Sample(round); own = those with ClientRank(c, n) == rank;
//   fedavg.BeginRound(round, global model);
//   for each own client c:
//     the model := the global model (fedavg.LoadGlobal), a fresh SGD optimizer;
//     spe = ceil(|shard_c| / b) steps per local epoch; S = local-steps, or local-epochs x spe;
//     local step s = 0..S-1 takes batch s mod spe of ClientEpochOrder(shard_c, seed, c,
//       round x ceil(S / spe) + s / spe);
//     bytes_up += fedavg.AddUpload(c, |shard_c|, model); bytes_down += the model's size;
//   fedavg.EndRound(model): the one all-reduce (or the pushes to and pull from the parameter
//     servers), then the new global model on every worker;
//   evaluation of the global model (block `rank` of the test set) and one SumAcrossRanks of the
//   round's metrics (evaluation traffic, not in bytes_sent).
// Integer buffers (batch-norm's num_batches_tracked) are not averaged: every client's turn and
// every round start from their values at the start of the run, so the replicas stay identical.
#include "frugal_torch/fedavg_trainer.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "evaluate.h"
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

// The non-float buffers of a module and their values at construction.
class IntegerBuffers {
 public:
  explicit IntegerBuffers(torch::nn::Module& module) {
    for (const auto& item : module.named_buffers(/*recurse=*/true)) {
      if (item.value().scalar_type() == torch::kFloat) continue;
      buffers_.push_back(item.value());
      initial_.push_back(item.value().clone());
    }
  }
  void Restore() {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(initial_[i]);
  }

 private:
  std::vector<torch::Tensor> buffers_;
  std::vector<torch::Tensor> initial_;
};

// The loop's collectives run on the thread that owns the transport: the training thread, or over
// a parameter server the client's thread once it is connected (FederatedAveraging::Run).
class RoundRunner final : public frugal::TransportRunner {
 public:
  RoundRunner(frugal::FederatedAveraging& fedavg, frugal::Transport& t) : fedavg_(fedavg), t_(t) {}
  Status Run(std::string_view what, const std::function<Status(frugal::Transport&)>& fn) override {
    return fedavg_.Run(what, fn, t_);
  }

 private:
  frugal::FederatedAveraging& fedavg_;
  frugal::Transport& t_;
};

// The round loop's position for checkpoints: rounds done, the run's running totals and the last
// round's evaluation.
struct RoundPosition {
  int64_t rounds = 0;
  int64_t steps = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  double samples = 0;
  internal::LastEvaluation last;
  void VisitState(frugal::StateVisitor& v) {
    v.I64("rounds", rounds);
    v.I64("steps", steps);
    v.U64("bytes_up", bytes_up);
    v.U64("bytes_down", bytes_down);
    v.F64("samples", samples);
    last.VisitState(v);
  }
};

struct ClientResult {
  int64_t steps = 0;
  int64_t samples = 0;
  double loss_sum = 0;
};

struct LocalTraining {
  Classifier& model;
  const torch::Tensor& images;
  const torch::Tensor& labels;
  const TrainOptions& options;
  const frugal::SyncSpec& spec;
  double straggler_factor = 1;
};

// Client `client` trains from the model as loaded, with a fresh optimizer at rate `lr`.
ClientResult TrainClient(const LocalTraining& run, const std::vector<int64_t>& shard,
                         int64_t client, int64_t round, double lr, torch::optim::SGD& optimizer) {
  const int64_t b = run.options.batch_size;
  const int64_t size = static_cast<int64_t>(shard.size());
  const int64_t steps_per_epoch = (size + b - 1) / b;
  const int64_t steps =
      run.spec.local_steps > 0 ? run.spec.local_steps : run.spec.local_epochs * steps_per_epoch;
  const int64_t epochs_per_round = (steps + steps_per_epoch - 1) / steps_per_epoch;
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
  ClientResult result;
  std::vector<int64_t> order;
  for (int64_t s = 0; s < steps; ++s) {
    if (s % steps_per_epoch == 0) {
      order = ClientEpochOrder(shard, run.options.seed, client,
                               round * epochs_per_round + s / steps_per_epoch);
    }
    std::vector<int64_t> batch = ShardSampler::BatchOf(order, s % steps_per_epoch, b);
    const torch::Tensor index = torch::from_blob(batch.data(), {static_cast<int64_t>(batch.size())},
                                                 torch::TensorOptions().dtype(torch::kLong));
    const frugal::Stopwatch compute;
    optimizer.zero_grad();
    const torch::Tensor loss = torch::nn::functional::cross_entropy(
        run.model.forward(run.images.index_select(0, index)), run.labels.index_select(0, index));
    loss.backward();
    if (run.straggler_factor > 1) {
      std::this_thread::sleep_for(
          std::chrono::duration<double>((run.straggler_factor - 1) * compute.Seconds()));
    }
    optimizer.step();
    result.loss_sum += loss.item<double>();
    result.samples += static_cast<int64_t>(batch.size());
    ++result.steps;
  }
  return result;
}

StatusOr<FedAvgSummary> TrainFedAvgImpl(frugal::Transport& t, frugal::GradientReducer* reducer,
                                        frugal::FederatedAveraging& fedavg,
                                        const FashionMnist& data, const TrainOptions& options,
                                        const FedAvgCallbacks& callbacks) {
  FRUGAL_RETURN_IF_ERROR(ValidateTrainOptions(options));
  FRUGAL_RETURN_IF_ERROR(ValidateFedAvgOptions(options));
  FRUGAL_RETURN_IF_ERROR(ValidateCheckpointOptions(options.checkpoint));
  torch::set_num_threads(options.threads);
  const int rank = t.rank();
  const int world = t.size();
  const frugal::SyncSpec& spec = fedavg.spec();
  double straggler_factor = 1;
  for (const Straggler& s : options.stragglers) {
    if (s.rank >= world) {
      return frugal::InvalidArgumentError(
          fmt::format("--straggler {}:{}: there are only {} ranks", s.rank, s.factor, world));
    }
    if (s.rank == rank) straggler_factor = s.factor;
  }

  FedAvgSummary result;
  FRUGAL_ASSIGN_OR_RETURN(result.partition,
                          PartitionClients(data.train.labels, spec.clients, options.partition,
                                           options.seed, MinClientSamples(spec, options)));
  if (callbacks.on_partition) callbacks.on_partition(result.partition);
  FRUGAL_ASSIGN_OR_RETURN(std::shared_ptr<Classifier> model,
                          MakeModel(options.model, options.seed));
  FRUGAL_RETURN_IF_ERROR(BroadcastParameters(t, *model, 0, options.timeout));
  IntegerBuffers integer_buffers(*model);
  // An optimizer without state, to view the model as ModelBuffers (no momenta).
  torch::optim::SGD stateless(model->parameters(), torch::optim::SGDOptions(options.lr));
  auto optimizer_options = [&](double lr) {
    return torch::optim::SGDOptions(lr)
        .momentum(options.momentum)
        .weight_decay(options.weight_decay)
        .nesterov(options.nesterov);
  };

  const torch::Tensor train_images = internal::ImagesTensor(data.train);
  const torch::Tensor train_labels = internal::LabelsTensor(data.train);
  const int64_t test_count =
      options.test_samples > 0 ? std::min(options.test_samples, data.test.count) : data.test.count;
  const torch::Tensor test_images = internal::ImagesTensor(data.test).slice(0, 0, test_count);
  const torch::Tensor test_labels = internal::LabelsTensor(data.test).slice(0, 0, test_count);
  const LrSchedule schedule = internal::ScheduleOf(options, /*steps_per_epoch=*/1);
  const LocalTraining local{*model, train_images, train_labels, options, spec, straggler_factor};

  TrainSummary& summary = result.train;
  summary.model = options.model;
  summary.params = CountParameters(*model);
  summary.workers = world;
  summary.global_batch = options.batch_size;
  if (reducer == nullptr) {
    if (!fedavg.over_servers()) {
      return frugal::InvalidArgumentError("FedAvg needs a reducer or a parameter server");
    }
    summary.reducer = "ps";
    summary.bytes_counted_by = "transport";
  } else {
    summary.reducer = reducer->name();
    summary.bytes_counted_by = reducer->bytes_counted_by() == "transport"
                                   ? "transport"
                                   : "transport+" + reducer->bytes_counted_by();
  }
  summary.strategy = fedavg.name();
  summary.identical_replicas = true;

  // Checkpoints (checkpoint.h) between rounds: the global model, the clients' compressor state
  // and the round loop's position; over a parameter server the servers write their files into
  // the same set (FederatedAveraging::RunCheckpoint).
  RoundRunner runner(fedavg, t);
  internal::RunCheckpoints checkpoints(
      options.checkpoint, runner, options.timeout,
      [&](uint64_t round, const std::function<Status(frugal::Transport&)>& save) {
        return fedavg.RunCheckpoint(round, save, t);
      });
  auto visit_run = [&](frugal::StateVisitor& v, RoundPosition& position) {
    VisitModelState(*model, stateless, v);
    VisitTorchRng(v);
    {
      frugal::StateVisitor::Scope scope(v, "loop");
      position.VisitState(v);
    }
    frugal::StateVisitor::Scope scope(v, "strategy");
    fedavg.VisitState(v);
  };
  RoundPosition resumed;
  if (checkpoints.resuming()) {
    FRUGAL_RETURN_IF_ERROR(checkpoints
                               .Resume(rank, world + fedavg.checkpoint_peers(),
                                       [&](frugal::StateVisitor& v) { visit_run(v, resumed); })
                               .status());
    summary.resumed_parameter_hash = ParameterHash(*model);
  }
  summary.steps = resumed.steps;
  result.bytes_up = resumed.bytes_up;
  result.bytes_down = resumed.bytes_down;

  const frugal::Stopwatch wall;
  double compute_seconds = 0;
  double comm_seconds = 0;
  double eval_seconds = 0;
  double samples_total = resumed.samples;
  double train_seconds_total = 0;
  // After the round that reached --stop-at-accuracy nothing is left.
  internal::LastEvaluation last = resumed.last;
  const int64_t first_round =
      last.ReachedTarget(options.stop_at_accuracy) ? options.epochs : resumed.rounds;
  for (int64_t round = first_round; round < options.epochs; ++round) {
    if (callbacks.before_round) callbacks.before_round(round);
    const double lr = LearningRate(schedule, round);
    const std::vector<int64_t> sampled = fedavg.Sample(round);
    const frugal::Stopwatch round_watch;
    fedavg.BeginRound(round, ModelBuffersOf(*model, stateless));
    ClientResult mine;
    uint64_t bytes_up = 0;
    uint64_t bytes_down = 0;
    for (int64_t client : fedavg.OwnClients(sampled)) {
      frugal::ModelBuffers buffers = ModelBuffersOf(*model, stateless);
      fedavg.LoadGlobal(buffers);
      integer_buffers.Restore();
      torch::optim::SGD optimizer(model->parameters(), optimizer_options(lr));
      const std::vector<int64_t>& shard = result.partition.shards[static_cast<size_t>(client)];
      const ClientResult r = TrainClient(local, shard, client, round, lr, optimizer);
      mine.steps += r.steps;
      mine.samples += r.samples;
      mine.loss_sum += r.loss_sum;
      FRUGAL_ASSIGN_OR_RETURN(const uint64_t up,
                              fedavg.AddUpload(client, static_cast<double>(shard.size()),
                                               ModelBuffersOf(*model, stateless)));
      bytes_up += up;
      bytes_down += fedavg.download_bytes();
    }
    compute_seconds += round_watch.Seconds();
    const frugal::Stopwatch comm_watch;
    frugal::ModelBuffers global = ModelBuffersOf(*model, stateless);
    FRUGAL_RETURN_IF_ERROR(fedavg.EndRound(global));
    integer_buffers.Restore();
    comm_seconds += comm_watch.Seconds();
    const double round_seconds = round_watch.Seconds();

    const frugal::Stopwatch eval_watch;
    const internal::EvalSums eval =
        internal::Evaluate(*model, test_images, test_labels, rank, world, options.eval_batch_size);
    eval_seconds += eval_watch.Seconds();
    const double local_metrics[] = {mine.loss_sum,
                                    static_cast<double>(mine.steps),
                                    static_cast<double>(mine.samples),
                                    static_cast<double>(bytes_up),
                                    static_cast<double>(bytes_down),
                                    eval.loss_sum,
                                    eval.correct,
                                    eval.count,
                                    static_cast<double>(fedavg.bytes_sent()),
                                    round_seconds,
                                    compute_seconds,
                                    comm_seconds,
                                    eval_seconds};
    std::vector<double> sums;
    FRUGAL_RETURN_IF_ERROR(runner.Run("round metrics", [&](frugal::Transport& w) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(sums, SumAcrossRanks(w, local_metrics, options.timeout));
      return Status::Ok();
    }));
    RoundRecord record;
    record.round = round + 1;
    record.clients = sampled;
    record.steps = std::llround(sums[1]);
    record.samples = std::llround(sums[2]);
    record.train_loss = sums[0] / std::max(sums[1], 1.0);
    record.bytes_up = static_cast<uint64_t>(std::llround(sums[3]));
    record.bytes_down = static_cast<uint64_t>(std::llround(sums[4]));
    record.test_loss = sums[5] / std::max(sums[7], 1.0);
    record.test_accuracy = sums[6] / std::max(sums[7], 1.0);
    record.bytes_sent = static_cast<uint64_t>(std::llround(sums[8] / world));
    record.round_seconds = sums[9] / world;
    record.lr = lr;
    record.wall_seconds = wall.Seconds();
    summary.compute_seconds = sums[10] / world;
    summary.comm_seconds = sums[11] / world;
    summary.eval_seconds = sums[12] / world;
    samples_total += static_cast<double>(record.samples);
    train_seconds_total += record.round_seconds;
    result.bytes_up += record.bytes_up;
    result.bytes_down += record.bytes_down;
    summary.steps += record.steps;
    result.rounds.push_back(record);
    if (callbacks.on_round) callbacks.on_round(record);
    last = {round + 1, record.train_loss, record.test_loss, record.test_accuracy,
            record.bytes_sent};
    if (checkpoints.DueAfterEpoch(round + 1)) {
      RoundPosition position{round + 1,         summary.steps, result.bytes_up,
                             result.bytes_down, samples_total, last};
      FRUGAL_RETURN_IF_ERROR(checkpoints
                                 .Save(static_cast<uint64_t>(position.rounds),
                                       [&](frugal::StateVisitor& v) { visit_run(v, position); })
                                 .status());
    }
    // Every worker holds the same record, so every worker leaves after the same round.
    if (options.stop_at_accuracy > 0 && record.test_accuracy >= options.stop_at_accuracy) break;
  }

  FRUGAL_RETURN_IF_ERROR(runner.Run("parameters consistent", [&](frugal::Transport& w) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(summary.params_consistent,
                            ParametersConsistent(w, *model, options.timeout));
    return Status::Ok();
  }));
  FRUGAL_RETURN_IF_ERROR(fedavg.Finish());
  summary.parameter_hash = ParameterHash(*model);
  if (callbacks.on_final_parameters) {
    callbacks.on_final_parameters(internal::FlatParameters(*model));
  }
  summary.wall_seconds = wall.Seconds();
  summary.epochs = static_cast<int64_t>(result.rounds.size());
  summary.resumed_from_step = checkpoints.resuming() ? resumed.rounds : -1;
  summary.checkpoints = checkpoints.saves();
  summary.checkpoint_seconds = checkpoints.seconds();
  summary.checkpoint_bytes = checkpoints.bytes();
  summary.samples_per_second = samples_total / std::max(train_seconds_total, 1e-9);
  last.ReportIn(summary);
  return result;
}

StatusOr<FedAvgSummary> TrainFedAvgGuarded(frugal::Transport& t, frugal::GradientReducer* reducer,
                                           frugal::FederatedAveraging& fedavg,
                                           const FashionMnist& data, const TrainOptions& options,
                                           const FedAvgCallbacks& callbacks) {
  try {
    return TrainFedAvgImpl(t, reducer, fedavg, data, options, callbacks);
  } catch (const c10::Error& e) {
    return frugal::InternalError(std::string("torch: ") + e.what_without_backtrace());
  }
}

}  // namespace

Status ValidateFedAvgOptions(const TrainOptions& options) {
  if (options.max_steps > 0) {
    return frugal::InvalidArgumentError(
        "--max-steps does not apply to --sync fedavg (limit each client's turn with "
        "local-steps=S; --epochs gives the rounds)");
  }
  return Status::Ok();
}

int64_t MinClientSamples(const frugal::SyncSpec& spec, const TrainOptions& options) {
  return spec.min_samples > 0 ? spec.min_samples : options.batch_size;
}

StatusOr<FedAvgSummary> TrainFedAvg(frugal::Transport& t, frugal::GradientReducer& reducer,
                                    frugal::FederatedAveraging& fedavg, const FashionMnist& data,
                                    const TrainOptions& options, const FedAvgCallbacks& callbacks) {
  return TrainFedAvgGuarded(t, &reducer, fedavg, data, options, callbacks);
}

StatusOr<FedAvgSummary> TrainFedAvg(frugal::Transport& t, frugal::FederatedAveraging& fedavg,
                                    const FashionMnist& data, const TrainOptions& options,
                                    const FedAvgCallbacks& callbacks) {
  return TrainFedAvgGuarded(t, nullptr, fedavg, data, options, callbacks);
}

}  // namespace frugal_torch
