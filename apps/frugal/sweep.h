// `frugal sweep FILE.toml`: run a grid of `frugal train` configurations, one JSON line per run,
// resumable, then render a markdown table and PNG plots (sweep_report.h).
//
// A sweep file:
//
//   name = "quick"                       # required: [A-Za-z0-9_-]+
//   description = "..."                  # optional
//   command = ["train"]                  # optional: the frugal subcommand (default ["train"])
//   timeout_minutes = 30                 # optional: per run (default 60)
//   [base]                               # flags given to every run
//   model = "mlp"
//   epochs = 2
//   [axes]                               # the grid: every combination of these values
//   compressor = ["none", "topk:ratio=0.01,ef=1"]
//   np = [2, 4]
//   lr = [0.01, 0.1]
//   [variants]                           # optional: named bundles of flags, one more axis
//   dense = []                           # ("variant", first, slowest) whose values are the
//   topk_ef = ["--compress=topk", "--ef"]  # names; each run gets its variant's flag words
//   [report]                             # optional, see SweepReportSpec
//   columns = "lr"
//   workers = "np"
//   methods = ["compressor"]
//   target_accuracy = 0.88
//   baseline = "none"
//
// Keys of [base] and [axes] are long flag names of the command (`lr` -> `--lr=0.1`; a boolean
// true -> `--flag`, false -> `--flag=false`); `json` is reserved for the harness. The words of
// a variant must be flags (`--name` or `--name=value`) that [base] and [axes] do not set. Every
// point's command line is checked by a validator (the command's own parser) before anything runs.
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
#include "sweep_toml.h"

namespace frugal::apps {

struct SweepFlag {
  std::string name;
  TomlValue value;  // never an array
};

struct SweepAxis {
  std::string name;
  std::vector<TomlValue> values;  // at least one, no repeats
};

// A named bundle of flag words: the values of the "variant" axis.
struct SweepVariant {
  std::string name;
  std::vector<std::string> words;  // e.g. {"--compress=topk:ratio=0.01", "--ef"}; may be empty
};

inline constexpr std::string_view kVariantAxis = "variant";

struct SweepReportSpec {
  std::string columns;               // axis whose values are table columns ("lr"), or empty
  std::string workers;               // flag naming the worker count ("np"), or empty
  std::vector<std::string> methods;  // axes naming a method (plot lines); default: the others
  double target_accuracy = 0;        // for "time to target" (fraction, 0 < t <= 1); 0: none
  std::string baseline;              // label of the dense method for compression ratios
};

struct SweepSpec {
  std::string source;  // the file it came from
  std::string name;
  std::string description;
  std::vector<std::string> command = {"train"};
  std::chrono::minutes timeout{60};
  std::vector<SweepFlag> base;
  std::vector<SweepAxis> axes;  // with [variants], axes[0] is the "variant" axis
  std::vector<SweepVariant> variants;
  SweepReportSpec report;

  const SweepVariant* FindVariant(std::string_view name) const;
};

// One configuration of the grid.
struct SweepPoint {
  int index = 0;                  // position in the grid, from 0
  std::vector<SweepFlag> flags;   // base flags in file order, then one value per axis
  std::string key;                // identity used for resuming (flags sorted by name, as JSON)
  std::string id;                 // short stable hash of key, for file names
  std::vector<std::string> args;  // command words followed by the flag words

  const TomlValue* Find(std::string_view flag) const;
  nlohmann::json PointJson() const;  // {"flag": value, ...}
  std::string Describe() const;      // "compressor=none np=4 lr=0.1" (the axes only)
  std::vector<std::string> axis_names;
};

// Builds a SweepSpec from a parsed sweep file; every problem is kInvalidArgument with the file
// and line (unknown keys or tables, empty or repeated axis values, arrays in [base], a flag in
// both [base] and [axes], report settings naming flags that do not exist).
StatusOr<SweepSpec> SweepSpecFromToml(const TomlDocument& doc, std::string_view source);
StatusOr<SweepSpec> LoadSweepSpec(const std::string& path);

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
