// Rendering the results of a sweep: a markdown table in the style of the survey's comparisons
// and PNG plots (gnuplot) of test accuracy against epoch, wall time and bytes sent.
//
// What is read from each completed record (sweep_results.h) — the `frugal train --json` lines:
//   epochs[i]: epoch, test_accuracy (fraction or percent), wall_seconds (since the start of
//              training), bytes_per_worker (sent by one worker so far)
//   summary:   test_accuracy, wall_seconds, bytes_per_worker, compression_ratio (optional)
// (RunMetrics documents the accepted spellings.)
//
// Thread safety: pure functions, plus RenderReport which writes files and runs gnuplot.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frugal/logging.h"
#include "frugal/status.h"
#include "sweep_grid.h"

namespace frugal::apps {

struct EpochMetrics {
  double epoch = 0;
  std::optional<double> test_accuracy;  // percent
  std::optional<double> wall_seconds;
  std::optional<double> bytes_per_worker;
};

struct RunMetrics {
  std::optional<double> test_accuracy;  // percent, final
  std::optional<double> wall_seconds;
  std::optional<double> bytes_per_worker;
  std::optional<double> compression_ratio;
  std::vector<EpochMetrics> epochs;

  // Seconds until the test accuracy first reached `target` (percent), from the epoch records.
  std::optional<double> TimeTo(double target_percent) const;
};

// Reads a completed record. Accepted names: test_accuracy | test_acc | accuracy;
// wall_seconds | elapsed_seconds | time_seconds; bytes_per_worker | bytes_sent_per_worker |
// bytes_sent; compression_ratio. Accuracies <= 1 are taken as fractions and turned into percent.
RunMetrics ExtractMetrics(const nlohmann::json& record);

// The words of `p` on `axes`, joined by spaces; with `with_names`, each as "axis=word".
std::string AxisWords(const SweepPoint& p, const std::vector<std::string>& axes,
                      bool with_names = false);

// The method of a point: the words of the method axes joined by spaces ("topk_100x_ef"), or the
// sweep's name when it has no method axis. `[report] baseline` names one.
std::string MethodLabel(const SweepSpec& spec, const SweepPoint& p);

// True when `a` and `b` have the same words on every axis of `axes` that is not a method axis:
// the same row position, e.g. the same worker count, of two methods.
bool SameBesideMethods(const SweepSpec& spec, const std::vector<std::string>& axes,
                       const SweepPoint& a, const SweepPoint& b);

// `text` as a Markdown table cell: every '|' escaped.
std::string MarkdownCell(const std::string& text);

// The table (markdown, with a title line) for `points`, using the last record of each point.
std::string RenderMarkdownTable(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                const std::vector<nlohmann::json>& records);

struct ReportFiles {
  std::filesystem::path table;
  std::vector<std::filesystem::path> plots;
};

// Writes out_dir/table.md and, when some run has epoch records, the plots
// out_dir/accuracy_vs_{epoch,time,bytes}_<group>.png (one group per value of the axes that are
// neither methods nor columns; one line per method at its best column value). kFailedPrecondition
// when gnuplot is missing or fails.
StatusOr<ReportFiles> RenderReport(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                   const std::vector<nlohmann::json>& records,
                                   const std::filesystem::path& out_dir, const Logger& logger);

}  // namespace frugal::apps
