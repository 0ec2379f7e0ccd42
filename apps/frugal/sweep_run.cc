// Running a sweep.
//
// RunSweep() reads results.jsonl, keeps the points whose key has no completed record
// (PointsToRun), and runs them one at a time (RunPoint): `frugal <command> <flags> --json
// runs/<id>.jsonl`, output to logs/<id>.log, under a per-run deadline, with SIGINT/SIGTERM held
// and forwarded to the run (Child::Supervise). A finished run's JSON lines are folded into one
// record (epochs + summary) appended to results.jsonl before the next point starts; a run stopped
// by a signal is not recorded. Finally the report is rendered from every completed record of the
// current points.
#include "sweep_run.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>

#include "sweep_report.h"
#include "sweep_results.h"

namespace frugal::apps {
namespace fs = std::filesystem;

namespace {

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string LastNonEmptyLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

std::vector<std::string> CommandOf(const SweepPoint& p, const SweepRunOptions& options) {
  std::vector<std::string> argv = options.self;
  argv.insert(argv.end(), p.args.begin(), p.args.end());
  return argv;
}

void PrintDryRun(const std::vector<SweepPoint>& points, const SweepRunOptions& options) {
  for (const auto& p : points) {
    std::printf("%3d  %s\n", p.index, ShellQuote(CommandOf(p, options)).c_str());
  }
  std::printf("%zu points; results would go to %s\n", points.size(),
              (options.out_dir / "results.jsonl").c_str());
}

Status MakeOutputDirectories(const fs::path& out_dir) {
  for (const char* sub : {"runs", "logs"}) {
    std::error_code ec;
    fs::create_directories(out_dir / sub, ec);
    if (ec) {
      return IoError(fmt::format("cannot create {}: {}", (out_dir / sub).string(), ec.message()));
    }
  }
  return Status::Ok();
}

// Renders the report of everything recorded and picks the exit code.
StatusOr<int> Finish(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                     const SweepRunOptions& options, int failed, std::optional<int> interrupted,
                     const Logger& logger) {
  FRUGAL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records,
                          ReadResults(options.out_dir / "results.jsonl", logger));
  auto files = RenderReport(spec, points, records, options.out_dir, logger);
  if (!files.ok()) {
    logger.Error(files.status().Annotate("rendering the report").ToString());
  } else {
    std::fprintf(stderr, "table: %s\n", files->table.c_str());
    for (const auto& plot : files->plots) std::fprintf(stderr, "plot: %s\n", plot.c_str());
  }
  if (interrupted) return 128 + *interrupted;
  if (!files.ok()) return 1;
  return failed > 0 ? 1 : 0;
}

}  // namespace

std::vector<const SweepPoint*> PointsToRun(const std::vector<SweepPoint>& points,
                                           const std::vector<nlohmann::json>& records,
                                           bool retry_failed) {
  std::map<std::string, const nlohmann::json*> last_by_key;
  for (const auto& r : records) last_by_key[r["key"].get<std::string>()] = &r;
  std::vector<const SweepPoint*> todo;
  for (const auto& p : points) {
    auto it = last_by_key.find(p.key);
    if (it != last_by_key.end() && (IsCompleted(*it->second) || !retry_failed)) continue;
    todo.push_back(&p);
  }
  return todo;
}

StatusOr<PointRun> RunPoint(const SweepSpec& spec, const SweepPoint& p,
                            const SweepRunOptions& options, HeldSignals& held) {
  const fs::path run_json = options.out_dir / "runs" / (p.id + ".jsonl");
  const fs::path log = options.out_dir / "logs" / (p.id + ".log");
  std::error_code ec;
  fs::remove(run_json, ec);
  fs::remove(log, ec);
  std::vector<std::string> argv = CommandOf(p, options);
  argv.push_back("--json=" + run_json.string());
  SpawnOptions spawn;
  spawn.output_path = log.string();
  const auto start = std::chrono::steady_clock::now();
  FRUGAL_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, spawn));
  const Status supervised = child.Supervise(held, start + spec.timeout);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PointRun run;
  if (held.received()) {
    run.interrupted = held.received();
    return run;
  }
  nlohmann::json& record = run.record;
  record["key"] = p.key;
  record["id"] = p.id;
  record["sweep"] = spec.name;
  record["index"] = p.index;
  record["point"] = p.PointJson();
  record["command"] = argv;
  record["exit_code"] = ShellExitCode(child.result());
  record["wall_seconds"] = wall;
  record["finished"] = NowIso();
  record["log"] = fs::relative(log, options.out_dir).string();
  // Why the point failed, empty when it did not: the deadline, the run's own exit code with the
  // last line of its log, or its JSON.
  if (!supervised.ok()) {
    run.error = supervised.message();
  } else if (child.result().exit_code != 0) {
    run.error =
        fmt::format("exit code {}: {}", ShellExitCode(child.result()), LastNonEmptyLine(log));
  } else if (Status read = FoldRunJson(run_json, record); !read.ok()) {
    run.error = read.message();
  }
  if (!run.error.empty()) {
    if (record["exit_code"].get<int>() == 0) record["exit_code"] = 1;
    record["error"] = run.error;
  }
  run.wall_seconds = wall;
  run.log = log;
  return run;
}

StatusOr<int> RunSweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                       const SweepRunOptions& options, const Logger& logger) {
  if (options.dry_run) {
    PrintDryRun(points, options);
    return 0;
  }
  const fs::path results_path = options.out_dir / "results.jsonl";
  FRUGAL_RETURN_IF_ERROR(MakeOutputDirectories(options.out_dir));
  FRUGAL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records, ReadResults(results_path, logger));
  const std::vector<const SweepPoint*> todo = PointsToRun(points, records, options.retry_failed);
  std::fprintf(stderr, "sweep %s: %zu points, %zu already in %s, %zu to run\n", spec.name.c_str(),
               points.size(), points.size() - todo.size(), results_path.c_str(), todo.size());

  int failed = 0;
  std::optional<int> interrupted;
  {
    HeldSignals held;
    for (size_t n = 0; n < todo.size(); ++n) {
      const SweepPoint& p = *todo[n];
      std::fprintf(stderr, "[%zu/%zu] point %d: %s\n", n + 1, todo.size(), p.index,
                   p.Describe().c_str());
      FRUGAL_ASSIGN_OR_RETURN(PointRun run, RunPoint(spec, p, options, held));
      if (run.interrupted) {
        interrupted = run.interrupted;
        std::fprintf(stderr, "interrupted; point %d is not recorded\n", p.index);
        break;
      }
      if (!run.error.empty()) {
        ++failed;
        std::fprintf(stderr, "  failed: %s (log: %s)\n", run.error.c_str(), run.log.c_str());
      } else {
        std::fprintf(stderr, "  done in %.1f s\n", run.wall_seconds);
      }
      FRUGAL_RETURN_IF_ERROR(AppendResult(results_path, run.record));
    }
  }
  return Finish(spec, points, options, failed, interrupted, logger);
}

}  // namespace frugal::apps
