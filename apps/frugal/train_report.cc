// `frugal train`'s output (see train_report.h).
#include "train_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "frugal/compressed_reducer.h"
#include "launcher.h"

namespace frugal::apps {

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

Status JsonLines::Open(const std::string& path, bool append) {
  path_ = path;
  if (path.empty()) return Status::Ok();
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  return out_ ? Status::Ok() : IoError(fmt::format("cannot write {}", path));
}

Status JsonLines::Write(const nlohmann::json& record) {
  if (!out_.is_open()) return Status::Ok();
  out_ << record.dump() << "\n" << std::flush;
  return out_ ? Status::Ok() : IoError(fmt::format("cannot write {}", path_));
}

namespace {

// A strategy's number: a whole number as an integer (counts, bytes), anything else as a double.
bool IsWhole(double value) {
  return std::isfinite(value) && std::fabs(value) < 9e15 && value == std::floor(value);
}

nlohmann::json ReportValue(double value) {
  if (IsWhole(value)) return static_cast<int64_t>(value);
  return value;
}

std::string ReportText(double value) {
  if (IsWhole(value)) return fmt::format("{}", static_cast<int64_t>(value));
  return fmt::format("{:.6g}", value);
}

}  // namespace

nlohmann::json EpochJson(const frugal_torch::EpochRecord& r) {
  nlohmann::json j = {{"event", "epoch"},
                      {"epoch", r.epoch},
                      {"steps", r.steps},
                      {"train_loss", r.train_loss},
                      {"test_loss", r.test_loss},
                      {"test_accuracy", r.test_accuracy},
                      {"lr", r.lr},
                      {"epoch_seconds", r.epoch_seconds},
                      {"wall_seconds", r.wall_seconds},
                      {"samples_per_second", r.samples_per_second},
                      {"bytes_sent", r.bytes_sent},
                      {"rank_accuracy_min", r.rank_accuracy_min},
                      {"rank_accuracy_max", r.rank_accuracy_max},
                      {"rank_accuracy_samples", r.rank_accuracy_samples},
                      {"consensus_distance", r.consensus_distance},
                      {"consensus_distance_max", r.consensus_distance_max},
                      {"eval_bytes_sent", r.eval_bytes_sent}};
  for (const auto& [name, value] : r.strategy_report) j[name] = ReportValue(value);
  return j;
}

nlohmann::json CheckpointJson(int64_t step, uint64_t params_hash) {
  return {
      {"event", "checkpoint"}, {"step", step}, {"params_hash", fmt::format("{:08x}", params_hash)}};
}

nlohmann::json SummaryJson(const frugal_torch::TrainSummary& s, const TrainFlags& flags) {
  nlohmann::json j = {
      {"event", "summary"},
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
      {"allreduce",
       !flags.allreduce.empty() ? flags.allreduce : flags.arch.substr(flags.arch.find(':') + 1)},
      {"strategy", s.strategy},
      {"identical_replicas", s.identical_replicas},
      {"params_hash", fmt::format("{:08x}", s.parameter_hash)},
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
      {"negotiation_bytes_per_worker", s.negotiation_bytes_per_worker},
      {"resumed_from_step",
       s.resumed_from_step >= 0 ? nlohmann::json(s.resumed_from_step) : nlohmann::json(nullptr)},
      {"resumed_params_hash", s.resumed_from_step >= 0
                                  ? nlohmann::json(fmt::format("{:08x}", s.resumed_parameter_hash))
                                  : nlohmann::json(nullptr)},
      {"checkpoints", s.checkpoints},
      {"checkpoint_seconds", s.checkpoint_seconds},
      {"checkpoint_bytes", s.checkpoint_bytes},
      {"skipped_steps", s.skipped_steps}};
  if (s.worker_steps >= 0) j["worker_steps"] = s.worker_steps;
  for (const auto& [name, value] : s.strategy_report) j[name] = ReportValue(value);
  return j;
}

// Summary fields of gradient compression: the compressor, rank 0's compression ratio (bytes a
// dense ring all-reduce of the same gradients sends / bytes actually sent; null without
// compression or on one rank), the aggregation path, worker momentum and error feedback as the
// plan set them (with the options it added on its own) and the bytes sent in each epoch.
void AddCompressionSummary(nlohmann::json& j, const frugal_torch::TrainSummary& s,
                           const TrainFlags& flags, const StrategyPlan& plan,
                           const GradientReducer& reducer) {
  const auto* compressed = dynamic_cast<const CompressedReducer*>(&reducer);
  j["compressor"] = compressed != nullptr         ? nlohmann::json(compressed->compressor().spec())
                    : !plan.push_compress.empty() ? nlohmann::json(plan.push_compress)
                                                  : nlohmann::json(nullptr);
  j["compress_pull"] =
      plan.pull_compress.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.pull_compress);
  const double ratio = compressed != nullptr ? compressed->compression_ratio() : 0;
  j["compression_ratio"] = ratio > 0 ? nlohmann::json(ratio) : nlohmann::json(nullptr);
  const CompressedReducerOptions* options =
      compressed != nullptr && plan.compressed ? &*plan.compressed : nullptr;
  j["aggregate"] = options != nullptr ? nlohmann::json(AggregationPathName(options->path))
                                      : nlohmann::json(nullptr);
  j["compress_min_bytes"] = flags.compress_min_bytes;
  j["worker_momentum"] = options != nullptr && options->worker_momentum > 0;
  j["error_feedback"] = (options != nullptr && options->error_feedback) || plan.push_error_feedback;
  j["implied"] = plan.implied;
  nlohmann::json epochs = nlohmann::json::array();
  for (const frugal_torch::EpochRecord& r : s.history) epochs.push_back(r.bytes_sent);
  j["epoch_bytes_sent"] = epochs;
}

std::string EpochTableHeader(bool spread) {
  std::string header =
      fmt::format("{:>5}  {:>10}  {:>9}  {:>8}  {:>10}  {:>8}  {:>14}", "epoch", "train_loss",
                  "test_loss", "test_acc", "samples/s", "time", "sent/worker");
  if (spread) header += fmt::format("  {:>15}  {:>17}", "rank_acc", "consensus mean/max");
  return header + "\n";
}

std::string EpochTableRow(const frugal_torch::EpochRecord& r, bool spread) {
  std::string row = fmt::format("{:>5}  {:>10.4f}  {:>9.4f}  {:>8.4f}  {:>10.0f}  {:>8}  {:>14}",
                                r.epoch, r.train_loss, r.test_loss, r.test_accuracy,
                                r.samples_per_second, fmt::format("{:.1f}s", r.epoch_seconds),
                                FormatBytes(static_cast<double>(r.bytes_sent)));
  if (spread) {
    row += fmt::format(
        "  {:>15}  {:>17}", fmt::format("{:.4f}-{:.4f}", r.rank_accuracy_min, r.rank_accuracy_max),
        fmt::format("{:.4f}/{:.4f}", r.consensus_distance, r.consensus_distance_max));
  }
  return row + "\n";
}

std::string SummaryTable(const frugal_torch::TrainSummary& s) {
  std::string out = "\nsummary\n";
  auto row = [&out](std::string_view key, const std::string& value) {
    out += fmt::format("  {:<22} {}\n", key, value);
  };
  row("model", fmt::format("{} ({} parameters)", s.model, s.params));
  row("workers", fmt::format("{} (global batch {})", s.workers, s.global_batch));
  row("strategy", fmt::format("{}{}", s.strategy,
                              s.identical_replicas ? ""
                                                   : " (replicas differ between averages; "
                                                     "the averaged model is evaluated)"));
  row("reduction", s.reducer);
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
  row("params consistent", s.params_consistent    ? "yes (all ranks hash equal)"
                           : s.identical_replicas ? "NO"
                                                  : "no (the strategy lets replicas differ)");
  row("params hash", fmt::format("{:08x} (rank 0)", s.parameter_hash));
  if (s.resumed_from_step >= 0) row("resumed", fmt::format("at step {}", s.resumed_from_step));
  if (s.skipped_steps > 0) {
    row("skipped steps", fmt::format("{} (a gradient was not finite)", s.skipped_steps));
  }
  if (s.checkpoints > 0) {
    row("checkpoints",
        fmt::format("{} saved, {:.2f} s in all, {} per rank (rank 0's last)", s.checkpoints,
                    s.checkpoint_seconds, FormatBytes(static_cast<double>(s.checkpoint_bytes))));
  }
  for (const auto& [name, value] : s.strategy_report) row(name, ReportText(value));
  return out;
}

}  // namespace frugal::apps
