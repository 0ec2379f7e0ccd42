// `frugal train --sync fedavg:...` (see train_fedavg.h).
//
// JSON lines (--json): first {"event":"partition"} (the partition, its seed and the draw kept,
// the samples per client and per client and class: with the seed they reproduce the shards),
// then one {"event":"round"} per round (its "epoch" is the round, so that tools reading epoch
// records read rounds), then the usual {"event":"summary"} with the FedAvg fields added.
#include "train_fedavg.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "frugal/fedavg.h"
#include "frugal_torch/checkpoint.h"
#include "frugal_torch/data.h"
#include "frugal_torch/dataset.h"
#include "train_faults.h"
#include "train_report.h"

namespace frugal::apps {

nlohmann::json PartitionJson(const frugal_torch::ClientPartition& partition,
                             const std::vector<uint8_t>& labels) {
  return {{"event", "partition"},
          {"partition", frugal_torch::PartitionName(partition.spec)},
          {"seed", partition.seed},
          {"clients", partition.clients()},
          {"min_samples", partition.min_samples},
          {"attempts", partition.attempts},
          {"counts", partition.Counts()},
          {"class_counts", partition.ClassCounts(labels)}};
}

nlohmann::json RoundJson(const frugal_torch::RoundRecord& r) {
  return {{"event", "round"},
          {"round", r.round},
          {"epoch", r.round},
          {"clients", r.clients},
          {"steps", r.steps},
          {"samples", r.samples},
          {"bytes_up", r.bytes_up},
          {"bytes_down", r.bytes_down},
          {"train_loss", r.train_loss},
          {"test_loss", r.test_loss},
          {"test_accuracy", r.test_accuracy},
          {"lr", r.lr},
          {"round_seconds", r.round_seconds},
          {"wall_seconds", r.wall_seconds},
          {"bytes_sent", r.bytes_sent}};
}

namespace {

std::string RoundTableHeader() {
  return fmt::format("{:>5}  {:>7}  {:>10}  {:>9}  {:>8}  {:>10}  {:>10}  {:>8}  {:>12}\n", "round",
                     "clients", "train_loss", "test_loss", "test_acc", "up", "down", "time",
                     "sent/worker");
}

std::string RoundTableRow(const frugal_torch::RoundRecord& r) {
  return fmt::format(
      "{:>5}  {:>7}  {:>10.4f}  {:>9.4f}  {:>8.4f}  {:>10}  {:>10}  {:>8}  {:>12}\n", r.round,
      r.clients.size(), r.train_loss, r.test_loss, r.test_accuracy,
      FormatBytes(static_cast<double>(r.bytes_up)), FormatBytes(static_cast<double>(r.bytes_down)),
      fmt::format("{:.1f}s", r.round_seconds), FormatBytes(static_cast<double>(r.bytes_sent)));
}

}  // namespace

Status ValidateFedAvgFlags(const TrainFlags& flags) {
  FRUGAL_ASSIGN_OR_RETURN(StrategyOptions strategy, ToStrategyOptions(flags));
  FRUGAL_ASSIGN_OR_RETURN(StrategyPlan plan, PlanStrategy(strategy));
  if (plan.sync.kind != SyncKind::kFedAvg) return Status::Ok();
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::TrainOptions options, ToTrainOptions(flags, plan));
  FRUGAL_RETURN_IF_ERROR(frugal_torch::ValidateFedAvgOptions(options));
  FRUGAL_ASSIGN_OR_RETURN(std::vector<uint8_t> labels,
                          frugal_torch::LoadTrainLabels(DatasetName(flags), DataDir(flags)));
  return frugal_torch::PartitionClients(labels, plan.sync.clients, options.partition, options.seed,
                                        frugal_torch::MinClientSamples(plan.sync, options))
      .status();
}

Status RunFedAvgTrain(RankContext& context, const TrainFlags& flags, const StrategyPlan& plan) {
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::TrainOptions options, ToTrainOptions(flags, plan));
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::FashionMnist data,
                          frugal_torch::LoadDataset(DatasetName(flags), DataDir(flags)));
  const RoleAssignment roles = AssignRoles(plan.arch, context.world.size(), context.world.rank());
  FRUGAL_ASSIGN_OR_RETURN(RoleGroup group, JoinRoleGroup(context.world, roles, plan.timeout));
  // Over a parameter server the servers hold the global model and average the uploads.
  if (roles.mine == Role::kServer) {
    // The servers' files of the run's checkpoints (the global model, its version and the
    // workers' clocks), in the set of the workers' files.
    const ServerCheckpointHooks checkpoints = frugal_torch::ServerCheckpointHooksOf(
        options.checkpoint, context.world.rank(), context.world.size(), plan.timeout);
    return RunServerRole(context.world, plan, ServerOptimizer{}, context.logger, &checkpoints);
  }
  Transport& workers = *group.transport;
  const bool over_servers = plan.arch.kind == ArchKind::kParameterServer;
  std::unique_ptr<GradientReducer> reducer;
  std::unique_ptr<FederatedAveraging> fedavg;
  if (over_servers) {
    FRUGAL_ASSIGN_OR_RETURN(fedavg, FederatedAveraging::CreateOverServers(
                                        plan, context.world, workers, DefaultCompressorRegistry()));
  } else {
    FRUGAL_ASSIGN_OR_RETURN(reducer,
                            MakeStrategyReducer(plan, workers, 0, DefaultCompressorRegistry()));
    FRUGAL_ASSIGN_OR_RETURN(fedavg,
                            FederatedAveraging::Create(plan, *reducer, DefaultCompressorRegistry(),
                                                       workers.rank(), workers.size()));
  }
  const bool root = context.is_root();
  JsonLines json;
  // A resumed run continues the records of the run it resumes.
  if (root) FRUGAL_RETURN_IF_ERROR(json.Open(flags.json, /*append=*/!flags.resume.empty()));
  Status json_status;
  frugal_torch::FedAvgCallbacks callbacks;
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<FaultSpec> fault_specs, ParseFaultSpecs(flags.injects));
  const RestartNotes notes = RestartNotes::FromEnvironment(context.world.rank());
  RankFaults faults(fault_specs, context.world.rank(), notes);
  callbacks.before_round = faults.RoundHook();
  const SyncSpec& spec = plan.sync;
  if (root) {
    std::printf(
        "frugal train: %s, FedAvg: %lld clients, %lld per round, on %d worker%s, batch %lld, "
        "lr %g, momentum %g, %s, uploads %s\n",
        options.model.c_str(), static_cast<long long>(spec.clients),
        static_cast<long long>(ClientsPerRound(spec.clients, spec.fraction)), workers.size(),
        workers.size() > 1 ? "s" : "", static_cast<long long>(options.batch_size), options.lr,
        options.momentum, frugal_torch::PartitionName(options.partition).c_str(),
        fedavg->compressor() != nullptr ? fedavg->compressor()->spec().c_str() : "dense");
    std::fflush(stdout);
    callbacks.on_partition = [&](const frugal_torch::ClientPartition& p) {
      json_status = json.Write(PartitionJson(p, data.train.labels));
      std::fputs(RoundTableHeader().c_str(), stdout);
    };
    callbacks.on_round = [&](const frugal_torch::RoundRecord& r) {
      std::fputs(RoundTableRow(r).c_str(), stdout);
      std::fflush(stdout);
      if (json_status.ok()) json_status = json.Write(RoundJson(r));
    };
  }
  FRUGAL_ASSIGN_OR_RETURN(
      frugal_torch::FedAvgSummary result,
      over_servers
          ? frugal_torch::TrainFedAvg(workers, *fedavg, data, options, callbacks)
          : frugal_torch::TrainFedAvg(workers, *reducer, *fedavg, data, options, callbacks));
  if (!root) return Status::Ok();
  const frugal_torch::TrainSummary& summary = result.train;
  std::fputs(SummaryTable(summary).c_str(), stdout);
  std::printf("  %-22s %s up, %s down (all clients, whole run)\n", "client traffic",
              FormatBytes(static_cast<double>(result.bytes_up)).c_str(),
              FormatBytes(static_cast<double>(result.bytes_down)).c_str());
  std::fflush(stdout);
  FRUGAL_RETURN_IF_ERROR(json_status);
  nlohmann::json j = SummaryJson(summary, flags);
  j["arch"] = ArchSpecName(plan.arch);
  j["sync"] = SyncSpecName(plan.sync);
  j["compressor"] = fedavg->compressor() != nullptr ? nlohmann::json(fedavg->compressor()->spec())
                                                    : nlohmann::json(nullptr);
  j["clients"] = spec.clients;
  j["fraction"] = spec.fraction;
  j["clients_per_round"] = ClientsPerRound(spec.clients, spec.fraction);
  j["local_epochs"] =
      spec.local_steps > 0 ? nlohmann::json(nullptr) : nlohmann::json(spec.local_epochs);
  j["local_steps"] =
      spec.local_steps > 0 ? nlohmann::json(spec.local_steps) : nlohmann::json(nullptr);
  j["rounds"] = result.rounds.size();
  j["bytes_up"] = result.bytes_up;
  j["bytes_down"] = result.bytes_down;
  nlohmann::json up = nlohmann::json::array();
  nlohmann::json down = nlohmann::json::array();
  for (const frugal_torch::RoundRecord& r : result.rounds) {
    up.push_back(r.bytes_up);
    down.push_back(r.bytes_down);
  }
  j["round_bytes_up"] = up;
  j["round_bytes_down"] = down;
  FRUGAL_RETURN_IF_ERROR(json.Write(j));
  if (!summary.params_consistent) return InternalError("the ranks ended with different parameters");
  return Status::Ok();
}

}  // namespace frugal::apps
