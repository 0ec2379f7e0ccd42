// `frugal sweep FILE.toml`: run a grid of `frugal train` configurations, one JSON line per run,
// resumable, then render a markdown table and PNG plots (sweep_report.h).
//
// The sweep file is read by sweep_spec.h. Every point's command line is checked by a validator
// (the command's own parser) before anything runs.
//
// Thread safety: none needed; used by the main thread of `frugal sweep`.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frugal/logging.h"
#include "frugal/status.h"
#include "sweep_spec.h"

namespace frugal::apps {

// One configuration of the grid.
struct SweepPoint {
  int index = 0;                  // position in the grid, from 0
  std::vector<SweepFlag> flags;   // base flags in file order, then one value per axis
  std::string key;                // identity used for resuming (flags sorted by name, as JSON)
  std::string id;                 // short stable hash of key, for file names
  std::vector<std::string> args;  // command words followed by the flag words

  const FlagValue* Find(std::string_view flag) const;
  nlohmann::json PointJson() const;  // {"flag": value, ...}
  std::string Describe() const;      // "compressor=none np=4 lr=0.1" (the axes only)
  std::vector<std::string> axis_names;
};

// The grid in order: the first axis varies slowest.
std::vector<SweepPoint> ExpandSweep(const SweepSpec& spec);

// `--name=value` words for flags (see the file comment).
std::vector<std::string> FlagWords(const std::vector<SweepFlag>& flags);

// Checks the command line of one point (everything after `frugal`, without --json) with the
// command's own parser. Returns kInvalidArgument with the parser's message when it is refused.
using ArgsValidator = std::function<Status(const std::vector<std::string>& args)>;

// Runs `validator` on every point; the first refusal is returned, naming the point.
Status ValidateSweep(const std::vector<SweepPoint>& points, const ArgsValidator& validator);

// Results file: one JSON object per line. Lines that do not parse (a run killed while writing)
// are skipped with a warning.
StatusOr<std::vector<nlohmann::json>> ReadResults(const std::filesystem::path& path,
                                                  const Logger& logger);
// Appends one line and flushes it to disk.
Status AppendResult(const std::filesystem::path& path, const nlohmann::json& record);
// True when `record` is a finished, successful run (exit code 0 and a summary).
bool IsCompleted(const nlohmann::json& record);

struct SweepRunOptions {
  std::vector<std::string> self;  // how to start frugal: {"/path/to/frugal"}
  std::filesystem::path out_dir;  // results.jsonl, runs/, logs/, table.md, plots
  bool dry_run = false;           // print the points and their commands only
  bool retry_failed = true;       // run points again whose earlier run failed
};

// Runs the points that have no completed record in out_dir/results.jsonl, appending one record
// per run, then renders the report. SIGINT/SIGTERM stop the running point (it is not recorded)
// and the sweep. Returns the exit code: 0 when every point completed, 1 when some failed,
// 128 + signal when interrupted.
StatusOr<int> RunSweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                       const SweepRunOptions& options, const Logger& logger);

}  // namespace frugal::apps
