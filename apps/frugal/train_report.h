// What `frugal train` shows and writes: the progress line on rank 0's stderr, the epoch table
// and summary on stdout, and the JSON lines (one "epoch" object per epoch, then a "summary").
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "frugal/reducer.h"
#include "frugal/timer.h"
#include "frugal_torch/trainer.h"
#include "train_flags.h"

namespace frugal::apps {

// Set by the process that starts mpirun, read by rank 0: whether the user's terminal is a TTY
// (rank 0's own stderr is a pipe to mpirun).
inline constexpr char kStderrIsTtyEnv[] = "FRUGAL_TRAIN_STDERR_TTY";

std::string FormatDuration(double seconds);
std::string FormatBytes(double bytes);

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

// --progress: bar, lines, none, or auto (a bar when the user's stderr is a terminal).
Progress::Mode ProgressMode(const std::string& flag);

// --json FILE: one JSON object per line, flushed after each. Not open (no --json): writes nothing.
class JsonLines {
 public:
  // Truncates `path`, or appends to it (empty: no output); kIoError if it cannot be written.
  Status Open(const std::string& path, bool append = false);
  Status Write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

nlohmann::json EpochJson(const frugal_torch::EpochRecord& r);
// {"event":"checkpoint","step":S,"params_hash":"..."}: a committed checkpoint and the hash of
// rank 0's parameters it holds.
nlohmann::json CheckpointJson(int64_t step, uint64_t params_hash);
nlohmann::json SummaryJson(const frugal_torch::TrainSummary& s, const TrainFlags& flags);
// Summary fields of gradient compression (see train_report.cc).
void AddCompressionSummary(nlohmann::json& j, const frugal_torch::TrainSummary& s,
                           const TrainFlags& flags, const StrategyPlan& plan,
                           const GradientReducer& reducer);
std::string EpochTableHeader(bool spread);
std::string EpochTableRow(const frugal_torch::EpochRecord& r, bool spread);
std::string SummaryTable(const frugal_torch::TrainSummary& s);

}  // namespace frugal::apps
