// The launcher shared by every subcommand of `frugal`: with `--np N`, a `frugal` started by hand
// re-runs itself under `mpirun` and returns mpirun's exit code; under mpirun (or without --np)
// the process is a rank of the job.
//
// Only the command-line layer reads the environment: RunningUnderMpi() looks at the variables
// Open MPI and PMIx set for every rank.
#pragma once

#include <string>
#include <vector>

#include "frugal/logging.h"
#include "frugal/status.h"

namespace CLI {
class App;
}

namespace frugal::apps {

struct LaunchOptions {
  int np = 0;            // ranks to start; 0: do not start mpirun
  std::string hostfile;  // passed to mpirun as --hostfile
  // --emulate hosts=H,nic=RATE[,ranks-per-host=R]: run the ranks on emulated hosts (emulate_job.h).
  std::string emulate;
  // Under --emulate: how many of the last ranks each run on a host of their own (not a flag: the
  // command says, Action::own_hosts).
  int own_hosts = 0;
  // --max-restarts N: relaunch a failed job from its last checkpoint, at most N times
  // (restarts.h).
  int max_restarts = 0;
};

// Adds --np, --hostfile, --emulate and --max-restarts to `app` (global flags, accepted after a
// subcommand too).
void AddLaunchOptions(CLI::App& app, LaunchOptions& options);

// True when this process is a rank started by mpirun (OMPI_COMM_WORLD_SIZE or PMIX_RANK set).
bool RunningUnderMpi();

// This executable (resolved through /proc/self/exe) followed by argv[1..].
StatusOr<std::vector<std::string>> SelfCommand(int argc, char** argv);

// mpirun -np N --oversubscribe --mca pml ob1 --mca btl tcp,vader,self [--hostfile F] COMMAND...
std::vector<std::string> MpirunCommand(const LaunchOptions& options,
                                       const std::vector<std::string>& command);

// SelfCommand + MpirunCommand, run by RunSupervised (child_process.h) with
// OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 added to the environment: SIGINT, SIGTERM and SIGHUP sent to
// this process are forwarded to mpirun's process group, which is killed if it has not ended 10 s
// later. Returns the exit code a shell would report (128 + the signal when interrupted).
StatusOr<int> RelaunchUnderMpirun(const LaunchOptions& options, int argc, char** argv,
                                  const Logger& logger);

}  // namespace frugal::apps
