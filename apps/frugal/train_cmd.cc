// `frugal train`: data-parallel training of a Fashion-MNIST classifier (frugal_torch) with BSP
// gradient averaging. Flags become TrainOptions and a GradientReducer in one place
// (AddTrainFlags / ToTrainOptions / MakeReducer); every rank then runs frugal_torch::Train, and
// rank 0 shows a progress bar on stderr, prints the epoch table and the summary on stdout and
// writes the JSON lines (one "epoch" object per epoch, then one "summary" object). The gradients
// go through the communication engine (ToOverlapOptions: --overlap, --od-sgd, --skip-comm,
// --timeline, ...), whose Chrome trace rank 0 writes at the end.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "frugal/compressed_reducer.h"
#include "frugal/engine.h"
#include "frugal/engine_phases.h"
#include "frugal/reducer.h"
#include "frugal/timer.h"
#include "frugal_torch/data.h"
#include "frugal_torch/schedule.h"
#include "frugal_torch/trainer.h"
#include "launcher.h"
#include "toml_file.h"

namespace frugal::apps {
namespace {

// Set by the process that starts mpirun, read by rank 0: whether the user's terminal is a TTY
// (rank 0's own stderr is a pipe to mpirun).
constexpr char kStderrIsTtyEnv[] = "FRUGAL_TRAIN_STDERR_TTY";

// Every flag of `frugal train`, as given.
struct TrainFlags {
  std::string model = "cnn";
  int64_t epochs = 1;
  int64_t batch_size = 64;
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0;
  bool nesterov = false;
  std::string lr_schedule = "constant";
  double warmup_epochs = 0;
  std::vector<double> lr_milestones;
  double lr_gamma = 0.1;
  std::string partition = "iid";
  uint64_t seed = 1;
  std::string allreduce = "ring";
  int threads = 1;
  int64_t max_steps = 0;
  double stop_at_accuracy = 0;
  double bucket_cap_mb = 25;
  int timeout_ms = 20000;
  std::string data_dir = frugal_torch::kFashionMnistDir;
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
  double stall_warning_s = 10;
  double stall_shutdown_s = 0;
  int engine_nice = 0;
  std::string timeline;
  // Gradient compression (frugal/compressed_reducer.h).
  std::string compress;
  bool ef = false;
  bool worker_momentum = false;
  size_t compress_min_bytes = 65536;
  std::string aggregate = "auto";
};

void AddTrainFlags(CLI::App& cmd, TrainFlags& flags) {
  cmd.add_option("--config", flags.config,
                 "Read options from a TOML file: one `flag-name = value` per line, an optional "
                 "[train] section; flags on the command line win")
      ->check(CLI::Validator(CLI::ExistingFile).description(""))
      ->type_name("FILE");
  cmd.add_option("--model", flags.model, "mlp, cnn, resnet20 or vgg")->capture_default_str();
  cmd.add_option("--epochs", flags.epochs, "Passes over the training set")->capture_default_str();
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
  cmd.add_option("--partition", flags.partition, "iid or dirichlet:ALPHA (non-IID shards)")
      ->capture_default_str();
  cmd.add_option("--seed", flags.seed, "Seed of the model, the shuffling and the partition")
      ->capture_default_str();
  cmd.add_option("--allreduce", flags.allreduce,
                 "ring, rd, rabenseifner, tree, dbtree, hier, torus, or mpi (MPI_Allreduce)")
      ->capture_default_str();
  cmd.add_option("--threads", flags.threads, "Torch threads per rank")->capture_default_str();
  cmd.add_option("--max-steps", flags.max_steps,
                 "Stop each rank after this many steps in total, then evaluate (0: no limit)")
      ->capture_default_str();
  cmd.add_option("--stop-at-accuracy", flags.stop_at_accuracy,
                 "Stop after the first epoch whose test accuracy reaches this (0: never)")
      ->capture_default_str();
  cmd.add_option("--bucket-cap-mb", flags.bucket_cap_mb, "Gradient fusion bucket cap in MB")
      ->capture_default_str();
  cmd.add_option("--timeout-ms", flags.timeout_ms,
                 "Timeout of every wait for other ranks (a stuck rank ends the job)")
      ->capture_default_str();
  cmd.add_option("--data-dir", flags.data_dir, "Fashion-MNIST IDX files")->capture_default_str();
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
                 "Warn when some ranks submitted a gradient and others not for this long (0: off)")
      ->capture_default_str();
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
  cmd.add_option("--aggregate", flags.aggregate,
                 "--compress: auto, allreduce, allgather, twophase, vote or custom")
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

Status CheckJsonPath(const std::string& path) {
  if (path.empty()) return Status::Ok();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent)) {
    return InvalidArgumentError(
        fmt::format("--json {}: directory '{}' does not exist", path, parent.string()));
  }
  if (std::filesystem::is_directory(path)) {
    return InvalidArgumentError(fmt::format("--json {}: is a directory", path));
  }
  return Status::Ok();
}

// The communication engine's flags.
Status ToOverlapOptions(const TrainFlags& flags, frugal_torch::TrainOptions& options) {
  frugal_torch::OverlapOptions overlap;
  FRUGAL_ASSIGN_OR_RETURN(overlap.mode, ParseOverlapMode(flags.overlap));
  FRUGAL_ASSIGN_OR_RETURN(overlap.fusion, ParseFusionPolicy(flags.fusion));
  if (overlap.fusion == FusionPolicy::kOff) {
    return InvalidArgumentError("--fusion must be mgwfbp or cycle (no fusion: --overlap wfbp)");
  }
  overlap.od_sgd = flags.od_sgd;
  overlap.skip_comm = flags.skip_comm;
  if (flags.od_sgd && flags.skip_comm) {
    return InvalidArgumentError("--od-sgd and --skip-comm exclude each other");
  }
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
  if (!(flags.stall_warning_s >= 0) || !(flags.stall_shutdown_s >= 0)) {
    return InvalidArgumentError("--stall-warning-s and --stall-shutdown-s must be >= 0");
  }
  overlap.engine.cycle_time = Duration(std::llround(flags.cycle_time_ms));
  overlap.engine.fusion_threshold_bytes =
      static_cast<size_t>(std::llround(flags.fusion_threshold_mb * (1 << 20)));
  overlap.engine.partition_bytes =
      static_cast<size_t>(std::llround(flags.partition_mb * (1 << 20)));
  overlap.engine.stall_warning = Duration(std::llround(flags.stall_warning_s * 1000));
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
struct DgcAdaptation {
  std::string spec;
  bool takes_momentum = false;  // the optimizer must run without momentum
};
DgcAdaptation AdaptDgcSpec(const std::string& spec, double momentum, int64_t steps_per_epoch) {
  StatusOr<CompressorParams> params = CompressorParams::Parse(spec);
  // Another compressor, or a spec the registry will refuse with its own message.
  if (!params.ok() || params->name() != "dgc") return {spec, false};
  std::string adapted = spec;
  auto add = [&](const std::string& item) {
    adapted += (adapted.find(':') == std::string::npos ? ":" : ",") + item;
  };
  if (!params->Has("momentum")) add(fmt::format("momentum={}", momentum));
  if (!params->Has("epoch_steps") && steps_per_epoch > 0) {
    add(fmt::format("epoch_steps={}", steps_per_epoch));
  }
  // A malformed momentum value counts as non-zero; the registry refuses it.
  StatusOr<double> correction = params->Double("momentum", momentum, 0.0, 1.0);
  return {adapted, !correction.ok() || *correction != 0};
}

// The compression flags; kNotFound / kInvalidArgument for a bad spec or combination.
StatusOr<CompressedReducerOptions> ToCompressedReducerOptions(const TrainFlags& flags) {
  CompressedReducerOptions options;
  if (flags.compress.empty()) {
    if (flags.ef || flags.worker_momentum || flags.aggregate != "auto" ||
        flags.compress_min_bytes != 65536) {
      return InvalidArgumentError(
          "--ef, --worker-momentum, --aggregate and --compress-min-bytes need --compress");
    }
    return options;
  }
  if (flags.allreduce == "mpi") {
    return InvalidArgumentError(
        "--compress runs over frugal's transport: --allreduce mpi does not "
        "apply (use ring, rd, rabenseifner, tree, dbtree, hier or torus)");
  }
  const DgcAdaptation adapted = AdaptDgcSpec(flags.compress, flags.momentum, 0);
  options.spec = adapted.spec;
  options.error_feedback = flags.ef;
  if (flags.worker_momentum) {
    if (adapted.takes_momentum) {
      return InvalidArgumentError(
          "--worker-momentum does not combine with dgc, whose momentum correction already runs "
          "on the worker");
    }
    if (!(flags.momentum > 0)) {
      return InvalidArgumentError("--worker-momentum needs a --momentum above 0");
    }
    options.worker_momentum = flags.momentum;
    options.worker_nesterov = flags.nesterov;
  }
  options.min_bytes = flags.compress_min_bytes;
  FRUGAL_ASSIGN_OR_RETURN(options.path, ParseAggregationPath(flags.aggregate));
  FRUGAL_ASSIGN_OR_RETURN(options.algorithm, ParseAllreduceAlgorithm(flags.allreduce));
  options.seed = flags.seed;
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> compressor,
                          DefaultCompressorRegistry().Create(options.spec));
  if (flags.ef && compressor->inner() == nullptr) {
    compressor = WithErrorFeedback(std::move(compressor));
  }
  FRUGAL_RETURN_IF_ERROR(CheckAggregationPath(*compressor, options.path));
  return options;
}

StatusOr<frugal_torch::TrainOptions> ToTrainOptions(const TrainFlags& flags) {
  frugal_torch::TrainOptions options;
  options.model = flags.model;
  options.epochs = flags.epochs;
  options.batch_size = flags.batch_size;
  options.lr = flags.lr;
  options.momentum = flags.momentum;
  if (AdaptDgcSpec(flags.compress, flags.momentum, 0).takes_momentum) {
    if (flags.nesterov) {
      return InvalidArgumentError(
          "--nesterov does not combine with dgc's momentum correction (dgc:momentum=0 turns it "
          "off)");
    }
    options.momentum = 0;  // in the compressor
  }
  options.weight_decay = flags.weight_decay;
  options.nesterov = flags.nesterov;
  if (flags.worker_momentum && !flags.compress.empty()) {
    options.momentum = 0;  // in the compressed reducer
    options.nesterov = false;
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
  if (!(flags.bucket_cap_mb > 0) || flags.bucket_cap_mb > 1e6) {
    return InvalidArgumentError("--bucket-cap-mb must be in (0, 1e6]");
  }
  options.bucket_cap_bytes = static_cast<size_t>(std::llround(flags.bucket_cap_mb * (1 << 20)));
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.timeout = Duration(flags.timeout_ms);
  FRUGAL_RETURN_IF_ERROR(frugal_torch::ValidateTrainOptions(options));
  const std::vector<std::string> algorithms = DenseReducerAlgorithms();
  if (std::find(algorithms.begin(), algorithms.end(), flags.allreduce) == algorithms.end()) {
    return InvalidArgumentError(fmt::format("unknown allreduce algorithm '{}' (known: {})",
                                            flags.allreduce, fmt::join(algorithms, ", ")));
  }
  if (flags.progress != "auto" && flags.progress != "bar" && flags.progress != "lines" &&
      flags.progress != "none") {
    return InvalidArgumentError(
        fmt::format("unknown --progress '{}' (known: auto, bar, lines, none)", flags.progress));
  }
  FRUGAL_RETURN_IF_ERROR(CheckJsonPath(flags.json));
  FRUGAL_RETURN_IF_ERROR(ToOverlapOptions(flags, options));
  FRUGAL_RETURN_IF_ERROR(ToCompressedReducerOptions(flags).status());
  return options;
}

// The dataset must be installed: checked before anything is launched.
Status CheckDataset(const std::string& dir) {
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    const std::string path = dir + "/" + name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return NotFoundError(
          fmt::format("Fashion-MNIST file {} not found (install the Debian "
                      "package {})",
                      path, frugal_torch::kFashionMnistPackage));
    }
  }
  return Status::Ok();
}

// The gradient reducer the flags ask for.
StatusOr<std::unique_ptr<GradientReducer>> MakeReducer(const TrainFlags& flags,
                                                       const frugal_torch::TrainOptions& options,
                                                       int64_t steps_per_epoch, Transport& world,
                                                       PhaseRecorder* phases) {
  if (!flags.compress.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(CompressedReducerOptions compressed, ToCompressedReducerOptions(flags));
    compressed.spec = AdaptDgcSpec(flags.compress, flags.momentum, steps_per_epoch).spec;
    compressed.timeout = options.timeout;
    FRUGAL_ASSIGN_OR_RETURN(
        std::unique_ptr<CompressedReducer> reducer,
        MakeCompressedReducer(world,
                              phases != nullptr
                                  ? WithPhaseTiming(DefaultCompressorRegistry(), *phases)
                                  : DefaultCompressorRegistry(),
                              compressed));
    return std::unique_ptr<GradientReducer>(std::move(reducer));
  }
  DenseReducerOptions dense;
  dense.algorithm = flags.allreduce;
  dense.timeout = options.timeout;
  // The bucket plan is verified across ranks once, so the per-call length check is not needed.
  dense.allreduce.check_lengths = false;
  return MakeDenseReducer(world, dense);
}

std::string FormatDuration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{:02d}:{:02d}", s / 60, s % 60);
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

// tqdm-like progress on rank 0's stderr: a redrawn bar on a terminal, or one line per 10% of
// an epoch in logs.
class Progress {
 public:
  enum class Mode { kBar, kLines, kNone };
  explicit Progress(Mode mode) : mode_(mode) {}

  void Step(const frugal_torch::StepProgress& p) {
    if (mode_ == Mode::kNone) return;
    const double fraction = static_cast<double>(p.step) / static_cast<double>(p.steps_in_epoch);
    const double eta =
        p.step > 0 ? p.epoch_seconds / p.step * static_cast<double>(p.steps_in_epoch - p.step) : 0;
    const std::string stats = fmt::format("{}/{} [{}<{}, {:.0f} samples/s, loss={:.4f}]", p.step,
                                          p.steps_in_epoch, FormatDuration(p.epoch_seconds),
                                          FormatDuration(eta), p.samples_per_second, p.loss);
    if (mode_ == Mode::kBar) {
      const bool last = p.step == p.steps_in_epoch;
      if (!last && redraw_.Seconds() < 0.1 && p.step > 1) return;
      redraw_.Reset();
      constexpr int kWidth = 24;
      const int filled = static_cast<int>(fraction * kWidth);
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(kWidth, ' ');
      std::fprintf(stderr, "\repoch %lld/%lld: %3.0f%%|%s| %s\033[K",
                   static_cast<long long>(p.epoch), static_cast<long long>(p.epochs),
                   100 * fraction, bar.c_str(), stats.c_str());
      if (last) std::fputc('\n', stderr);
    } else {
      const int decile = static_cast<int>(fraction * 10);
      if (p.step == 1) last_decile_ = 0;
      if (decile <= last_decile_) return;
      last_decile_ = decile;
      std::fprintf(stderr, "epoch %lld/%lld: %3.0f%% %s\n", static_cast<long long>(p.epoch),
                   static_cast<long long>(p.epochs), 100 * fraction, stats.c_str());
    }
    std::fflush(stderr);
  }

 private:
  Mode mode_;
  Stopwatch redraw_;
  int last_decile_ = 0;
};

Progress::Mode ProgressMode(const std::string& flag) {
  if (flag == "bar") return Progress::Mode::kBar;
  if (flag == "lines") return Progress::Mode::kLines;
  if (flag == "none") return Progress::Mode::kNone;
  bool tty = isatty(STDERR_FILENO) != 0;
  if (!tty && RunningUnderMpi()) {
    const char* launcher_tty = std::getenv(kStderrIsTtyEnv);
    tty = launcher_tty != nullptr && std::string(launcher_tty) == "1";
  }
  return tty ? Progress::Mode::kBar : Progress::Mode::kLines;
}

nlohmann::json EpochJson(const frugal_torch::EpochRecord& r) {
  return {{"event", "epoch"},
          {"epoch", r.epoch},
          {"steps", r.steps},
          {"train_loss", r.train_loss},
          {"test_loss", r.test_loss},
          {"test_accuracy", r.test_accuracy},
          {"lr", r.lr},
          {"epoch_seconds", r.epoch_seconds},
          {"wall_seconds", r.wall_seconds},
          {"samples_per_second", r.samples_per_second},
          {"bytes_sent", r.bytes_sent}};
}

nlohmann::json SummaryJson(const frugal_torch::TrainSummary& s, const TrainFlags& flags) {
  return {{"event", "summary"},
          {"model", s.model},
          {"params", s.params},
          {"workers", s.workers},
          {"epochs", s.epochs},
          {"steps", s.steps},
          {"batch_size", flags.batch_size},
          {"global_batch", s.global_batch},
          {"lr", flags.lr},
          {"momentum", flags.momentum},
          {"weight_decay", flags.weight_decay},
          {"partition", flags.partition},
          {"seed", flags.seed},
          {"threads", flags.threads},
          {"allreduce", flags.allreduce},
          {"reducer", s.reducer},
          {"train_loss", s.train_loss},
          {"test_loss", s.test_loss},
          {"test_accuracy", s.test_accuracy},
          {"bytes_sent_per_worker", s.bytes_sent_per_worker},
          {"bytes_counted_by", s.bytes_counted_by},
          {"wall_seconds", s.wall_seconds},
          {"compute_seconds", s.compute_seconds},
          {"comm_seconds", s.comm_seconds},
          {"eval_seconds", s.eval_seconds},
          {"samples_per_second", s.samples_per_second},
          {"params_consistent", s.params_consistent},
          {"overlap", s.overlap},
          {"od_sgd", flags.od_sgd},
          {"skip_comm", flags.skip_comm},
          {"stop_at_accuracy", flags.stop_at_accuracy},
          {"step_seconds_median", s.step_seconds_median},
          {"comm_hidden_fraction", s.comm_hidden_fraction},
          {"negotiation_bytes_per_worker", s.negotiation_bytes_per_worker}};
}

// Summary fields of gradient compression: the compressor, rank 0's compression ratio (bytes a
// dense ring all-reduce of the same gradients sends / bytes actually sent; null without
// compression or on one rank) and the bytes sent in each epoch.
void AddCompressionSummary(nlohmann::json& j, const frugal_torch::TrainSummary& s,
                           const TrainFlags& flags, const GradientReducer& reducer) {
  const auto* compressed = dynamic_cast<const CompressedReducer*>(&reducer);
  j["compressor"] = compressed != nullptr ? nlohmann::json(compressed->compressor().spec())
                                          : nlohmann::json(nullptr);
  const double ratio = compressed != nullptr ? compressed->compression_ratio() : 0;
  j["compression_ratio"] = ratio > 0 ? nlohmann::json(ratio) : nlohmann::json(nullptr);
  j["aggregate"] =
      compressed != nullptr ? nlohmann::json(flags.aggregate) : nlohmann::json(nullptr);
  j["compress_min_bytes"] = flags.compress_min_bytes;
  j["worker_momentum"] = compressed != nullptr && flags.worker_momentum;
  nlohmann::json epochs = nlohmann::json::array();
  for (const frugal_torch::EpochRecord& r : s.history) epochs.push_back(r.bytes_sent);
  j["epoch_bytes_sent"] = epochs;
}

std::string EpochTableHeader() {
  return fmt::format("{:>5}  {:>10}  {:>9}  {:>8}  {:>10}  {:>8}  {:>14}\n", "epoch", "train_loss",
                     "test_loss", "test_acc", "samples/s", "time", "sent/worker");
}

std::string EpochTableRow(const frugal_torch::EpochRecord& r) {
  return fmt::format("{:>5}  {:>10.4f}  {:>9.4f}  {:>8.4f}  {:>10.0f}  {:>8}  {:>14}\n", r.epoch,
                     r.train_loss, r.test_loss, r.test_accuracy, r.samples_per_second,
                     fmt::format("{:.1f}s", r.epoch_seconds),
                     FormatBytes(static_cast<double>(r.bytes_sent)));
}

std::string SummaryTable(const frugal_torch::TrainSummary& s) {
  std::string out = "\nsummary\n";
  auto row = [&out](std::string_view key, const std::string& value) {
    out += fmt::format("  {:<22} {}\n", key, value);
  };
  row("model", fmt::format("{} ({} parameters)", s.model, s.params));
  row("workers", fmt::format("{} (global batch {})", s.workers, s.global_batch));
  row("gradient reduction", s.reducer);
  row("epochs / steps", fmt::format("{} / {}", s.epochs, s.steps));
  row("test accuracy", fmt::format("{:.4f}", s.test_accuracy));
  row("test loss", fmt::format("{:.4f}", s.test_loss));
  row("train loss", fmt::format("{:.4f}", s.train_loss));
  row("samples/s", fmt::format("{:.0f} (all workers)", s.samples_per_second));
  row("wall time", fmt::format("{:.1f} s", s.wall_seconds));
  row("compute / comm / eval", fmt::format("{:.1f} s / {:.1f} s / {:.1f} s (mean per worker)",
                                           s.compute_seconds, s.comm_seconds, s.eval_seconds));
  row("bytes sent per worker",
      fmt::format("{} ({} bytes, counted by {})",
                  FormatBytes(static_cast<double>(s.bytes_sent_per_worker)),
                  s.bytes_sent_per_worker, s.bytes_counted_by));
  row("overlap", fmt::format("{} (median step {:.1f} ms, {:.0f}% of communication hidden, "
                             "negotiation {})",
                             s.overlap, 1e3 * s.step_seconds_median, 100 * s.comm_hidden_fraction,
                             FormatBytes(static_cast<double>(s.negotiation_bytes_per_worker))));
  row("params consistent", s.params_consistent ? "yes (all ranks hash equal)" : "NO");
  return out;
}

Status RunTrain(RankContext& context, const TrainFlags& flags) {
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::TrainOptions options, ToTrainOptions(flags));
  // With --timeline, the compressors report encode and decode to the engine's timeline.
  PhaseRecorder phases;
  if (options.overlap) {
    options.overlap->engine.logger = context.logger;
    if (!flags.timeline.empty()) options.overlap->engine.phases = &phases;
  }
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::FashionMnist data,
                          frugal_torch::LoadFashionMnist(flags.data_dir));
  FRUGAL_ASSIGN_OR_RETURN(
      std::unique_ptr<GradientReducer> reducer,
      MakeReducer(flags, options,
                  frugal_torch::ShardSampler::StepsPerEpoch(data.train.count, context.world.size(),
                                                            options.batch_size),
                  context.world, flags.timeline.empty() ? nullptr : &phases));
  const bool root = context.is_root();
  std::ofstream json;
  if (root && !flags.json.empty()) {
    json.open(flags.json, std::ios::trunc);
    if (!json) return IoError(fmt::format("cannot write {}", flags.json));
  }
  auto write_json = [&](const nlohmann::json& record) -> Status {
    if (!json.is_open()) return Status::Ok();
    json << record.dump() << "\n" << std::flush;
    return json ? Status::Ok() : IoError(fmt::format("cannot write {}", flags.json));
  };

  Progress progress(root ? ProgressMode(flags.progress) : Progress::Mode::kNone);
  Status json_status;
  frugal_torch::TrainCallbacks callbacks;
  if (root) {
    std::printf("frugal train: %s, %d worker%s x batch %lld, %s, lr %g, momentum %g\n",
                options.model.c_str(), context.world.size(), context.world.size() > 1 ? "s" : "",
                static_cast<long long>(options.batch_size), reducer->name().c_str(), options.lr,
                options.momentum);
    std::fflush(stdout);
    callbacks.on_step = [&progress](const frugal_torch::StepProgress& p) { progress.Step(p); };
    bool header_printed = false;
    callbacks.on_epoch = [&, header_printed](const frugal_torch::EpochRecord& r) mutable {
      if (!header_printed) std::fputs(EpochTableHeader().c_str(), stdout);
      header_printed = true;
      std::fputs(EpochTableRow(r).c_str(), stdout);
      std::fflush(stdout);
      if (json_status.ok()) json_status = write_json(EpochJson(r));
    };
  }
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::TrainSummary summary,
                          frugal_torch::Train(context.world, *reducer, data, options, callbacks));
  if (!root) return Status::Ok();
  std::fputs(SummaryTable(summary).c_str(), stdout);
  if (const auto* compressed = dynamic_cast<const CompressedReducer*>(reducer.get())) {
    std::printf("  %-22s %.1fx fewer bytes than a dense ring all-reduce (%s)\n", "compression",
                compressed->compression_ratio(), compressed->compressor().spec().c_str());
  }
  std::fflush(stdout);
  FRUGAL_RETURN_IF_ERROR(json_status);
  nlohmann::json summary_json = SummaryJson(summary, flags);
  AddCompressionSummary(summary_json, summary, flags, *reducer);
  FRUGAL_RETURN_IF_ERROR(write_json(summary_json));
  if (!flags.timeline.empty()) {
    std::ofstream trace(flags.timeline, std::ios::trunc);
    trace << summary.timeline_json;
    if (!trace) return IoError(fmt::format("cannot write {}", flags.timeline));
  }
  if (!summary.params_consistent && !flags.skip_comm) {
    return InternalError("the ranks ended with different parameters");
  }
  return Status::Ok();
}

}  // namespace

void AddTrainCommand(CLI::App& app, Dispatcher& dispatcher) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a Fashion-MNIST classifier data-parallel with BSP gradient averaging");
  AddTrainFlags(*cmd, *flags);
  cmd->callback([flags, cmd, &dispatcher] {
    if (!flags->config.empty()) ApplyConfigFile(*cmd, flags->config);
    if (!RunningUnderMpi()) {
      // Tell rank 0 (whose stderr will be a pipe to mpirun) whether progress can be redrawn.
      setenv(kStderrIsTtyEnv, isatty(STDERR_FILENO) ? "1" : "0", 1);
    }
    Action action;
    action.name = "train";
    action.validate = [flags]() -> Status {
      FRUGAL_RETURN_IF_ERROR(ToTrainOptions(*flags).status());
      return CheckDataset(flags->data_dir);
    };
    action.run = [flags](RankContext& context) { return RunTrain(context, *flags); };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
