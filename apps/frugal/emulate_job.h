// Running an MPI job on an emulated network (emulated_network.h): `--emulate`.
//
// `--emulate hosts=H,nic=RATE[,ranks-per-host=R]` runs the ranks of a job on H emulated hosts,
// each with a NIC limited to RATE in both directions (emulate_spec.h); mpirun runs in the
// network's control namespace.
//
// mpirun starts one orted per emulated host through a generated `plm_rsh_agent` script that runs
// `ip netns exec HOST unshare --uts sh -c 'hostname HOST; exec ...'`: each emulated host gets its
// own hostname, so Open MPI uses shared memory only between ranks of the same emulated host and
// TCP (bound to the emulated subnet) between hosts.
//
// Not thread safe: meant for the main thread of the `frugal` command.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "child_process.h"
#include "emulate_spec.h"
#include "frugal/logging.h"
#include "frugal/status.h"

namespace frugal::apps {

// For the launcher: parses `--emulate TEXT` and checks it against --np, the ranks that want a
// host of their own (`alone`, RanksOfHosts) and --hostfile (kInvalidArgument) and against this
// machine (CheckEmulationSupport, kFailedPrecondition). Either failure is a usage error of the
// command line (one line, exit code 2).
StatusOr<EmulateSpec> ValidateEmulateFlag(std::string_view text, int np, bool has_hostfile,
                                          int alone = 0);

struct EmulatedJob {
  EmulateSpec spec;
  int np = 0;
  // The last `alone` ranks each run on an emulated host of their own (RanksOfHosts).
  int alone = 0;
  // Run on every rank: the program and its arguments.
  std::vector<std::string> command;
  // Extra mpirun options placed before the command (e.g. {"-x", "FRUGAL_SEED"}).
  std::vector<std::string> mpirun_options;
  // Added to mpirun's environment (which the ranks inherit), e.g. OMPI_ALLOW_RUN_AS_ROOT.
  Environment extra_env;
  // The whole job, setup included, is ended after this.
  std::chrono::seconds timeout{std::chrono::hours(24)};
};

// The mpirun command line for `job` with the network's hostfile and rsh agent, `ranks_of_hosts`
// ranks on each host (RanksOfHosts; the hostfile gives each host as many slots) (pure).
std::vector<std::string> BuildMpirunCommand(const EmulatedJob& job,
                                            const std::filesystem::path& hostfile,
                                            const std::filesystem::path& agent,
                                            const std::vector<int>& ranks_of_hosts);

// Creates the emulated network, runs the job through mpirun inside it and removes everything
// again, also when the job fails, times out or SIGINT/SIGTERM/SIGHUP arrives (the signal is
// forwarded to mpirun first). Returns the exit code to exit with: mpirun's, or 128 + signal when
// interrupted. Setup failures are returned as a Status (kFailedPrecondition without privileges or
// kernel support, kInvalidArgument for a bad spec).
StatusOr<int> RunEmulatedJob(const EmulatedJob& job, const Logger& logger);

}  // namespace frugal::apps
