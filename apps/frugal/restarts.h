// Automatic restarts (`--max-restarts N`): the launcher runs the job, and when it fails relaunches
// it from the last committed checkpoint, at most N times.
//
// The ranks of a job the launcher supervises leave notes in the checkpoint directory, which the
// launcher names in FRUGAL_RESTART_NOTES and mpirun passes to every rank with -x: their progress
// and the line each printed when it failed (restart_notes.h). After a failed attempt the launcher
// takes the cause from the failure notes (FailureCause: the earliest failure of a rank's own,
// before the ranks that passed it on) and the checkpoint to resume from FindCheckpoint. Each rank
// with a progress note redoes the steps it had completed beyond its own position in that checkpoint
// (the "loop/step" or "loop/rounds" of its file: where the workers share epochs at their own pace,
// each holds its own count, not the checkpoint's name); the steps redone of the restart are the
// most any rank redoes (with ranks in lockstep, the steps every rank redoes). It logs one line per
// restart (cause, checkpoint, steps to redo, and each rank's when their positions differ), removes
// the notes and relaunches the same command without its --inject faults, without --max-restarts,
// and with --resume DIR. An attempt that ends with 129, 130 or 143 (the job was interrupted:
// SIGHUP, SIGINT, SIGTERM) is not restarted. At the end it prints how many restarts there were and
// how many steps were done again, and appends {"event":"restarts",...} to the --json file when
// there is one (with "steps_redone_by_rank", over the whole job and per attempt, and per attempt
// "steps_done_by_rank": the steps of the run each rank had done when the attempt ended).
//
// Not thread safe: the main thread of the `frugal` command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frugal/logging.h"
#include "frugal/status.h"
#include "launcher.h"
#include "restart_notes.h"

namespace frugal::apps {

// What a command that can restart tells the launcher.
struct RestartPoint {
  std::string checkpoint_dir;  // where its ranks save checkpoints (--checkpoint-dir)
  std::string json;            // its --json file, or empty
};

// The relaunched command: `command` (this executable and its arguments) without --inject and
// --max-restarts items (in either the "--flag value" or the "--flag=value" form) and without
// --resume, then `--resume dir` when `resume` is set.
std::vector<std::string> RestartCommand(const std::vector<std::string>& command,
                                        const std::optional<std::string>& resume);

// Runs the job (plain mpirun, --hostfile or --emulate, as RelaunchUnderMpirun would) and restarts
// it as described above. Returns the exit code of the last attempt.
StatusOr<int> RunWithRestarts(const LaunchOptions& options, const RestartPoint& restart, int argc,
                              char** argv, const Logger& logger);

}  // namespace frugal::apps
