// A sweep file (TOML, read with toml_file.h) and what it means: the flags every run gets, the
// axes of the grid, the variants and the report settings.
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
//   columns = "lr"                       # or ["model", "lr"]: model x lr columns
//   seeds = "seed"                       # optional: mean ± std over this axis
//   workers = "np"
//   methods = ["compressor"]
//   target_accuracy = 0.88
//   baseline = "none"
//
// Keys of [base] and [axes] are long flag names of the command (`lr` -> `--lr=0.1`; a boolean
// true -> `--flag`, false -> `--flag=false`); `json` is reserved for the harness. Values are
// strings, numbers or booleans. The words of a variant must be flags (`--name` or
// `--name=value`) that [base] and [axes] do not set. Order matters where the file gives it: the
// first axis varies slowest, variants keep their order.
//
// Thread safety: values; no shared state.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

// The value of a flag: a TOML string, integer, float or boolean.
struct FlagValue {
  enum class Type { kString, kInteger, kFloat, kBool };
  Type type = Type::kString;
  std::string word;          // the command-line word (TomlWord): the string itself for kString
  std::int64_t integer = 0;  // kInteger
  double number = 0;         // kFloat, and kInteger converted
  bool boolean = false;      // kBool

  static FlagValue String(std::string text);

  const std::string& AsWord() const { return word; }
  nlohmann::json ToJson() const;
  bool operator==(const FlagValue& other) const { return type == other.type && word == other.word; }
};

struct SweepFlag {
  std::string name;
  FlagValue value;
};

struct SweepAxis {
  std::string name;
  std::vector<FlagValue> values;  // at least one, no repeats
};

// A named bundle of flag words: the values of the "variant" axis.
struct SweepVariant {
  std::string name;
  std::vector<std::string> words;  // e.g. {"--compress=topk:ratio=0.01", "--ef"}; may be empty
};

inline constexpr std::string_view kVariantAxis = "variant";

struct SweepReportSpec {
  std::string columns;  // axis whose values are table columns ("lr"), or empty
  // Every column axis, `columns` first: `columns = ["model", "lr"]` makes each combination a
  // column (the survey's model x learning rate); then the table is the study table
  // (sweep_study.h).
  std::vector<std::string> column_axes;
  // Axis of repetitions ("seed"): the table shows mean ± std over its values (sweep_study.h).
  std::string seeds;
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
  std::vector<SweepFlag> base;  // in file order
  std::vector<SweepAxis> axes;  // in file order; with [variants], axes[0] is the "variant" axis
  std::vector<SweepVariant> variants;
  SweepReportSpec report;

  const SweepVariant* FindVariant(std::string_view name) const;
};

// Builds a SweepSpec from the text of a sweep file. Every problem is kInvalidArgument naming
// `source` and the line: TOML that does not parse, unknown keys or tables, values of the wrong
// type, empty or repeated axis values, arrays in [base], a flag in both [base] and [axes],
// report settings naming flags that do not exist.
StatusOr<SweepSpec> ParseSweepSpec(std::string_view text, std::string_view source);

// ParseSweepSpec of a file (kNotFound / kIoError when it cannot be read).
StatusOr<SweepSpec> LoadSweepSpec(const std::string& path);

}  // namespace frugal::apps
