// `frugal train`: data-parallel training of a Fashion-MNIST classifier (frugal_torch) with a
// training strategy (frugal/strategy.h: --arch, --sync, --compress, --overlap). The flags become
// the strategy factory's options and the loop's options (train_flags.cc); the factory's plan
// makes the reducer and the strategy; every rank then runs frugal_torch::Train, and rank 0 shows
// the progress on stderr, prints the epoch table and the summary on stdout and writes the JSON
// lines and the Chrome trace (train_report.cc). FedAvg runs in rounds of client training
// (train_fedavg.cc).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "commands.h"
#include "emulate_spec.h"
#include "frugal/compressed_reducer.h"
#include "frugal/engine_phases.h"
#include "frugal/strategy.h"
#include "frugal_torch/checkpoint.h"
#include "frugal_torch/data.h"
#include "frugal_torch/dataset.h"
#include "frugal_torch/trainer.h"
#include "launcher.h"
#include "train_faults.h"
#include "train_fedavg.h"
#include "train_flags.h"
#include "train_report.h"

namespace frugal::apps {
namespace {

// The ranks of the job: under mpirun its size, otherwise --np (or a single process).
int WorldSizeToLaunch(const CLI::App& cmd) {
  if (RunningUnderMpi()) {
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    return size != nullptr ? std::atoi(size) : 1;
  }
  const CLI::Option* np = cmd.get_parent()->get_option_no_throw("--np");
  return np != nullptr && np->count() > 0 ? np->as<int>() : 1;
}

Status RunTrain(RankContext& context, const TrainFlags& flags) {
  FRUGAL_ASSIGN_OR_RETURN(StrategyOptions strategy_options, ToStrategyOptions(flags));
  FRUGAL_ASSIGN_OR_RETURN(StrategyPlan plan, PlanStrategy(strategy_options));
  if (plan.sync.kind == SyncKind::kFedAvg) return RunFedAvgTrain(context, flags, plan);
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::TrainOptions options, ToTrainOptions(flags, plan));
  // With --timeline, the compressors report encode and decode to the engine's timeline.
  PhaseRecorder phases;
  if (options.overlap) {
    options.overlap->engine.logger = context.logger;
    if (!flags.timeline.empty()) options.overlap->engine.phases = &phases;
  }
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::FashionMnist data,
                          frugal_torch::LoadDataset(DatasetName(flags), DataDir(flags)));
  // --inject: this rank's faults; drop and corrupt act on what its transport sends.
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<FaultSpec> fault_specs, ParseFaultSpecs(flags.injects));
  const RestartNotes notes = RestartNotes::FromEnvironment(context.world.rank());
  RankFaults faults(fault_specs, context.world.rank(), notes);
  Transport& world = faults.Wrap(context.world);
  const RoleAssignment roles = AssignRoles(plan.arch, world.size(), world.rank());
  FRUGAL_ASSIGN_OR_RETURN(RoleGroup group, JoinRoleGroup(world, roles, plan.timeout));
  if (roles.mine == Role::kServer) {
    // A parameter server: the optimizer and its schedule run here, by server step.
    ServerOptimizer optimizer;
    optimizer.lr = frugal_torch::LearningRateOf(
        options, frugal_torch::ShardSampler::StepsPerEpoch(data.train.count, roles.workers,
                                                           options.batch_size));
    optimizer.momentum = options.momentum;
    optimizer.weight_decay = options.weight_decay;
    optimizer.nesterov = options.nesterov;
    // The server's files of the run's checkpoints, over the whole job with the workers' files.
    const ServerCheckpointHooks checkpoints = frugal_torch::ServerCheckpointHooksOf(
        options.checkpoint, world.rank(), world.size(), plan.timeout);
    return RunServerRole(world, plan, optimizer, context.logger, &checkpoints);
  }
  Transport& workers = *group.transport;
  FRUGAL_ASSIGN_OR_RETURN(
      std::unique_ptr<GradientReducer> reducer,
      MakeStrategyReducer(plan, workers,
                          frugal_torch::ShardSampler::StepsPerEpoch(
                              data.train.count, workers.size(), options.batch_size),
                          flags.timeline.empty()
                              ? DefaultCompressorRegistry()
                              : WithPhaseTiming(DefaultCompressorRegistry(), phases)));
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> strategy,
                          MakeStrategy(plan, workers, *reducer, &world));
  const bool root = context.is_root();
  JsonLines json;
  // A resumed run continues the records of the run it resumes.
  if (root) FRUGAL_RETURN_IF_ERROR(json.Open(flags.json, /*append=*/!flags.resume.empty()));

  const bool spread = !strategy->traits().identical_replicas;
  Progress progress(root ? ProgressMode(flags.progress) : Progress::Mode::kNone);
  Status json_status;
  frugal_torch::TrainCallbacks callbacks;
  callbacks.before_step = faults.StepHook();
  if (root) {
    std::printf("frugal train: %s, %d worker%s x batch %lld, %s, %s, lr %g, momentum %g\n",
                options.model.c_str(), workers.size(), workers.size() > 1 ? "s" : "",
                static_cast<long long>(options.batch_size), strategy->name().c_str(),
                ExchangeName(*strategy, *reducer).c_str(), options.lr, options.momentum);
    if (!plan.implied.empty()) {
      std::string implied;
      for (const std::string& flag : plan.implied) implied += " " + flag;
      std::printf(
          "frugal train: --compress %s runs with%s (give these flags to choose "
          "yourself)\n",
          flags.compress.c_str(), implied.c_str());
    }
    std::fflush(stdout);
    callbacks.on_step = [&progress](const frugal_torch::StepProgress& p) { progress.Step(p); };
    callbacks.on_skipped_step = [](const std::string& why) {
      std::fprintf(stderr, "frugal: %s (--nan-policy skip)\n", why.c_str());
    };
    bool header_printed = false;
    callbacks.on_epoch = [&, header_printed](const frugal_torch::EpochRecord& r) mutable {
      if (!header_printed) std::fputs(EpochTableHeader(spread).c_str(), stdout);
      header_printed = true;
      std::fputs(EpochTableRow(r, spread).c_str(), stdout);
      std::fflush(stdout);
      if (json_status.ok()) json_status = json.Write(EpochJson(r));
    };
    callbacks.on_checkpoint = [&](int64_t step, uint64_t params_hash) {
      if (json_status.ok()) json_status = json.Write(CheckpointJson(step, params_hash));
    };
  }
  FRUGAL_ASSIGN_OR_RETURN(
      frugal_torch::TrainSummary summary,
      frugal_torch::Train(workers, *reducer, *strategy, data, options, callbacks));
  if (!root) return Status::Ok();
  std::fputs(SummaryTable(summary).c_str(), stdout);
  if (const auto* compressed = dynamic_cast<const CompressedReducer*>(reducer.get())) {
    std::printf("  %-22s %.1fx fewer bytes than a dense ring all-reduce (%s)\n", "compression",
                compressed->compression_ratio(), compressed->compressor().spec().c_str());
  }
  std::fflush(stdout);
  FRUGAL_RETURN_IF_ERROR(json_status);
  nlohmann::json summary_json = SummaryJson(summary, flags);
  summary_json["arch"] = ArchSpecName(plan.arch);
  summary_json["sync"] = SyncSpecName(plan.sync);
  AddCompressionSummary(summary_json, summary, flags, plan, *reducer);
  FRUGAL_RETURN_IF_ERROR(json.Write(summary_json));
  if (!flags.timeline.empty()) {
    std::ofstream trace(flags.timeline, std::ios::trunc);
    trace << summary.timeline_json;
    if (!trace) return IoError(fmt::format("cannot write {}", flags.timeline));
  }
  if (summary.identical_replicas && !summary.params_consistent && !flags.skip_comm) {
    return InternalError("the ranks ended with different parameters");
  }
  return Status::Ok();
}

// The strategy's rules for a job of `world_size` ranks (seen from `rank`), and the ranks --inject
// names.
Status CheckTrainWorld(const TrainFlags& flags, int world_size, int rank, bool shares_memory) {
  if (world_size < 1) return Status::Ok();  // --np's own check reports it
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<FaultSpec> faults, ParseFaultSpecs(flags.injects));
  FRUGAL_RETURN_IF_ERROR(CheckFaultRanks(faults, world_size));
  FRUGAL_ASSIGN_OR_RETURN(StrategyOptions options, ToStrategyOptions(flags));
  FRUGAL_ASSIGN_OR_RETURN(StrategyPlan plan, PlanStrategy(options));
  FRUGAL_RETURN_IF_ERROR(CheckWorldSize(plan, world_size));
  if (plan.arch.algorithm == AllreduceAlgorithmName(AllreduceAlgorithm::kDirect) &&
      !shares_memory) {
    return InvalidArgumentError(fmt::format("--arch allreduce:direct {}", kDirectNeedsOneMachine));
  }
  options.workers = AssignRoles(plan.arch, world_size, rank).workers;
  return PlanStrategy(options).status();
}

}  // namespace

void AddTrainCommand(CLI::App& app, Dispatcher& dispatcher) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a Fashion-MNIST classifier or the fortunes character model data-parallel (BSP "
      "gradient averaging, Local SGD, FedAvg, ...)");
  AddTrainFlags(*cmd, *flags);
  cmd->callback([flags, cmd, &dispatcher] {
    if (!flags->config.empty()) ApplyConfigFile(*cmd, flags->config);
    ApplyPlannedLearningRate(*cmd, *flags);
    if (!RunningUnderMpi()) {
      // Tell rank 0 (whose stderr will be a pipe to mpirun) whether progress can be redrawn.
      setenv(kStderrIsTtyEnv, isatty(STDERR_FILENO) ? "1" : "0", 1);
    }
    Action action;
    action.name = "train";
    action.validate = [flags, cmd]() -> Status {
      FRUGAL_RETURN_IF_ERROR(ValidateTrainFlags(*flags));
      FRUGAL_ASSIGN_OR_RETURN(const std::vector<FaultSpec> faults, ParseFaultSpecs(flags->injects));
      FRUGAL_RETURN_IF_ERROR(CheckNanTensors(faults, flags->model));
      // With --np the number of workers is known before launch: the rules that depend on it (a
      // gossip graph over them) are checked now.
      const CLI::Option* np = cmd->get_parent()->get_option_no_throw("--np");
      if (np != nullptr && np->count() > 0) {
        // Ranks on several emulated hosts cannot share memory; on real hosts it is known only
        // once the ranks run (check_world).
        const CLI::Option* emulate = cmd->get_parent()->get_option_no_throw("--emulate");
        bool shares_memory = true;
        if (emulate != nullptr && emulate->count() > 0) {
          const StatusOr<EmulateSpec> spec = ParseEmulateSpec(emulate->as<std::string>());
          shares_memory = !spec.ok() || spec->hosts <= 1;
        }
        FRUGAL_RETURN_IF_ERROR(CheckTrainWorld(*flags, np->as<int>(), 0, shares_memory));
      }
      FRUGAL_RETURN_IF_ERROR(CheckDataset(*flags));
      return ValidateFedAvgFlags(*flags);
    };
    // --resume: the checkpoint is read where rank 0 writes (and before anything is launched).
    action.check_files = [flags, cmd]() -> Status {
      return CheckResume(*flags, WorldSizeToLaunch(*cmd), /*rank=*/-1);
    };
    // Rules that depend on the number of workers (a gossip graph over them, the ranks --inject
    // names): every rank reaches the same verdict.
    action.check_world = [flags](const Transport& world) -> Status {
      return CheckTrainWorld(*flags, world.size(), world.rank(), world.SharesMemoryWithPeers());
    };
    action.run = [flags](RankContext& context) {
      Status status = RunTrain(context, *flags);
      if (!status.ok()) {
        // For the launcher's restarts (restarts.h): the line this rank prints.
        RestartNotes::FromEnvironment(context.world.rank())
            .Failure(fmt::format("rank {}: train: {}", context.world.rank(), status.ToString()));
      }
      return status;
    };
    if (!flags->checkpoint_dir.empty()) {
      action.restart = RestartPoint{flags->checkpoint_dir, flags->json};
    }
    // Under --emulate a parameter server's servers each get a host of their own, so that the
    // server's NIC is a bottleneck of its own (the flags are valid: `validate` ran first).
    action.own_hosts = [flags]() -> int {
      const StatusOr<ArchSpec> arch = ParseArchSpec(flags->arch);
      return arch.ok() && arch->kind == ArchKind::kParameterServer ? arch->servers : 0;
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
