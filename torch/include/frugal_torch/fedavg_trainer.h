// FedAvg training of a Fashion-MNIST classifier: the round loop behind `frugal train --sync
// fedavg:...`. Torch-free interface, like trainer.h.
//
// TrainFedAvg runs on every worker with the worker's transport, the exact reducer of the plan
// (MakeStrategyReducer) and a FederatedAveraging (frugal/fedavg.h) made for it. It builds the
// model from the seed and broadcasts rank 0's copy, partitions the training set over the clients
// (PartitionClients, min_samples = the spec's min-samples or one batch), and runs options.epochs
// rounds. In round r every worker plays, in turn, the sampled clients it owns: it loads the global
// model, makes a fresh SGD optimizer (options' lr for the round, momentum, weight decay,
// Nesterov: no optimizer state survives a client's turn), trains local-epochs epochs of the
// client's shard (ClientEpochOrder, batches of options.batch_size, the last one shorter), or
// exactly local-steps steps when the spec gives them (cycling through local epochs), and uploads
// the result with weight = the client's sample count. EndRound makes the new global model on
// every worker; then the global model is evaluated (identical on every worker: rank r evaluates
// block r of the test set) and the round's metrics are exchanged, so every worker returns the
// same records.
// Over a parameter server (FederatedAveraging::CreateOverServers) there is no reducer: `t` is the
// workers' group, the servers (RunServerRole with the same plan) hold the global model, and the
// summary's reducer is the architecture ("ps:servers=S"). Checkpoints then span the whole job:
// the servers write their files into the workers' set (RunServerRole with
// ServerCheckpointHooksOf the same options.checkpoint, checkpoint.h).
//
// The learning-rate schedule counts rounds as epochs (warm-up and milestones in rounds; one rate
// per round). options.max_steps does not apply (kInvalidArgument: use local-steps); options.overlap
// is not used (nothing is exchanged during a round). A straggler sleeps (factor - 1) times each
// local step's forward + backward time.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "frugal/fedavg.h"
#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/transport.h"
#include "frugal_torch/client_partition.h"
#include "frugal_torch/data.h"
#include "frugal_torch/trainer.h"

namespace frugal_torch {

struct RoundRecord {
  int64_t round = 0;             // 1-based
  std::vector<int64_t> clients;  // sampled, ascending
  int64_t steps = 0;             // local steps of all clients
  int64_t samples = 0;           // samples the clients processed
  uint64_t bytes_up = 0;         // the clients' uploads (encoded payload sizes)
  uint64_t bytes_down = 0;       // the global model sent to each sampled client
  double train_loss = 0;         // mean over the round's local steps
  double test_loss = 0;
  double test_accuracy = 0;
  double lr = 0;
  double round_seconds = 0;  // training part, slowest worker
  double wall_seconds = 0;   // since training started, evaluation included
  uint64_t bytes_sent = 0;   // per worker (mean), cumulative: the aggregates' all-reduces
};

struct FedAvgSummary {
  TrainSummary train;  // epochs = rounds, steps = local steps of all clients, history empty
  std::vector<RoundRecord> rounds;
  ClientPartition partition;
  uint64_t bytes_up = 0;  // whole run
  uint64_t bytes_down = 0;
};

struct FedAvgCallbacks {
  // As round `round` (0-based) begins.
  std::function<void(int64_t round)> before_round;
  std::function<void(const ClientPartition&)> on_partition;
  std::function<void(const RoundRecord&)> on_round;
  std::function<void(const std::vector<float>&)> on_final_parameters;
};

// The options TrainFedAvg refuses (kInvalidArgument, one line), besides ValidateTrainOptions'.
frugal::Status ValidateFedAvgOptions(const TrainOptions& options);

// The clients' minimum of samples: the spec's min-samples, or one batch.
int64_t MinClientSamples(const frugal::SyncSpec& spec, const TrainOptions& options);

frugal::StatusOr<FedAvgSummary> TrainFedAvg(frugal::Transport& t, frugal::GradientReducer& reducer,
                                            frugal::FederatedAveraging& fedavg,
                                            const FashionMnist& data, const TrainOptions& options,
                                            const FedAvgCallbacks& callbacks = {});
// Over a parameter server (fedavg.over_servers()).
frugal::StatusOr<FedAvgSummary> TrainFedAvg(frugal::Transport& t,
                                            frugal::FederatedAveraging& fedavg,
                                            const FashionMnist& data, const TrainOptions& options,
                                            const FedAvgCallbacks& callbacks = {});

}  // namespace frugal_torch
