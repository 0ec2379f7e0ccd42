// `frugal train --sync fedavg:...`: the FedAvg round loop (frugal_torch/fedavg_trainer.h) behind
// the command line, and what it shows and writes: a partition record, one "round" record per
// round, then the summary.
#pragma once

#include <nlohmann/json.hpp>

#include "commands.h"
#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal_torch/fedavg_trainer.h"
#include "train_flags.h"

namespace frugal::apps {

// With --sync fedavg: the checks that need the dataset's labels (the partition over the clients
// must give every client its minimum), before anything is launched. OK for other syncs.
Status ValidateFedAvgFlags(const TrainFlags& flags);

// Every rank: trains with FedAvg as `plan` says; rank 0 prints and writes the records.
Status RunFedAvgTrain(RankContext& context, const TrainFlags& flags, const StrategyPlan& plan);

nlohmann::json PartitionJson(const frugal_torch::ClientPartition& partition,
                             const std::vector<uint8_t>& labels);
nlohmann::json RoundJson(const frugal_torch::RoundRecord& r);

}  // namespace frugal::apps
