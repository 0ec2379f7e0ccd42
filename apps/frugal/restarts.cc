// Automatic restarts (see restarts.h).
#include "restarts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "child_process.h"
#include "emulate_job.h"
#include "frugal/checkpoint.h"
#include "frugal/state_visitor.h"
#include "restart_notes.h"

namespace frugal::apps {
namespace fs = std::filesystem;
namespace {

bool IsFlag(const std::string& arg, std::string_view flag) {
  return arg == flag || arg.starts_with(std::string(flag) + "=");
}

// The steps (FedAvg: rounds) rank `rank` had done at `checkpoint`: its own count in its file
// ("loop/step", "loop/rounds"), which differs from the checkpoint's name where the workers share
// epochs at their own pace; the name when the file does not say.
int64_t StepsAtCheckpoint(const CheckpointRef& checkpoint, int rank) {
  auto state = ReadRankState(checkpoint, rank);
  if (state.ok()) {
    for (std::string_view name : {"loop/step", "loop/rounds"}) {
      StateLoader loader(*state);
      int64_t v = 0;
      loader.I64(name, v);
      if (loader.ok()) return v;
    }
  }
  return static_cast<int64_t>(checkpoint.manifest.step);
}

// "rank 0 7, rank 1 5"
std::string ByRankText(const std::map<int, int64_t>& by_rank) {
  std::string out;
  for (const auto& [rank, steps] : by_rank) {
    out += fmt::format("{}rank {} {}", out.empty() ? "" : ", ", rank, steps);
  }
  return out;
}

// {"0": 7, "1": 5}
nlohmann::json ByRankJson(const std::map<int, int64_t>& by_rank) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [rank, steps] : by_rank) out[std::to_string(rank)] = steps;
  return out;
}

StatusOr<int> RunAttempt(const LaunchOptions& options, const std::vector<std::string>& command,
                         const std::string& notes, const Logger& logger) {
  const Environment env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                           {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                           {kRestartNotesEnv, notes}};
  if (!options.emulate.empty()) {
    EmulatedJob job;
    FRUGAL_ASSIGN_OR_RETURN(job.spec, ParseEmulateSpec(options.emulate));
    job.np = options.np;
    job.alone = options.own_hosts;
    job.command = command;
    job.mpirun_options = {"-x", kRestartNotesEnv};
    job.extra_env = env;
    return RunEmulatedJob(job, logger);
  }
  std::vector<std::string> argv = MpirunCommand(options, command);
  argv.insert(argv.begin() + 1, {"-x", kRestartNotesEnv});
  logger.Info(fmt::format("starting: {}", ShellQuote(argv)));
  SpawnOptions spawn;
  spawn.extra_env = env;
  return RunSupervised(argv, spawn, kJobKillGrace);
}

}  // namespace

std::vector<std::string> RestartCommand(const std::vector<std::string>& command,
                                        const std::optional<std::string>& resume) {
  std::vector<std::string> out;
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string& arg = command[i];
    bool dropped = false;
    for (std::string_view flag : {"--inject", "--max-restarts", "--resume"}) {
      if (i > 0 && IsFlag(arg, flag)) {
        dropped = true;
        if (arg == flag) ++i;  // its value follows
      }
    }
    if (!dropped) out.push_back(arg);
  }
  if (resume) {
    out.emplace_back("--resume");
    out.push_back(*resume);
  }
  return out;
}

StatusOr<int> RunWithRestarts(const LaunchOptions& options, const RestartPoint& restart, int argc,
                              char** argv, const Logger& logger) {
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<std::string> self, SelfCommand(argc, argv));
  const std::string& dir = restart.checkpoint_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("--checkpoint-dir {}: {}", dir, ec.message()));
  // The first attempt keeps the faults and a --resume of the user's.
  std::vector<std::string> command;
  for (size_t i = 0; i < self.size(); ++i) {
    if (i > 0 && IsFlag(self[i], "--max-restarts")) {
      if (self[i] == "--max-restarts") ++i;
      continue;
    }
    command.push_back(self[i]);
  }
  int restarts = 0;
  int64_t redone = 0;  // per restart, the most steps a rank redid
  std::map<int, int64_t> redone_by_rank;
  bool any_own_positions = false;
  nlohmann::json causes = nlohmann::json::array();
  int code = 0;
  while (true) {
    RemoveRestartNotes(dir);
    FRUGAL_ASSIGN_OR_RETURN(code, RunAttempt(options, command, dir, logger));
    if (code == 0 || code == 128 + SIGHUP || code == 128 + SIGINT || code == 128 + SIGTERM) break;
    const std::string cause =
        FailureCause(dir).value_or(fmt::format("mpirun exited with code {}", code));
    if (restarts == options.max_restarts) {
      std::fprintf(stderr, "frugal: the job failed again after %d restart(s): %s\n", restarts,
                   cause.c_str());
      break;
    }
    ++restarts;
    // Each rank redoes the steps it had completed beyond its own position in the checkpoint.
    auto checkpoint = FindCheckpoint(dir);
    const int64_t from = checkpoint.ok() ? static_cast<int64_t>(checkpoint->manifest.step) : 0;
    std::map<int, int64_t> again_by_rank;
    std::map<int, int64_t> done_by_rank;  // the steps of the run each rank had done
    bool own_positions = false;           // the ranks' positions in the checkpoint differ
    std::optional<int64_t> position;
    for (const auto& [rank, completed] : ProgressByRank(dir)) {
      const int64_t at = checkpoint.ok() ? StepsAtCheckpoint(*checkpoint, rank) : 0;
      if (position && *position != at) own_positions = true;
      position = at;
      again_by_rank[rank] = std::max<int64_t>(completed - at, 0);
      done_by_rank[rank] = completed;
    }
    int64_t again = 0;
    for (const auto& [rank, steps] : again_by_rank) {
      again = std::max(again, steps);
      redone_by_rank[rank] += steps;
    }
    redone += again;
    any_own_positions = any_own_positions || own_positions;
    const std::string to_redo = own_positions ? fmt::format("up to {} step(s) to redo: {}", again,
                                                            ByRankText(again_by_rank))
                                              : fmt::format("{} step(s) to redo", again);
    std::fprintf(stderr, "frugal: restart %d/%d after: %s; resuming %s (%s)\n", restarts,
                 options.max_restarts, cause.c_str(),
                 checkpoint.ok()
                     ? fmt::format("checkpoint {} at step {}", checkpoint->path, from).c_str()
                     : "from the start (no committed checkpoint)",
                 to_redo.c_str());
    std::fflush(stderr);
    causes.push_back({{"cause", cause},
                      {"resumed_from_step", from},
                      {"steps_redone", again},
                      {"steps_redone_by_rank", ByRankJson(again_by_rank)},
                      {"steps_done_by_rank", ByRankJson(done_by_rank)}});
    command =
        RestartCommand(self, checkpoint.ok() ? std::optional<std::string>(dir) : std::nullopt);
  }
  RemoveRestartNotes(dir);
  std::fprintf(stderr, "frugal: %d restart(s), %lld step(s) redone%s\n", restarts,
               static_cast<long long>(redone),
               any_own_positions ? fmt::format(" ({})", ByRankText(redone_by_rank)).c_str() : "");
  if (!restart.json.empty()) {
    std::ofstream out(restart.json, std::ios::app);
    out << nlohmann::json{{"event", "restarts"},
                          {"restarts", restarts},
                          {"max_restarts", options.max_restarts},
                          {"steps_redone", redone},
                          {"steps_redone_by_rank", ByRankJson(redone_by_rank)},
                          {"exit_code", code},
                          {"attempts", causes}}
               .dump()
        << "\n";
  }
  return code;
}

}  // namespace frugal::apps
