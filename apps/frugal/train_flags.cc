// `frugal train`'s flags (see train_flags.h).
#include "train_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "commands.h"
#include "frugal/checkpoint.h"
#include "frugal/compressor.h"
#include "frugal/engine.h"
#include "frugal/strategy.h"
#include "frugal_torch/data.h"
#include "frugal_torch/dataset.h"
#include "frugal_torch/schedule.h"
#include "frugal_torch/text_corpus.h"
#include "frugal_torch/trainer.h"
#include "toml_file.h"
#include "train_faults.h"

namespace frugal::apps {
namespace {

Status ToOverlapOptions(const TrainFlags& flags, frugal_torch::TrainOptions& options) {
  frugal_torch::OverlapOptions overlap;
  FRUGAL_ASSIGN_OR_RETURN(overlap.mode, ParseOverlapMode(flags.overlap));
  FRUGAL_ASSIGN_OR_RETURN(overlap.fusion, ParseFusionPolicy(flags.fusion));
  if (overlap.fusion == FusionPolicy::kOff) {
    return InvalidArgumentError("--fusion must be mgwfbp or cycle (no fusion: --overlap wfbp)");
  }
  overlap.od_sgd = flags.od_sgd;
  overlap.skip_comm = flags.skip_comm;
  auto positive = [](double v, double max) { return v > 0 && v <= max; };
  if (!(flags.cycle_time_ms >= 0 && flags.cycle_time_ms <= 1000)) {
    return InvalidArgumentError("--cycle-time-ms must be in [0, 1000]");
  }
  if (!positive(flags.fusion_threshold_mb, 1e6)) {
    return InvalidArgumentError("--fusion-threshold-mb must be in (0, 1e6]");
  }
  if (!(flags.partition_mb >= 0 && flags.partition_mb <= 1e6)) {
    return InvalidArgumentError("--partition-mb must be in [0, 1e6]");
  }
  const bool stall_warning_given = !(flags.stall_warning_s < 0);
  if ((stall_warning_given && !(flags.stall_warning_s >= 0)) || !(flags.stall_shutdown_s >= 0)) {
    return InvalidArgumentError("--stall-warning-s and --stall-shutdown-s must be >= 0");
  }
  if (flags.stall_warning_s > 0 && flags.stall_warning_s * 1000 >= flags.timeout_ms) {
    return InvalidArgumentError(fmt::format(
        "--stall-warning-s {} must be shorter than --timeout-ms {} (the wait ends the job at the "
        "timeout, so a later warning would never be printed)",
        flags.stall_warning_s, flags.timeout_ms));
  }
  if (flags.stall_shutdown_s > 0 && flags.stall_shutdown_s * 1000 >= flags.timeout_ms) {
    return InvalidArgumentError(fmt::format(
        "--stall-shutdown-s {} must be shorter than --timeout-ms {} (the wait ends the job first)",
        flags.stall_shutdown_s, flags.timeout_ms));
  }
  overlap.engine.cycle_time = Duration(std::llround(flags.cycle_time_ms));
  overlap.engine.fusion_threshold_bytes =
      static_cast<size_t>(std::llround(flags.fusion_threshold_mb * (1 << 20)));
  overlap.engine.partition_bytes =
      static_cast<size_t>(std::llround(flags.partition_mb * (1 << 20)));
  if (stall_warning_given) {
    overlap.engine.stall_warning = Duration(std::llround(flags.stall_warning_s * 1000));
  }  // otherwise the engine's default: half the timeout
  overlap.engine.stall_shutdown = Duration(std::llround(flags.stall_shutdown_s * 1000));
  if (flags.engine_nice < -20 || flags.engine_nice > 19) {
    return InvalidArgumentError("--engine-nice must be in [-20, 19]");
  }
  overlap.engine.thread_nice = flags.engine_nice;
  overlap.timeline = !flags.timeline.empty();
  if (overlap.timeline) {
    Status path = CheckJsonPath(flags.timeline);
    if (!path.ok()) return InvalidArgumentError("--timeline: " + path.message());
  }
  options.overlap = overlap;
  return Status::Ok();
}

// DGC (Lin et al. 2018) moves the optimizer's momentum into the compressor (momentum correction:
// the optimizer then applies plain SGD, or the momentum would be applied twice and training
// diverges) and counts its sparsity warm-up in epochs. So a dgc spec without momentum= takes
// --momentum, one without epoch_steps= takes this run's steps per epoch (0: not known yet), and
// unless the spec turns the correction off (momentum=0) the optimizer runs without momentum.
// --straggler RANK:FACTOR items.
StatusOr<std::vector<frugal_torch::Straggler>> ParseStragglers(
    const std::vector<std::string>& items) {
  std::vector<frugal_torch::Straggler> out;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    frugal_torch::Straggler s;
    char* end = nullptr;
    bool ok = colon != std::string::npos && colon > 0;
    if (ok) {
      const std::string rank = item.substr(0, colon);
      const std::string factor = item.substr(colon + 1);
      const long r = std::strtol(rank.c_str(), &end, 10);
      ok = *end == '\0' && r >= 0 && r < (1 << 20);
      s.rank = static_cast<int>(r);
      if (ok) {
        s.factor = std::strtod(factor.c_str(), &end);
        ok = !factor.empty() && *end == '\0' && std::isfinite(s.factor) && s.factor >= 1 &&
             s.factor <= 1000;
      }
    }
    if (!ok) {
      return InvalidArgumentError(fmt::format(
          "--straggler '{}': expected RANK:FACTOR with RANK >= 0 and FACTOR in [1, 1000]", item));
    }
    for (const frugal_torch::Straggler& seen : out) {
      if (seen.rank == s.rank) {
        return InvalidArgumentError(fmt::format("--straggler: rank {} given twice", s.rank));
      }
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

void AddTrainFlags(CLI::App& cmd, TrainFlags& flags) {
  cmd.add_option("--config", flags.config,
                 "Read options from a TOML file: one `flag-name = value` per line, an optional "
                 "[train] section; flags on the command line win")
      ->check(CLI::Validator(CLI::ExistingFile).description(""))
      ->type_name("FILE");
  cmd.add_option("--model", flags.model,
                 "mlp, cnn, resnet20 or vgg (Fashion-MNIST), charlstm (fortunes)")
      ->capture_default_str();
  cmd.add_option("--dataset", flags.dataset,
                 "fashion-mnist or fortunes (the fortunes text corpus, next-character "
                 "prediction); default: the model's")
      ->type_name("NAME");
  cmd.add_option("--epochs", flags.epochs, "Passes over the training set (--sync fedavg: rounds)")
      ->capture_default_str();
  cmd.add_option("--batch-size", flags.batch_size, "Batch size per rank (global: x ranks)")
      ->capture_default_str();
  cmd.add_option("--lr", flags.lr, "Learning rate")->capture_default_str();
  cmd.add_option("--momentum", flags.momentum, "SGD momentum")->capture_default_str();
  cmd.add_option("--weight-decay", flags.weight_decay, "L2 weight decay")->capture_default_str();
  cmd.add_flag("--nesterov", flags.nesterov, "Nesterov momentum");
  cmd.add_option("--lr-schedule", flags.lr_schedule, "constant, step or cosine")
      ->capture_default_str();
  cmd.add_option("--warmup-epochs", flags.warmup_epochs,
                 "Linear learning-rate warm-up over this many epochs")
      ->capture_default_str();
  cmd.add_option("--lr-milestones", flags.lr_milestones,
                 "step schedule: epochs at which the rate is multiplied by --lr-gamma")
      ->delimiter(',')
      ->type_name("E1,E2,...");
  cmd.add_option("--lr-gamma", flags.lr_gamma, "step schedule: decay factor")
      ->capture_default_str();
  cmd.add_option("--partition", flags.partition,
                 "iid, dirichlet:ALPHA (non-IID shards) or source (fortunes: whole source files "
                 "per rank or client)")
      ->capture_default_str();
  cmd.add_option("--seed", flags.seed, "Seed of the model, the shuffling and the partition")
      ->capture_default_str();
  cmd.add_option(
         "--arch", flags.arch,
         "Architecture: allreduce[:ALGO] with ALGO one of ring, rd, rabenseifner, tree, "
         "dbtree, hier, torus, direct (one machine), mpi (MPI_Allreduce), gloo, gloo:ring_chunked, "
         "gloo:halving_doubling (Gloo); or "
         "gossip[:topology=T][,mixing=M][,algorithm=A][,order=cta|atc][,gamma=G]"
         "[,overlap=0|1] (decentralized: T ring, torus, exp, onepeer-exp, "
         "random-regular:degree=D, complete, file:PATH or edges:U-V/U-V/...; M uniform "
         "or metropolis; A dpsgd, choco, dcd, ecd (with --compress) or sgp); or "
         "ps:servers=S[,shard-mb=M] (a parameter server: the last S ranks hold the model "
         "in keys of at most M MB, default " +
             fmt::format("{}", kDefaultShardMb) +
             ", and run the optimizer; the others push gradients and pull parameters)")
      ->capture_default_str();
  cmd.add_option("--allreduce", flags.allreduce, "Alias: --allreduce ALGO is --arch allreduce:ALGO")
      ->type_name("ALGO");
  cmd.add_option("--sync", flags.sync,
                 "Synchronization: bsp (average gradients every step; with gossip: mix with the "
                 "neighbours every step), asp (with gossip: AD-PSGD, asynchronous pairwise "
                 "averages; with ps: pushes applied as they arrive), ssp:staleness=S (ps: no "
                 "worker more than S steps ahead of the slowest), backup:workers=B (ps: each "
                 "update averages the first W-B gradients, the late ones are dropped), "
                 "lag[:window=D][,xi=X][,max-skip=C] (ps: a worker uploads only a gradient that "
                 "changed enough), "
                 "local:period=H[,start-epoch=E][,intra-period=h][,buffers=0|1][,momenta=0|1]"
                 "[,overlap=0|1] (Local SGD: average the models every H local steps; post-local "
                 "SGD from epoch E; hierarchical: within each host every h steps; overlap: each "
                 "average runs beside the next H local steps and lands one period late), "
                 "fedavg:clients=K[,fraction=C][,local-epochs=E|,local-steps=S][,min-samples=M] "
                 "(FedAvg: K clients simulated on the ranks, C of them per round; --epochs gives "
                 "the rounds)")
      ->capture_default_str();
  cmd.add_option("--staleness-policy", flags.staleness_policy,
                 "ps with ssp or asp: none, drop:T (drop updates of staleness above T) or scale "
                 "(learning rate / staleness)")
      ->capture_default_str();
  cmd.add_option("--straggler", flags.stragglers,
                 "RANK:FACTOR: that rank's forward and backward take FACTOR times as long "
                 "(repeatable)")
      ->type_name("RANK:FACTOR");
  cmd.add_option("--threads", flags.threads, "Torch threads per rank")->capture_default_str();
  cmd.add_option("--max-steps", flags.max_steps,
                 "Stop each rank after this many steps in total, then evaluate (0: no limit)")
      ->capture_default_str();
  cmd.add_option("--stop-at-accuracy", flags.stop_at_accuracy,
                 "Stop after the first epoch whose test accuracy reaches this (0: never)")
      ->capture_default_str();
  cmd.add_option("--test-samples", flags.test_samples,
                 "Evaluate on the first N test images only (0: all 10000)")
      ->capture_default_str();
  cmd.add_option("--replica-eval-samples", flags.replica_eval_samples,
                 "Drifting replicas: each rank's own model is evaluated on the first N test "
                 "images for rank_accuracy_min/max (0: all; the averaged model always on all)")
      ->capture_default_str();
  cmd.add_option("--bucket-cap-mb", flags.bucket_cap_mb, "Gradient fusion bucket cap in MB")
      ->capture_default_str();
  cmd.add_option("--timeout-ms", flags.timeout_ms,
                 "Timeout of every wait for other ranks (a stuck rank ends the job)")
      ->capture_default_str();
  cmd.add_option("--data-dir", flags.data_dir,
                 "Directory of the dataset (default: its Debian package's, " +
                     std::string(frugal_torch::kFashionMnistDir) + " or " +
                     frugal_torch::kFortunesDir + ")")
      ->type_name("DIR");
  cmd.add_option("--json", flags.json, "Write one JSON object per epoch and a summary to FILE")
      ->type_name("FILE");
  // Communication engine.
  cmd.add_option("--overlap", flags.overlap,
                 "Overlap of gradient communication with computation: none (after backward), "
                 "wfbp (each gradient as backward produces it), fusion (wfbp + tensor fusion), "
                 "priority (wfbp + priority scheduling with partitions, layer-wise updates)")
      ->capture_default_str();
  cmd.add_option("--fusion", flags.fusion,
                 "--overlap fusion: mgwfbp (merges planned from the alpha/beta model) or cycle "
                 "(Horovod: what is ready within a cycle)")
      ->capture_default_str();
  cmd.add_flag("--od-sgd", flags.od_sgd,
               "One-step delay: apply the previous step's averaged gradient while this step's "
               "is communicated");
  cmd.add_flag("--skip-comm", flags.skip_comm,
               "Compute only: do not exchange gradients (lower bound of the step time)");
  cmd.add_option("--cycle-time-ms", flags.cycle_time_ms, "Engine negotiation cycle")
      ->capture_default_str();
  cmd.add_option("--fusion-threshold-mb", flags.fusion_threshold_mb, "Largest fused bucket")
      ->capture_default_str();
  cmd.add_option("--partition-mb", flags.partition_mb,
                 "--overlap priority: partition size (0: no partitioning)")
      ->capture_default_str();
  cmd.add_option("--stall-warning-s", flags.stall_warning_s,
                 "Warn, naming the ranks, when some ranks submitted a gradient and others not for "
                 "this long (0: off; default: half of --timeout-ms); must be shorter than "
                 "--timeout-ms, whose wait ends the job first");
  cmd.add_option("--stall-shutdown-s", flags.stall_shutdown_s,
                 "End the job when such a stall lasts this long (0: never)")
      ->capture_default_str();
  cmd.add_option("--engine-nice", flags.engine_nice,
                 "Nice value of the engine thread (-20..19; below 0 needs root): a more urgent "
                 "engine thread answers peers sooner where ranks share cores")
      ->capture_default_str();
  cmd.add_option("--timeline", flags.timeline,
                 "Write a Chrome trace (chrome://tracing, Perfetto) of every rank to FILE")
      ->type_name("FILE");
  cmd.add_option("--compress", flags.compress,
                 "Compress gradients with SPEC, e.g. fp16, qsgd:levels=15,bucket=512, onebit "
                 "(see `frugal bench compress --help`)")
      ->type_name("SPEC");
  cmd.add_flag("--ef", flags.ef, "--compress: with error feedback (residual memory)");
  cmd.add_flag("--worker-momentum", flags.worker_momentum,
               "--compress: apply --momentum (and --nesterov) on each worker before compression; "
               "the optimizer then steps without momentum (as DGC's momentum correction, "
               "dist-EF-SGDM)");
  cmd.add_option("--compress-min-bytes", flags.compress_min_bytes,
                 "--compress: tensors smaller than this stay dense")
      ->capture_default_str();
  cmd.add_option("--compress-pull", flags.compress_pull,
                 "--arch ps: compress the servers' answers (the change of the parameters) with "
                 "SPEC, with the servers' error feedback (DoubleSqueeze); --compress compresses "
                 "the pushes")
      ->type_name("SPEC");
  cmd.add_option("--aggregate", flags.aggregate,
                 "--compress: auto, allreduce, allgather, twophase, vote or custom")
      ->capture_default_str();
  cmd.add_option("--checkpoint-dir", flags.checkpoint_dir,
                 "Save checkpoints under DIR (each rank its file, committed by a manifest)")
      ->type_name("DIR");
  cmd.add_option("--checkpoint-every", flags.checkpoint_every,
                 "Save a checkpoint every N steps, or after every epoch's evaluation (epoch; the "
                 "default with --checkpoint-dir); --sync fedavg: rounds")
      ->type_name("N|epoch");
  cmd.add_option("--keep", flags.keep, "Checkpoints kept (the newest)")->capture_default_str();
  cmd.add_option("--resume", flags.resume,
                 "Resume the newest checkpoint under DIR (or the checkpoint DIR) with the same "
                 "flags: the run ends as if it had not been interrupted")
      ->type_name("DIR");
  cmd.add_option("--inject", flags.injects,
                 "A fault on demand (repeatable): kill|stop|drop|corrupt:rank=R,step=S, "
                 "slow:rank=R,factor=F, nan:rank=R,step=S[,tensor=NAME]; first attempt only")
      ->type_name("SPEC");
  cmd.add_option("--nan-policy", flags.nan_policy,
                 "A gradient that is not finite: abort (that rank ends the job, naming the step "
                 "and the tensor; the NaN reaches no peer) or skip (every rank skips the step's "
                 "update; needs --overlap none)")
      ->capture_default_str();
  cmd.add_option("--progress", flags.progress,
                 "bar (redrawn line), lines (one line per 10%), none, or auto (bar on a terminal)")
      ->capture_default_str();
}

// Applies the `key = value` items of a TOML file to the options of `cmd` that the command line
// did not set, as if they had been given as --key value. toml_file.h reads the file; keys may use
// '-' or '_'. Throws CLI::ConfigError (a bad command line: exit 2) for an unreadable file, TOML
// that does not parse, an unknown key or a bad value, naming the file and the line.
void ApplyConfigFile(CLI::App& cmd, const std::string& path) {
  auto items = ReadFlagFile(path, "train");
  if (!items.ok()) throw CLI::ConfigError(fmt::format("--config {}", items.status().message()));
  for (const FlagSetting& item : *items) {
    std::string name = item.key;
    std::replace(name.begin(), name.end(), '_', '-');
    CLI::Option* option = cmd.get_option_no_throw("--" + name);
    if (option == nullptr || name == "config") {
      throw CLI::ConfigError(
          fmt::format("--config {}:{}: unknown key '{}'", path, item.line, item.key));
    }
    if (option->count() > 0) continue;  // the command line wins
    try {
      option->add_result(item.words);
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw CLI::ConfigError(fmt::format("--config {}:{}: bad value for '{}': {}", path, item.line,
                                         item.key, e.what()));
    }
  }
}

void ApplyPlannedLearningRate(const CLI::App& cmd, TrainFlags& flags) {
  const CLI::Option* lr = cmd.get_option_no_throw("--lr");
  flags.lr_given = lr == nullptr || lr->count() > 0;
  if (flags.lr_given) return;
  StatusOr<StrategyOptions> options = ToStrategyOptions(flags);
  if (!options.ok()) return;
  StatusOr<StrategyPlan> plan = PlanStrategy(*options);
  if (plan.ok() && plan->lr.has_value()) flags.lr = *plan->lr;
}

// The communication engine's flags.
StatusOr<StrategyOptions> ToStrategyOptions(const TrainFlags& flags) {
  StrategyOptions options;
  options.arch = flags.arch;
  if (!flags.allreduce.empty()) {
    const std::string alias = "allreduce:" + flags.allreduce;
    if (flags.arch != "allreduce:ring" && flags.arch != alias) {
      return InvalidArgumentError(fmt::format(
          "--allreduce {} contradicts --arch {} (--allreduce ALGO is --arch allreduce:ALGO)",
          flags.allreduce, flags.arch));
    }
    options.arch = alias;
  }
  options.sync = flags.sync;
  options.compress = flags.compress;
  options.error_feedback = flags.ef;
  options.worker_momentum = flags.worker_momentum;
  options.compress_min_bytes = flags.compress_min_bytes;
  options.aggregate = flags.aggregate;
  options.compress_pull = flags.compress_pull;
  options.momentum = flags.momentum;
  options.lr_given = flags.lr_given;
  options.nesterov = flags.nesterov;
  options.od_sgd = flags.od_sgd;
  options.skip_comm = flags.skip_comm;
  options.staleness_policy = flags.staleness_policy;
  options.seed = flags.seed;
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.timeout = Duration(flags.timeout_ms);
  return options;
}

CheckpointIdentity CheckpointIdentityOf(const TrainFlags& flags, const StrategyPlan& plan) {
  std::string compressor = "none";
  if (plan.compressed) {
    auto made = DefaultCompressorRegistry().Create(plan.compressed->spec);
    compressor = made.ok() ? (*made)->spec() : plan.compressed->spec;
  }
  std::string milestones;
  for (double m : flags.lr_milestones)
    milestones += fmt::format("{}{}", milestones.empty() ? "" : ",", m);
  CheckpointIdentity identity = {
      {"model", flags.model},
      {"dataset", DatasetName(flags)},
      {"batch_size", fmt::format("{}", flags.batch_size)},
      {"seed", fmt::format("{}", flags.seed)},
      {"arch", ArchSpecName(plan.arch)},
      {"sync", SyncSpecName(plan.sync)},
      {"compress", compressor},
      {"ef", fmt::format("{}", flags.ef)},
      {"worker_momentum", fmt::format("{}", flags.worker_momentum)},
      {"compress_min_bytes", fmt::format("{}", flags.compress_min_bytes)},
      {"aggregate", flags.aggregate},
      {"lr", fmt::format("{}", flags.lr)},
      {"momentum", fmt::format("{}", flags.momentum)},
      {"weight_decay", fmt::format("{}", flags.weight_decay)},
      {"nesterov", fmt::format("{}", flags.nesterov)},
      {"lr_schedule", flags.lr_schedule},
      {"warmup_epochs", fmt::format("{}", flags.warmup_epochs)},
      {"lr_milestones", milestones},
      {"lr_gamma", fmt::format("{}", flags.lr_gamma)},
      {"partition", flags.partition},
      {"overlap", flags.overlap},
      {"fusion", flags.fusion},
      {"fusion_threshold_mb", fmt::format("{}", flags.fusion_threshold_mb)},
      {"partition_mb", fmt::format("{}", flags.partition_mb)},
      {"bucket_cap_mb", fmt::format("{}", flags.bucket_cap_mb)},
      {"od_sgd", fmt::format("{}", flags.od_sgd)},
      {"skip_comm", fmt::format("{}", flags.skip_comm)},
      {"threads", fmt::format("{}", flags.threads)}};
  if (plan.arch.kind == ArchKind::kParameterServer) {
    // What the servers compute with: the push and pull compressors and the staleness policy.
    identity.emplace_back("ps_push_compress", plan.push_compress);
    identity.emplace_back("ps_push_ef", fmt::format("{}", plan.push_error_feedback));
    identity.emplace_back("ps_pull_compress", plan.pull_compress);
    identity.emplace_back("ps_staleness_policy", flags.staleness_policy);
  }
  return identity;
}

namespace {

StatusOr<frugal_torch::CheckpointOptions> ToCheckpointOptions(const TrainFlags& flags,
                                                              const StrategyPlan& plan) {
  frugal_torch::CheckpointOptions options;
  options.dir = flags.checkpoint_dir;
  options.keep = flags.keep;
  options.resume = flags.resume;
  if (!flags.checkpoint_every.empty() && flags.checkpoint_dir.empty()) {
    return InvalidArgumentError("--checkpoint-every needs --checkpoint-dir");
  }
  if (flags.checkpoint_every == "epoch" ||
      (flags.checkpoint_every.empty() && !flags.checkpoint_dir.empty())) {
    options.every_epoch = true;
  } else if (!flags.checkpoint_every.empty()) {
    char* end = nullptr;
    const long long n = std::strtoll(flags.checkpoint_every.c_str(), &end, 10);
    if (*end != '\0' || n < 1) {
      return InvalidArgumentError(
          fmt::format("--checkpoint-every '{}': expected a number of steps >= 1 or 'epoch'",
                      flags.checkpoint_every));
    }
    options.every_steps = n;
  }
  const bool shared_epochs = plan.sync.kind == SyncKind::kSsp || plan.sync.kind == SyncKind::kAsp ||
                             plan.sync.kind == SyncKind::kBackup;
  if (plan.arch.kind == ArchKind::kParameterServer && shared_epochs && options.every_steps > 0) {
    return InvalidArgumentError(fmt::format(
        "--arch ps with --sync {} saves checkpoints at the end of epochs only (--checkpoint-every "
        "epoch): within an epoch the workers are at different steps",
        SyncSpecName(plan.sync)));
  }
  if (flags.od_sgd && options.every_steps > 0) {
    return InvalidArgumentError(
        "--od-sgd saves checkpoints at the end of epochs only (--checkpoint-every epoch): within "
        "an epoch a step's update is still in flight");
  }
  if (!flags.checkpoint_dir.empty() && std::filesystem::exists(flags.checkpoint_dir) &&
      !std::filesystem::is_directory(flags.checkpoint_dir)) {
    return InvalidArgumentError(
        fmt::format("--checkpoint-dir {}: not a directory", flags.checkpoint_dir));
  }
  options.identity = CheckpointIdentityOf(flags, plan);
  FRUGAL_RETURN_IF_ERROR(frugal_torch::ValidateCheckpointOptions(options));
  return options;
}

}  // namespace

Status CheckResume(const TrainFlags& flags, int world_size, int rank) {
  if (flags.resume.empty()) return Status::Ok();
  FRUGAL_ASSIGN_OR_RETURN(StrategyOptions strategy, ToStrategyOptions(flags));
  FRUGAL_ASSIGN_OR_RETURN(StrategyPlan plan, PlanStrategy(strategy));
  const CheckpointIdentity identity = CheckpointIdentityOf(flags, plan);
  const Status status = rank >= 0
                            ? OpenCheckpoint(flags.resume, rank, world_size, identity).status()
                            : VerifyCheckpoint(flags.resume, world_size, identity).status();
  if (status.ok()) return status;
  return InvalidArgumentError(fmt::format("--resume {}: {}", flags.resume, status.message()));
}

StatusOr<frugal_torch::TrainOptions> ToTrainOptions(const TrainFlags& flags,
                                                    const StrategyPlan& plan) {
  frugal_torch::TrainOptions options;
  options.model = flags.model;
  options.epochs = flags.epochs;
  options.batch_size = flags.batch_size;
  options.lr = flags.lr;
  // DGC and worker momentum take the optimizer's momentum over (PlanStrategy).
  options.momentum = plan.optimizer_momentum;
  options.nesterov = plan.optimizer_nesterov;
  options.weight_decay = flags.weight_decay;
  FRUGAL_ASSIGN_OR_RETURN(options.stragglers, ParseStragglers(flags.stragglers));
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<FaultSpec> faults, ParseFaultSpecs(flags.injects));
  for (const FaultSpec& f : faults) {
    if (f.kind == FaultKind::kCorrupt && !plan.compressed) {
      return InvalidArgumentError(fmt::format(
          "--inject '{}' corrupts a compressed payload's header: it needs --compress", f.text));
    }
    if (plan.sync.kind == SyncKind::kFedAvg &&
        (f.kind == FaultKind::kNan || f.kind == FaultKind::kCorrupt ||
         f.kind == FaultKind::kDrop)) {
      return InvalidArgumentError(fmt::format(
          "--inject '{}' applies to per-step strategies, not to --sync fedavg", f.text));
    }
    if (plan.sync.kind == SyncKind::kFedAvg && f.epoch > 0) {
      return InvalidArgumentError(
          fmt::format("--inject '{}': --sync fedavg counts rounds, not steps of epochs", f.text));
    }
  }
  FRUGAL_RETURN_IF_ERROR(AddTrainFaults(faults, options));
  FRUGAL_ASSIGN_OR_RETURN(options.nan_policy, frugal_torch::ParseNanPolicy(flags.nan_policy));
  if (options.nan_policy == frugal_torch::NanPolicy::kSkip &&
      (plan.sync.kind == SyncKind::kFedAvg || flags.overlap != "none" || flags.od_sgd)) {
    return InvalidArgumentError(
        "--nan-policy skip needs --overlap none without --od-sgd, and a per-step strategy: the "
        "ranks agree on a step before any of its gradients is sent");
  }
  FRUGAL_ASSIGN_OR_RETURN(options.schedule, frugal_torch::ParseLrScheduleKind(flags.lr_schedule));
  options.warmup_epochs = flags.warmup_epochs;
  options.lr_milestones = flags.lr_milestones;
  options.lr_gamma = flags.lr_gamma;
  FRUGAL_ASSIGN_OR_RETURN(options.partition, frugal_torch::ParsePartition(flags.partition));
  options.seed = flags.seed;
  options.threads = flags.threads;
  options.max_steps = flags.max_steps;
  options.stop_at_accuracy = flags.stop_at_accuracy;
  options.test_samples = flags.test_samples;
  options.replica_eval_samples = flags.replica_eval_samples;
  if (!(flags.bucket_cap_mb > 0) || flags.bucket_cap_mb > 1e6) {
    return InvalidArgumentError("--bucket-cap-mb must be in (0, 1e6]");
  }
  options.bucket_cap_bytes = static_cast<size_t>(std::llround(flags.bucket_cap_mb * (1 << 20)));
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.timeout = Duration(flags.timeout_ms);
  FRUGAL_RETURN_IF_ERROR(frugal_torch::ValidateTrainOptions(options));
  if (flags.progress != "auto" && flags.progress != "bar" && flags.progress != "lines" &&
      flags.progress != "none") {
    return InvalidArgumentError(
        fmt::format("unknown --progress '{}' (known: auto, bar, lines, none)", flags.progress));
  }
  FRUGAL_RETURN_IF_ERROR(CheckJsonPath(flags.json));
  FRUGAL_RETURN_IF_ERROR(ToOverlapOptions(flags, options));
  FRUGAL_ASSIGN_OR_RETURN(options.checkpoint, ToCheckpointOptions(flags, plan));
  return options;
}

// The dataset must be installed: checked before anything is launched.
Status ValidateTrainFlags(const TrainFlags& flags) {
  FRUGAL_ASSIGN_OR_RETURN(StrategyOptions strategy, ToStrategyOptions(flags));
  FRUGAL_ASSIGN_OR_RETURN(StrategyPlan plan, PlanStrategy(strategy));
  FRUGAL_RETURN_IF_ERROR(ToTrainOptions(flags, plan).status());
  const std::string dataset = DatasetName(flags);
  FRUGAL_RETURN_IF_ERROR(frugal_torch::CheckDatasetName(dataset));
  if (frugal_torch::DatasetOfModel(flags.model) != dataset) {
    return InvalidArgumentError(
        fmt::format("--model {} does not train on --dataset {} (it needs {})", flags.model, dataset,
                    frugal_torch::DatasetOfModel(flags.model)));
  }
  if (frugal_torch::ParsePartition(flags.partition)->kind == frugal_torch::PartitionKind::kSource &&
      dataset != "fortunes") {
    return InvalidArgumentError(
        "--partition source needs --dataset fortunes (samples with sources)");
  }
  return Status::Ok();
}

std::string DatasetName(const TrainFlags& flags) {
  return flags.dataset.empty() ? frugal_torch::DatasetOfModel(flags.model) : flags.dataset;
}

std::string DataDir(const TrainFlags& flags) {
  return flags.data_dir.empty() ? frugal_torch::DefaultDataDir(DatasetName(flags)) : flags.data_dir;
}

Status CheckDataset(const TrainFlags& flags) {
  return frugal_torch::CheckDatasetFiles(DatasetName(flags), DataDir(flags));
}

// The gradient reducer the flags ask for.
}  // namespace frugal::apps
