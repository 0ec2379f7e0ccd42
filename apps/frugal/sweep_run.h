// `frugal sweep FILE.toml`: run the points of a sweep (sweep_grid.h) one `frugal` command at a
// time, resumable (sweep_results.h), then render a markdown table and PNG plots
// (sweep_report.h).
//
// Thread safety: none needed; used by the main thread of `frugal sweep`.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "frugal/logging.h"
#include "frugal/status.h"
#include "sweep_grid.h"
#include "sweep_spec.h"

namespace frugal::apps {

struct SweepRunOptions {
  std::vector<std::string> self;  // how to start frugal: {"/path/to/frugal"}
  std::filesystem::path out_dir;  // results.jsonl, runs/, logs/, table.md, plots
  bool dry_run = false;           // print the points and their commands only
  bool retry_failed = true;       // run points again whose earlier run failed
};

// The points that have no completed record among `records` (or, with retry_failed false, no
// record at all), in grid order.
std::vector<const SweepPoint*> PointsToRun(const std::vector<SweepPoint>& points,
                                           const std::vector<nlohmann::json>& records,
                                           bool retry_failed);

// One run of a point.
struct PointRun {
  nlohmann::json record;           // its results.jsonl record; empty when interrupted
  std::string error;               // why it failed (also record["error"]); empty on success
  std::optional<int> interrupted;  // the signal that stopped it: then it is not to be recorded
  double wall_seconds = 0;
  std::filesystem::path log;  // out_dir/logs/ID.log
};

// Runs `frugal ARGS --json out_dir/runs/ID.jsonl` for point `p`, output to out_dir/logs/ID.log,
// until it ends, spec.timeout passes (it is stopped: a failure) or a signal held by `held`
// arrives (forwarded to it: interrupted). Errors: the run could not be started.
StatusOr<PointRun> RunPoint(const SweepSpec& spec, const SweepPoint& p,
                            const SweepRunOptions& options, HeldSignals& held);

// Runs the points that have no completed record in out_dir/results.jsonl, appending one record
// per run, then renders the report. SIGINT/SIGTERM stop the running point (it is not recorded)
// and the sweep. Returns the exit code: 0 when every point completed, 1 when some failed,
// 128 + signal when interrupted.
StatusOr<int> RunSweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                       const SweepRunOptions& options, const Logger& logger);

}  // namespace frugal::apps
