// The points of a sweep (sweep_spec.h): every combination of the axes, with the command line of
// each and the key that identifies its run across resumed sweeps.
//
// Thread safety: values; no shared state.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace frugal::apps
