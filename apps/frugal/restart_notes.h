// The notes the ranks of a job under `--max-restarts` leave for the launcher (restarts.h), in
// the directory the launcher names in the environment variable FRUGAL_RESTART_NOTES:
//   .progress-rank-<r>   the steps (FedAvg: rounds) rank r had completed when it began its last
//                        one, rewritten as each begins;
//   .failure-rank-<r>    the one line rank r printed when it failed (or was killed by --inject).
//
// The cause of a failed attempt is the earliest failure note of a rank that failed on its own
// account. A line that passes on another rank's failure (the engine's "rank 0 failed: ..." after
// an abort notice, a server's "worker rank 2 failed: ...") is a consequence: the rank that
// detected the fault may write its note after the ranks it told (or be ended by their abort
// before it writes it), so such lines are the cause only when no rank noted a failure of its
// own, and then they are told as the failing rank's line (OriginOfRelay).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace frugal::apps {

inline constexpr char kRestartNotesEnv[] = "FRUGAL_RESTART_NOTES";

// A rank's notes (only when the launcher asked for them: FRUGAL_RESTART_NOTES is set).
class RestartNotes {
 public:
  // From the environment; inactive without FRUGAL_RESTART_NOTES.
  static RestartNotes FromEnvironment(int rank);
  // Notes in `dir` for `rank`.
  RestartNotes(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {}
  bool active() const { return !dir_.empty(); }
  // The rank begins a step having completed `completed` steps.
  void Progress(int64_t completed) const;
  // The rank fails with `line` (what it prints).
  void Failure(const std::string& line) const;

 private:
  RestartNotes() = default;
  std::string dir_;
  int rank_ = 0;
};

// Whether a failure line passes on another rank's failure ("... rank 0 failed: ...").
bool RelaysAnotherFailure(std::string_view line);

// A relayed failure told as the line of the rank that failed: "rank 1: train: Timeout: rank 0
// failed: X" becomes "rank 0: train: Timeout: X (passed on by rank 1)"; other lines unchanged.
std::string OriginOfRelay(const std::string& line);

// The cause of the attempt whose notes are in `dir` (see above), by the notes' modification
// times (ties: the lower rank); nullopt when no rank noted a failure.
std::optional<std::string> FailureCause(const std::string& dir);

// Per rank, the steps it had completed when it began its last one (its progress note).
std::map<int, int64_t> ProgressByRank(const std::string& dir);

// Removes every note from `dir`.
void RemoveRestartNotes(const std::string& dir);

}  // namespace frugal::apps
