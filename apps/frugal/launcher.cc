// Re-running `frugal` under mpirun.
//
// RelaunchUnderMpirun builds `mpirun -np N --oversubscribe --mca pml ob1 --mca btl
// tcp,vader,self [--hostfile F] /path/to/frugal ARGS...` where the path comes from
// /proc/self/exe (mpirun's daemons would resolve /proc/self/exe to themselves) and ARGS are this
// process's arguments unchanged: the ranks parse the same flags, see that they run under MPI and
// do the work instead of launching again.
//
// The child (mpirun) is started and supervised by RunSupervised (child_process.h), like every
// child of the command: in a process group of its own, so that a terminal's Ctrl-C reaches only
// this process, which forwards it (or a SIGTERM/SIGHUP sent to it) to the child's group once and
// kills the group if it has not ended kJobKillGrace later.
#include "launcher.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "child_process.h"
#include "emulate_job.h"
#include "emulate_spec.h"

namespace frugal::apps {

void AddLaunchOptions(CLI::App& app, LaunchOptions& options) {
  app.add_option("--np", options.np,
                 "Start N ranks with mpirun (when not already running under mpirun)")
      ->check(CLI::Range(1, 1 << 20))
      ->type_name("N");
  // Not checked by CLI11: the ranks parse the same flags on hosts that need not have the file.
  app.add_option("--hostfile", options.hostfile, "mpirun hostfile, to run across machines")
      ->type_name("FILE");
  // --emulate: see emulate_job.h.
  app.add_option("--emulate", options.emulate,
                 fmt::format("Run the --np ranks on emulated hosts with rate-limited NICs "
                             "(needs root), e.g. hosts=4,nic=100mbit{}",
                             kEmulateOptionalKeys))
      ->type_name("SPEC");
  app.add_option("--max-restarts", options.max_restarts,
                 "With --np: when the job fails, relaunch it from its last checkpoint "
                 "(--checkpoint-dir), at most N times")
      ->check(CLI::Range(0, 1000))
      ->type_name("N");
}

bool RunningUnderMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

StatusOr<std::vector<std::string>> SelfCommand(int argc, char** argv) {
  std::string exe(4096, '\0');
  ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n <= 0) return IoError(fmt::format("readlink /proc/self/exe: {}", std::strerror(errno)));
  exe.resize(static_cast<size_t>(n));
  std::vector<std::string> command = {exe};
  for (int i = 1; i < argc; ++i) command.emplace_back(argv[i]);
  return command;
}

std::vector<std::string> MpirunCommand(const LaunchOptions& options,
                                       const std::vector<std::string>& command) {
  std::vector<std::string> argv = {"mpirun",
                                   "-np",
                                   std::to_string(options.np),
                                   "--oversubscribe",
                                   "--mca",
                                   "pml",
                                   "ob1",
                                   "--mca",
                                   "btl",
                                   "tcp,vader,self"};
  if (!options.hostfile.empty()) {
    argv.emplace_back("--hostfile");
    argv.push_back(options.hostfile);
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

StatusOr<int> RelaunchUnderMpirun(const LaunchOptions& options, int argc, char** argv,
                                  const Logger& logger) {
  FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> self, SelfCommand(argc, argv));
  if (!options.emulate.empty()) {
    // --emulate: the emulated network and its own mpirun command line (emulate_job.h).
    EmulatedJob job;
    FRUGAL_ASSIGN_OR_RETURN(job.spec, ParseEmulateSpec(options.emulate));
    job.np = options.np;
    job.alone = options.own_hosts;
    job.command = self;
    job.extra_env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
    return RunEmulatedJob(job, logger);
  }
  std::vector<std::string> command = MpirunCommand(options, self);
  std::string line;
  for (const auto& part : command) line += (line.empty() ? "" : " ") + part;
  logger.Info(fmt::format("starting: {}", line));
  SpawnOptions spawn;
  spawn.extra_env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  return RunSupervised(command, spawn, kJobKillGrace);
}

}  // namespace frugal::apps
