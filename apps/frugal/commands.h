// Subcommands of the `frugal` command.
//
// A subcommand is one file that defines one registration function declared here, e.g.
// AddBenchCommand in bench_cmd.cc or AddTrainCommand in train_cmd.cc, and main.cc calls it.
// The function adds a CLI11 subcommand with its flags (stored in objects its callbacks own) and,
// from the subcommand's callback, hands the Dispatcher an Action. main.cc then, for every
// subcommand alike:
//   1. runs `validate` (checks of the flags that CLI11 cannot do: names, combinations); it runs
//      in the process the user started and again on every rank, so it must not depend on the
//      machine it runs on; a failure prints one line and exits 2 before anything is launched;
//   2. runs `check_files` (checks of local paths, e.g. that an output file can be created) in
//      the process the user started, with the same consequence;
//   3. with --np and not under mpirun, refuses fewer ranks than `min_ranks` (one line, exit 2),
//      then re-runs itself under mpirun (launcher.h) and exits with mpirun's code;
//   4. otherwise initialises MPI (a single rank when not under mpirun); rank 0 runs
//      `check_files` again and every rank follows its verdict; every rank compares the world
//      size with `min_ranks` and runs `check_world` (checks that need the world size; every rank
//      must reach the same verdict); a failure of any exits 2 on every rank without aborting the
//      job; then `run` on every rank;
//   5. a rank whose `run` fails prints one line naming its rank and ends the whole job
//      (MpiRuntime::Abort), so no rank waits for it.
// Commands that never use MPI themselves (they start other processes) set `run_local` instead
// of `run`; commands whose ranks start a program that uses MPI set `run_rank`: it runs on each
// rank (after step 3's relaunch, or alone without --np) without initialising MPI.
//
// A measurement of `frugal bench` is a function AddBench<What>Command(CLI::App& bench,
// Dispatcher&) declared here and called from AddBenchCommand; the helpers below (bench_cmd.cc)
// are shared by the subcommands.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frugal/logging.h"
#include "frugal/mpi_transport.h"
#include "frugal/status.h"
#include "frugal/transport.h"
#include "launcher.h"
#include "restarts.h"

namespace CLI {
class App;
}

namespace frugal::apps {

// Flags of the `frugal` command itself, accepted before or after the subcommand.
struct GlobalOptions {
  LaunchOptions launch;
  LogLevel log_level = LogLevel::kWarning;
};

// What `run` gets on each rank.
struct RankContext {
  MpiRuntime& runtime;
  Transport& world;  // over a duplicate of MPI_COMM_WORLD
  Logger logger;     // at --log-level, lines prefixed with the rank
  const GlobalOptions& global;
  bool is_root() const { return world.rank() == 0; }
};

struct Action {
  std::string name;                     // e.g. "bench allreduce", used in messages
  std::function<Status()> validate;     // optional; must not depend on the machine
  std::function<Status()> check_files;  // optional; local paths, checked where rank 0 writes
  std::function<Status(const Transport& world)> check_world;  // optional
  // Fewer ranks (--np N, or the job's size) are refused: "NAME needs at least K ranks".
  int min_ranks = 1;
  std::function<Status(RankContext& context)> run;
  // Instead of `run`, for commands that do not use MPI: returns the exit code.
  std::function<StatusOr<int>(const GlobalOptions& global)> run_local;
  // Instead of `run`, on each rank without MPI: returns the exit code.
  std::function<StatusOr<int>(const GlobalOptions& global)> run_rank;
  // Commands that can continue from a checkpoint after a failure (--max-restarts, restarts.h).
  std::optional<RestartPoint> restart;
  // Optional: how many of the last ranks each want an emulated host of their own under
  // --emulate (a parameter server's servers; emulate_spec.h RanksOfHosts). Called after
  // `validate`.
  std::function<int()> own_hosts;
};

// Receives the Action of the subcommand given on the command line.
class Dispatcher {
 public:
  void Select(Action action) { action_ = std::move(action); }
  const std::optional<Action>& selected() const { return action_; }

 private:
  std::optional<Action> action_;
};

// `frugal bench ...` (bench_cmd.cc).
void AddBenchCommand(CLI::App& app, Dispatcher& dispatcher);
void AddBenchPingPongCommand(CLI::App& bench, Dispatcher& dispatcher);
void AddBenchAllreduceCommand(CLI::App& bench, Dispatcher& dispatcher);
void AddBenchExchangeCommand(CLI::App& bench, Dispatcher& dispatcher);
void AddBenchRoundCommand(CLI::App& bench, Dispatcher& dispatcher);
void AddBenchCompressCommand(CLI::App& bench, Dispatcher& dispatcher);  // bench_compress.cc
void AddBenchPolarCommand(CLI::App& bench, Dispatcher& dispatcher);     // bench_polar.cc
// bench_contention.cc, built when frugal_torch is.
void AddBenchContentionCommand(CLI::App& bench, Dispatcher& dispatcher);

// For Action::check_files: kInvalidArgument when --json PATH cannot be written where it points
// (its directory does not exist, or PATH is a directory); Ok for an empty path.
Status CheckJsonPath(const std::string& path);
// Rank 0 prints `table` to stdout and, with a non-empty `json_path`, writes `records` there as
// JSON lines; the other ranks do nothing.
Status PublishBench(const RankContext& context, const std::string& table,
                    const std::vector<nlohmann::json>& records, const std::string& json_path);

// `frugal sweep FILE.toml` (sweep_cmd.cc): runs grids of configurations, renders tables/plots.
void AddSweepCommand(CLI::App& app, Dispatcher& dispatcher);

// `frugal run -- PROGRAM ARGS...` (run_cmd.cc): PROGRAM on every rank.
void AddRunCommand(CLI::App& app, Dispatcher& dispatcher);

// `frugal train ...` (train_cmd.cc, built when frugal_torch is).
void AddTrainCommand(CLI::App& app, Dispatcher& dispatcher);

// `frugal cost ...` (cost_cmd.cc, built when frugal_torch is): the architecture cost model.
void AddCostCommand(CLI::App& app, Dispatcher& dispatcher);

// `frugal simulate ...` (simulate_cmd.cc, built when frugal_torch is): the step simulator.
void AddSimulateCommand(CLI::App& app, Dispatcher& dispatcher);

}  // namespace frugal::apps
