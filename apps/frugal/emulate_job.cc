#include "emulate_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "emulated_network.h"

namespace frugal::apps {
namespace fs = std::filesystem;
using std::chrono::steady_clock;

StatusOr<EmulateSpec> ValidateEmulateFlag(std::string_view text, int np, bool has_hostfile,
                                          int alone) {
  FRUGAL_ASSIGN_OR_RETURN(EmulateSpec spec, ParseEmulateSpec(text));
  if (np <= 0) {
    return InvalidArgumentError("--emulate needs --np N (the number of ranks to start)");
  }
  if (has_hostfile) {
    return InvalidArgumentError("--emulate and --hostfile exclude each other");
  }
  FRUGAL_RETURN_IF_ERROR(RanksOfHosts(spec, np, alone).status());
  FRUGAL_RETURN_IF_ERROR(CheckEmulationSupport());
  return spec;
}

std::vector<std::string> BuildMpirunCommand(const EmulatedJob& job, const fs::path& hostfile,
                                            const fs::path& agent,
                                            const std::vector<int>& ranks_of_hosts) {
  std::string subnet(kEmulateSubnet);
  const bool even = std::adjacent_find(ranks_of_hosts.begin(), ranks_of_hosts.end(),
                                       std::not_equal_to<>()) == ranks_of_hosts.end();
  // Even hosts: ppr places the same number on each. Otherwise each host's slots in the hostfile
  // are its ranks, and mpirun fills them in host order.
  const std::string map_by =
      even && !ranks_of_hosts.empty() ? fmt::format("ppr:{}:node", ranks_of_hosts.front()) : "slot";
  std::vector<std::string> cmd = {
      "mpirun",
      "--hostfile",
      hostfile.string(),
      "-np",
      std::to_string(job.np),
      "--map-by",
      map_by,
      // Every emulated host believes it owns the machine's cores; binding would stack ranks.
      "--bind-to",
      "none",
      "--mca",
      "plm_rsh_agent",
      agent.string(),
      "--mca",
      "plm_rsh_no_tree_spawn",
      "1",
      "--mca",
      "pml",
      "ob1",
      "--mca",
      "btl",
      "tcp,vader,self",
      "--mca",
      "btl_tcp_if_include",
      subnet,
      "--mca",
      "oob_tcp_if_include",
      subnet,
  };
  cmd.insert(cmd.end(), job.mpirun_options.begin(), job.mpirun_options.end());
  cmd.insert(cmd.end(), job.command.begin(), job.command.end());
  return cmd;
}

StatusOr<int> RunEmulatedJob(const EmulatedJob& job, const Logger& logger) {
  FRUGAL_CHECK(!job.command.empty(), "RunEmulatedJob without a command");
  FRUGAL_ASSIGN_OR_RETURN(std::vector<int> ranks_of_hosts,
                          RanksOfHosts(job.spec, job.np, job.alone));
  auto deadline = steady_clock::now() + job.timeout;
  HeldSignals held;
  FRUGAL_ASSIGN_OR_RETURN(auto network,
                          EmulatedNetwork::Create(NicRates(job.spec), logger, job.spec.links));
  auto interrupted = [&](int sig) {
    logger.Warning(fmt::format("interrupted by {}; the emulated network {} was removed",
                               strsignal(sig), network->tag()));
    return 128 + sig;
  };
  if (auto sig = held.Pending()) {
    FRUGAL_RETURN_IF_ERROR(network->Destroy());
    return interrupted(*sig);
  }
  FRUGAL_ASSIGN_OR_RETURN(fs::path hostfile, network->WriteHostfile(ranks_of_hosts));
  FRUGAL_ASSIGN_OR_RETURN(fs::path agent, network->WriteRshAgent());
  std::vector<std::string> cmd = BuildMpirunCommand(job, hostfile, agent, ranks_of_hosts);
  logger.Info(fmt::format(
      "emulating {} hosts, rank(s) per host {}, NIC {} each way{}, TCP {}{} ({}): {}",
      job.spec.hosts, fmt::join(ranks_of_hosts, "/"), FormatNicRates(job.spec),
      job.spec.links.mtu > 0 ? fmt::format(", MTU {}", job.spec.links.mtu) : "", job.spec.links.tcp,
      job.spec.links.slow_start_after_idle ? "" : " without slow start after idle", network->tag(),
      ShellQuote(cmd)));
  SpawnOptions spawn;
  spawn.netns_path = EmulatedNetwork::NamespacePath(network->control_namespace());
  spawn.extra_env = job.extra_env;
  auto child = Child::Spawn(cmd, spawn);
  if (!child.ok()) {
    FRUGAL_RETURN_IF_ERROR(network->Destroy());
    return child.status().Annotate("--emulate: starting mpirun");
  }
  Status supervised = child->Supervise(held, deadline);
  int code = ShellExitCode(child->result());
  FRUGAL_RETURN_IF_ERROR(network->Destroy());
  if (auto sig = held.received()) return interrupted(*sig);
  if (!supervised.ok()) {
    logger.Error(supervised.Annotate("--emulate").ToString());
    return code == 0 ? 1 : code;
  }
  return code;
}

}  // namespace frugal::apps
