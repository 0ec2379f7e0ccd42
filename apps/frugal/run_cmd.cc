// `frugal run [--np N] [--hostfile F] [--emulate SPEC] -- PROGRAM ARGS...`: starts any program
// (a Python script using frugal.torch, say) on every rank of an MPI job, the way `frugal train`
// starts itself.
//
// In the process the user started, --np N re-runs the same command line under mpirun (or on
// emulated hosts) through the launcher (launcher.h), with its signal forwarding and cleanup, and
// exits with mpirun's code. On each rank (under mpirun, or alone without --np) `frugal run` does
// not use MPI itself: it runs PROGRAM as its child, forwards SIGINT/SIGTERM/SIGHUP to it, and when
// PROGRAM fails by itself (a signal or a non-zero exit, not a stop the rank was sent) prints one
// line naming the rank and how it ended before exiting with the same code, so that mpirun ends
// the job and the line tells which rank was lost.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "commands.h"

namespace frugal::apps {
namespace {

constexpr auto kGrace = std::chrono::seconds(10);

std::string RankOfThisProcess() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    if (const char* value = std::getenv(name)) return value;
  }
  return "0";
}

StatusOr<int> RunOnThisRank(const std::vector<std::string>& command) {
  HeldSignals held;
  SpawnOptions spawn;
  // In mpirun's process group, so that the job's own signals reach the program as well.
  spawn.new_process_group = false;
  FRUGAL_ASSIGN_OR_RETURN(Child child, Child::Spawn(command, spawn));
  FRUGAL_RETURN_IF_ERROR(
      child.Supervise(held, std::chrono::steady_clock::time_point::max(), kGrace));
  if (auto sig = held.received()) return 128 + *sig;
  const CommandResult& result = child.result();
  const int code = ShellExitCode(result);
  if (code != 0) {
    const std::string how = result.term_signal != 0
                                ? fmt::format("was killed by signal {} ({})", result.term_signal,
                                              strsignal(result.term_signal))
                                : fmt::format("exited with code {}", result.exit_code);
    std::fprintf(stderr, "frugal: rank %s: %s %s\n", RankOfThisProcess().c_str(),
                 command.front().c_str(), how.c_str());
    std::fflush(stderr);
  }
  return code;
}

}  // namespace

void AddRunCommand(CLI::App& app, Dispatcher& dispatcher) {
  auto command = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run PROGRAM on every rank (--np N starts them with mpirun): frugal run --np 4 -- "
      "python3 train.py");
  cmd->add_option("program", *command, "The program and its arguments, after --")
      ->required()
      ->type_name("PROGRAM ARGS...");
  cmd->callback([&dispatcher, command] {
    Action action;
    action.name = "run";
    action.run_rank = [command](const GlobalOptions&) { return RunOnThisRank(*command); };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
