// The `frugal` command: parses the command line, then launches or runs the selected subcommand
// as described in commands.h. Exit codes: 0 success, 1 failure at run time, 2 bad command line.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "emulate_job.h"
#include "frugal/collectives.h"
#include "launcher.h"

namespace frugal::apps {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

void PrintError(std::string_view message) {
  std::fprintf(stderr, "frugal: %s\n", OneLine(std::string(message)).c_str());
}

// The refusal of a command that needs more than `ranks` ranks (Action::min_ranks).
std::string TooFewRanks(const Action& action, int ranks) {
  return fmt::format("{} needs at least {} ranks (--np {}), not {}", action.name, action.min_ranks,
                     action.min_ranks, ranks);
}

int ExitCodeFor(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound
             ? kExitUsage
             : kExitFailure;
}

// One line for a command-line error. A missing subcommand names the command and its choices.
std::string ParseErrorMessage(CLI::App& app, const CLI::ParseError& e) {
  // The deepest subcommand that was given.
  CLI::App* command = &app;
  std::string path = "frugal";
  while (!command->get_subcommands().empty()) {
    command = command->get_subcommands().front();
    path += " " + command->get_name();
  }
  const bool missing_subcommand = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
                                  command->get_require_subcommand_min() > 0 &&
                                  command->get_subcommands().empty();
  if (!missing_subcommand) return fmt::format("{} (see '{} --help')", e.what(), path);
  std::string choices;
  for (const CLI::App* sub : command->get_subcommands({})) {
    choices += (choices.empty() ? "" : ", ") + sub->get_name();
  }
  std::vector<std::string> rest = app.remaining(true);
  if (rest.empty()) {
    return fmt::format("'{}' needs a subcommand (accepted: {})", path, choices);
  }
  if (rest.front().starts_with("-")) {
    return fmt::format("'{}' needs a subcommand (accepted: {}); unexpected argument '{}'", path,
                       choices, rest.front());
  }
  return fmt::format("'{}' has no subcommand '{}' (accepted: {})", path, rest.front(), choices);
}

// Runs the action on this rank of the MPI job (or as the only rank).
int RunOnRanks(const Action& action, const GlobalOptions& global, int argc, char** argv) {
  auto runtime = MpiRuntime::Init(&argc, &argv);
  if (!runtime.ok()) {
    PrintError(runtime.status().ToString());
    return kExitFailure;
  }
  MpiRuntime& mpi = **runtime;
  const int rank = mpi.world_rank();
  const int size = mpi.world_size();
  auto fail = [&](const std::string& message) -> int {
    std::fprintf(stderr, "frugal: rank %d: %s\n", rank, OneLine(message).c_str());
    std::fflush(stderr);
    if (size > 1) mpi.Abort(kExitFailure);
    return kExitFailure;
  };
  if (global.launch.np > 0 && global.launch.np != size) {
    if (rank == 0) {
      PrintError(fmt::format("--np {} but the job has {} ranks", global.launch.np, size));
    }
    return kExitUsage;
  }
  auto world = mpi.World();
  if (!world.ok()) return fail(world.status().ToString());
  Transport& transport = **world;
  if (action.check_files && RunningUnderMpi()) {
    // Rank 0 checks the paths it will write; every rank follows its verdict.
    Status status = rank == 0 ? action.check_files() : Status::Ok();
    std::vector<std::byte> verdict = {std::byte{status.ok() ? uint8_t{0} : uint8_t{1}}};
    Status shared = Broadcast(transport, std::span<std::byte>(verdict), 0, CollectiveOptions{});
    if (!shared.ok()) return fail(shared.ToString());
    if (verdict[0] != std::byte{0}) {
      if (rank == 0) PrintError(status.message());
      return rank == 0 ? ExitCodeFor(status) : kExitUsage;
    }
  }
  if (size < action.min_ranks) {
    if (rank == 0) PrintError(TooFewRanks(action, size));
    return kExitUsage;
  }
  if (action.check_world) {
    Status status = action.check_world(transport);
    if (!status.ok()) {
      if (rank == 0) PrintError(status.message());
      return ExitCodeFor(status);
    }
  }
  RankContext context{mpi, transport, Logger(global.log_level, size > 1 ? rank : -1), global};
  try {
    Status status = action.run(context);
    if (!status.ok()) return fail(fmt::format("{}: {}", action.name, status.ToString()));
  } catch (const std::exception& e) {
    return fail(fmt::format("{}: {}", action.name, e.what()));
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app("frugal: communication-efficient data-parallel deep learning", "frugal");
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions global;
  AddLaunchOptions(app, global.launch);
  std::string log_level = "warning";
  app.add_option("--log-level", log_level, "debug, info, warning, error or off")
      ->type_name("LEVEL");

  Dispatcher dispatcher;
  AddBenchCommand(app, dispatcher);
  AddSweepCommand(app, dispatcher);
  AddRunCommand(app, dispatcher);
#ifdef FRUGAL_HAVE_TRAIN_COMMAND
  AddTrainCommand(app, dispatcher);
  AddCostCommand(app, dispatcher);
  AddSimulateCommand(app, dispatcher);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    PrintError(ParseErrorMessage(app, e));
    return kExitUsage;
  }
  auto level = ParseLogLevel(log_level);
  if (!level.ok()) {
    PrintError(level.status().message());
    return kExitUsage;
  }
  global.log_level = *level;
  if (!dispatcher.selected()) {
    PrintError("nothing to do (see frugal --help)");
    return kExitUsage;
  }
  const Action& action = *dispatcher.selected();
  if (action.validate) {
    Status status = action.validate();
    if (!status.ok()) {
      PrintError(status.message());
      return ExitCodeFor(status);
    }
  }
  if (action.check_files && !RunningUnderMpi()) {
    Status status = action.check_files();
    if (!status.ok()) {
      PrintError(status.message());
      return ExitCodeFor(status);
    }
  }
  if (!global.launch.emulate.empty() && !RunningUnderMpi()) {
    // --emulate (emulate_job.h): a bad spec, a bad combination or no root/namespaces is a usage
    // error.
    if (action.own_hosts) global.launch.own_hosts = action.own_hosts();
    auto spec = ValidateEmulateFlag(global.launch.emulate, global.launch.np,
                                    !global.launch.hostfile.empty(), global.launch.own_hosts);
    if (!spec.ok()) {
      PrintError(spec.status().message());
      return kExitUsage;
    }
  }
  const Logger logger(global.log_level);
  if (action.run_local) {
    if (RunningUnderMpi()) {
      PrintError(
          fmt::format("'{}' starts its own processes; do not run it under mpirun", action.name));
      return kExitUsage;
    }
    auto code = action.run_local(global);
    if (!code.ok()) {
      PrintError(fmt::format("{}: {}", action.name, code.status().ToString()));
      return ExitCodeFor(code.status());
    }
    return *code;
  }
  if (global.launch.max_restarts > 0) {
    // The launcher restarts the job: it must start mpirun itself, and the command must save
    // checkpoints to resume from.
    if (global.launch.np <= 0 || RunningUnderMpi()) {
      PrintError("--max-restarts needs --np N: frugal starts mpirun itself to restart the job");
      return kExitUsage;
    }
    if (!action.restart || action.restart->checkpoint_dir.empty()) {
      PrintError(
          fmt::format("--max-restarts needs a command that saves checkpoints ('{}' "
                      "with --checkpoint-dir)",
                      action.name));
      return kExitUsage;
    }
  }
  if (global.launch.np > 0 && !RunningUnderMpi()) {
    if (global.launch.np < action.min_ranks) {
      PrintError(TooFewRanks(action, global.launch.np));
      return kExitUsage;
    }
    if (!global.launch.hostfile.empty() &&
        !std::filesystem::is_regular_file(global.launch.hostfile)) {
      PrintError(fmt::format("--hostfile {}: no such file", global.launch.hostfile));
      return kExitUsage;
    }
    auto code = global.launch.max_restarts > 0
                    ? RunWithRestarts(global.launch, *action.restart, argc, argv, logger)
                    : RelaunchUnderMpirun(global.launch, argc, argv, logger);
    if (!code.ok()) {
      PrintError(code.status().ToString());
      return ExitCodeFor(code.status());  // 2 for what the command line asked wrongly
    }
    return *code;
  }
  if (!global.launch.hostfile.empty() && !RunningUnderMpi()) {
    PrintError("--hostfile needs --np");
    return kExitUsage;
  }
  if (action.run_rank) {
    auto code = action.run_rank(global);
    if (!code.ok()) {
      PrintError(fmt::format("{}: {}", action.name, code.status().ToString()));
      return ExitCodeFor(code.status());
    }
    return *code;
  }
  return RunOnRanks(action, global, argc, argv);
}

}  // namespace
}  // namespace frugal::apps

int main(int argc, char** argv) {
  try {
    return frugal::apps::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "frugal: %s\n", e.what());
    return 1;
  }
}
