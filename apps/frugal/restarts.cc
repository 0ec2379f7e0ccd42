// Automatic restarts (see restarts.h).
#include "restarts.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "child_process.h"
#include "emulate_job.h"
#include "frugal/checkpoint.h"

namespace frugal::apps {
namespace fs = std::filesystem;
namespace {

constexpr auto kKillAfter = std::chrono::seconds(10);
constexpr std::string_view kProgressPrefix = ".progress-rank-";
constexpr std::string_view kFailurePrefix = ".failure-rank-";

bool IsFlag(const std::string& arg, std::string_view flag) {
  return arg == flag || arg.starts_with(std::string(flag) + "=");
}

// Every note file in `dir` whose name starts with `prefix`.
std::vector<fs::path> Notes(const std::string& dir, std::string_view prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with(prefix)) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RemoveNotes(const std::string& dir) {
  std::error_code ec;
  for (std::string_view prefix : {kProgressPrefix, kFailurePrefix}) {
    for (const fs::path& p : Notes(dir, prefix)) fs::remove(p, ec);
  }
}

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The line of the rank that failed first (by the notes' modification times).
std::optional<std::string> FirstFailure(const std::string& dir) {
  std::optional<std::string> first;
  struct timespec earliest {};
  for (const fs::path& p : Notes(dir, kFailurePrefix)) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;
    const bool earlier =
        !first || st.st_mtim.tv_sec < earliest.tv_sec ||
        (st.st_mtim.tv_sec == earliest.tv_sec && st.st_mtim.tv_nsec < earliest.tv_nsec);
    if (earlier) {
      first = ReadLine(p);
      earliest = st.st_mtim;
    }
  }
  return first;
}

// The most steps any rank had completed when it began its last one.
std::optional<int64_t> StepsReached(const std::string& dir) {
  std::optional<int64_t> reached;
  for (const fs::path& p : Notes(dir, kProgressPrefix)) {
    const std::string line = ReadLine(p);
    char* end = nullptr;
    const long long v = std::strtoll(line.c_str(), &end, 10);
    if (line.empty() || *end != '\0' || v < 0) continue;
    reached = std::max<int64_t>(reached.value_or(0), v);
  }
  return reached;
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
  return RunSupervised(argv, spawn, kKillAfter);
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

RestartNotes RestartNotes::FromEnvironment(int rank) {
  RestartNotes notes;
  const char* dir = std::getenv(kRestartNotesEnv);
  if (dir != nullptr) notes.dir_ = dir;
  notes.rank_ = rank;
  return notes;
}

void RestartNotes::Progress(int64_t completed) const {
  if (!active()) return;
  std::ofstream(fs::path(dir_) / fmt::format("{}{}", kProgressPrefix, rank_), std::ios::trunc)
      << completed << "\n";
}

void RestartNotes::Failure(const std::string& line) const {
  if (!active()) return;
  std::ofstream(fs::path(dir_) / fmt::format("{}{}", kFailurePrefix, rank_), std::ios::trunc)
      << line << "\n";
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
  int64_t redone = 0;
  nlohmann::json causes = nlohmann::json::array();
  int code = 0;
  while (true) {
    RemoveNotes(dir);
    FRUGAL_ASSIGN_OR_RETURN(code, RunAttempt(options, command, dir, logger));
    if (code == 0 || code == 128 + SIGHUP || code == 128 + SIGINT || code == 128 + SIGTERM) break;
    const std::string cause =
        FirstFailure(dir).value_or(fmt::format("mpirun exited with code {}", code));
    if (restarts == options.max_restarts) {
      std::fprintf(stderr, "frugal: the job failed again after %d restart(s): %s\n", restarts,
                   cause.c_str());
      break;
    }
    ++restarts;
    const std::optional<int64_t> reached = StepsReached(dir);
    auto checkpoint = FindCheckpoint(dir);
    const int64_t from = checkpoint.ok() ? static_cast<int64_t>(checkpoint->manifest.step) : 0;
    const int64_t again = reached ? std::max<int64_t>(*reached - from, 0) : 0;
    redone += again;
    std::fprintf(stderr, "frugal: restart %d/%d after: %s; resuming %s (%lld step(s) to redo)\n",
                 restarts, options.max_restarts, cause.c_str(),
                 checkpoint.ok()
                     ? fmt::format("checkpoint {} at step {}", checkpoint->path, from).c_str()
                     : "from the start (no committed checkpoint)",
                 static_cast<long long>(again));
    std::fflush(stderr);
    causes.push_back({{"cause", cause}, {"resumed_from_step", from}, {"steps_redone", again}});
    command =
        RestartCommand(self, checkpoint.ok() ? std::optional<std::string>(dir) : std::nullopt);
  }
  RemoveNotes(dir);
  std::fprintf(stderr, "frugal: %d restart(s), %lld step(s) redone\n", restarts,
               static_cast<long long>(redone));
  if (!restart.json.empty()) {
    std::ofstream out(restart.json, std::ios::app);
    out << nlohmann::json{{"event", "restarts"},
                          {"restarts", restarts},
                          {"max_restarts", options.max_restarts},
                          {"steps_redone", redone},
                          {"exit_code", code},
                          {"attempts", causes}}
               .dump()
        << "\n";
  }
  return code;
}

}  // namespace frugal::apps
