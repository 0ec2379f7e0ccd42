#include "emulated_network.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

#include "child_process.h"
#include "emulate_spec.h"
#include "tcp_allowance.h"

namespace frugal::apps {
namespace fs = std::filesystem;

/*
 * Emulated network layout (one run, tag T = frg-<pid>-<k>):
 *
 *   namespace T-c (control)             namespace T-h<i> (emulated host i, one per host)
 *   +------------------------------+    +------------------------------------+
 *   | mpirun, rsh agent            |    | orted + ranks of host i,           |
 *   | br0 10.213.0.254/24          |    | own UTS namespace, hostname T-h<i> |
 *   |  +- h<i> [tbf: rate_i] ------+----+-- eth0 [tbf: rate_i] 10.213.0.<i+1>|
 *   +------------------------------+    +------------------------------------+
 *
 * What host i sends leaves through eth0, shaped by eth0's token bucket; what it receives leaves
 * the bridge through h<i>, shaped by h<i>'s bucket. A transfer i -> j therefore passes both i's
 * upstream and j's downstream limit, like a full-duplex NIC on a non-blocking switch: with hosts of
 * different rates, the slower of the two NICs sets the pace. Deleting a
 * namespace destroys the interfaces in it and, with a veth, its peer; so Destroy() only has to
 * kill what still runs in the namespaces and delete them.
 *
 */

namespace {

Status ProbeEmulationSupport() {
  if (::geteuid() != 0) {
    return FailedPreconditionError(
        "--emulate needs root: it creates network namespaces, veth pairs and tc qdiscs");
  }
  for (const char* tool : {"ip", "tc", "unshare", "sysctl"}) {
    RunCommandOptions options;
    options.timeout = std::chrono::milliseconds(5000);
    auto r = RunCommand({tool, "-V"}, options);
    if (!r.ok()) {
      return FailedPreconditionError(
          fmt::format("--emulate needs '{}' (Debian packages iproute2, util-linux, procps): {}",
                      tool, r.status().message()));
    }
  }
  if (!fs::exists("/proc/self/ns/net") || !fs::exists("/proc/self/ns/uts")) {
    return FailedPreconditionError(
        "--emulate needs network and UTS namespaces, which this kernel does not offer");
  }
  return Status::Ok();
}

}  // namespace

// Probed once per process: the answer does not change while it runs, and `frugal sweep
// --dry-run` checks every point of a sweep (each probe forks three tools from a large process).
Status CheckEmulationSupport() {
  static const Status support = ProbeEmulationSupport();
  return support;
}

EmulatedNetwork::EmulatedNetwork(std::string tag, std::vector<std::uint64_t> rates,
                                 EmulatedLinks links, const Logger& logger)
    : tag_(std::move(tag)),
      control_(tag_ + "-c"),
      rates_(std::move(rates)),
      links_(std::move(links)),
      state_dir_(fs::path(kEmulateStateRoot) / tag_),
      logger_(logger) {}

EmulatedNetwork::~EmulatedNetwork() {
  Status s = Destroy();
  if (!s.ok()) logger_.Error(s.ToString());
}

StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(
    int hosts, std::uint64_t nic_bits_per_second, const Logger& logger) {
  FRUGAL_CHECK(hosts >= 1 && hosts <= kMaxEmulatedHosts, "hosts = ", hosts);
  return Create(std::vector<std::uint64_t>(static_cast<size_t>(hosts), nic_bits_per_second),
                logger);
}

StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(
    const std::vector<std::uint64_t>& nic_bits_per_second, const Logger& logger,
    const EmulatedLinks& links) {
  const int hosts = static_cast<int>(nic_bits_per_second.size());
  FRUGAL_CHECK(hosts >= 1 && hosts <= kMaxEmulatedHosts, "hosts = ", hosts);
  for (std::uint64_t rate : nic_bits_per_second) {
    FRUGAL_CHECK(rate >= kMinNicBitsPerSecond && rate <= kMaxNicBitsPerSecond, "rate = ", rate);
  }
  FRUGAL_RETURN_IF_ERROR(CheckEmulationSupport());
  FRUGAL_ASSIGN_OR_RETURN(auto lock, StateLock::Acquire());
  FRUGAL_RETURN_IF_ERROR(RemoveLeftoversLocked(logger).status());
  FRUGAL_RETURN_IF_ERROR(RestoreLeftAllowance(kEmulateStateRoot, logger));

  // A fresh tag: this process may run several networks one after another (or at once).
  long pid = ::getpid();
  std::string tag;
  for (int k = 0;; ++k) {
    tag = fmt::format("frg-{}-{}", pid, k);
    if (!fs::exists(fs::path(kEmulateStateRoot) / tag) && !fs::exists(NamespacePath(tag + "-c"))) {
      break;
    }
  }
  FRUGAL_CHECK(links.mtu == 0 || (links.mtu >= kMinEmulatedMtu && links.mtu <= kMaxEmulatedMtu),
               "mtu = ", links.mtu);
  std::unique_ptr<EmulatedNetwork> network(
      new EmulatedNetwork(tag, nic_bits_per_second, links, logger));
  std::error_code ec;
  fs::create_directories(network->state_dir_, ec);
  if (ec) {
    return IoError(fmt::format("cannot create {}: {}", network->state_dir_.string(), ec.message()));
  }
  FRUGAL_RETURN_IF_ERROR(WriteOwnerRecord(network->state_dir_));
  Status built = network->Build();
  if (!built.ok()) {
    Status destroyed = network->Destroy();
    if (!destroyed.ok()) logger.Error(destroyed.ToString());
    return built.Annotate("--emulate: creating the emulated network");
  }
  return network;
}

Status EmulatedNetwork::Build() {
  const int hosts = static_cast<int>(rates_.size());
  const std::string& c = control_;
  auto in_ns_failed = [](const Status& s) {
    return FailedPreconditionError(
        fmt::format("network namespaces are not usable here: {}", s.message()));
  };
  Status created = RunChecked({"ip", "netns", "add", c});
  if (!created.ok()) return in_ns_failed(created);
  namespaces_.push_back(c);
  FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "set", "lo", "up"}));
  FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "add", "br0", "type", "bridge"}));
  FRUGAL_RETURN_IF_ERROR(
      RunChecked({"ip", "-n", c, "addr", "add", control_address() + "/24", "dev", "br0"}));
  FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "set", "br0", "up"}));
  // Widens the machine's allowed congestion controls while the namespaces take theirs, if it must.
  TcpAllowance allowance(kEmulateStateRoot, logger_);
  FRUGAL_RETURN_IF_ERROR(SetTcp(c, allowance));

  for (int i = 0; i < hosts; ++i) {
    const TbfParameters tbf = TbfFor(rates_[static_cast<size_t>(i)], links_.mtu);
    const std::string rate = fmt::format("{}bit", rates_[static_cast<size_t>(i)]);
    const std::string burst = fmt::format("{}b", tbf.burst_bytes);
    const std::string limit = fmt::format("{}b", tbf.limit_bytes);
    EmulatedHost host{fmt::format("{}-h{}", tag_, i), fmt::format("10.213.0.{}", i + 1)};
    std::string port = fmt::format("h{}", i);
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "netns", "add", host.name}));
    namespaces_.push_back(host.name);
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", host.name, "link", "set", "lo", "up"}));
    FRUGAL_RETURN_IF_ERROR(SetTcp(host.name, allowance));
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "add", port, "type", "veth", "peer",
                                       "name", "eth0", "netns", host.name}));
    if (links_.mtu > 0) {
      // Both ends, before the port joins the bridge (which takes the smallest MTU of its ports).
      const std::string mtu = std::to_string(links_.mtu);
      FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "set", port, "mtu", mtu}));
      FRUGAL_RETURN_IF_ERROR(
          RunChecked({"ip", "-n", host.name, "link", "set", "eth0", "mtu", mtu}));
    }
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "set", port, "master", "br0"}));
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "set", port, "up"}));
    FRUGAL_RETURN_IF_ERROR(
        RunChecked({"ip", "-n", host.name, "addr", "add", host.address + "/24", "dev", "eth0"}));
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", host.name, "link", "set", "eth0", "up"}));
    // Upstream (host -> switch) and downstream (switch -> host) token buckets.
    for (const auto& [ns, dev] : {std::pair{host.name, std::string("eth0")}, std::pair{c, port}}) {
      Status shaped = RunChecked({"tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                                  rate, "burst", burst, "limit", limit});
      if (!shaped.ok()) {
        return FailedPreconditionError(
            fmt::format("the kernel cannot shape traffic (tc tbf): {}", shaped.message()));
      }
    }
    hosts_.push_back(std::move(host));
  }
  return allowance.Restore();
}

Status EmulatedNetwork::SetTcp(const std::string& ns, TcpAllowance& allowance) const {
  // A namespace's net.* sysctls are those of the namespace of whoever opens them: sysctl runs
  // inside it. The kernel loads a congestion control's module on demand (root may).
  RunCommandOptions options;
  options.netns_path = NamespacePath(ns);
  const std::string key = "net.ipv4.tcp_congestion_control";
  // CheckEmulationSupport found sysctl before anything was built.
  const std::vector<std::string> command = {"sysctl", "-qw", key + "=" + links_.tcp};
  Status set = RunChecked(command, options);
  if (!set.ok()) {
    // Refused as restricted to the machine's own namespace (tcp_allowance.h): allow it and retry.
    FRUGAL_ASSIGN_OR_RETURN(const bool allowed, allowance.Allow(links_.tcp));
    if (allowed) set = RunChecked(command, options);
  }
  if (!set.ok()) {
    // Most often a name the kernel has no module for ("No such file or directory").
    const StatusOr<std::string> available = ReadIpv4Sysctl("tcp_available_congestion_control");
    return InvalidArgumentError(
        fmt::format("tcp={}: the kernel refused it as TCP congestion control ({}; available: {})",
                    links_.tcp, set.message(), available.ok() ? *available : "unknown"));
  }
  // Per namespace too; a new one starts at Linux's default (1), set anyway so that it is what
  // the spec says whatever a kernel's default.
  return RunChecked(
      {"sysctl", "-qw",
       fmt::format("net.ipv4.tcp_slow_start_after_idle={}", links_.slow_start_after_idle ? 1 : 0)},
      options);
}

Status EmulatedNetwork::Destroy() {
  if (destroyed_) return Status::Ok();
  destroyed_ = true;
  Status first;
  // Hosts first, then the control namespace.
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    Status s = DeleteNamespace(*it);
    if (first.ok() && !s.ok()) first = s;
  }
  namespaces_.clear();
  if (first.ok()) {
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
    if (ec) first = IoError(fmt::format("cannot remove {}: {}", state_dir_.string(), ec.message()));
  }
  return first.Annotate(fmt::format("removing the emulated network {}", tag_));
}

StatusOr<fs::path> EmulatedNetwork::WriteHostfile(const std::vector<int>& slots_of_hosts) const {
  FRUGAL_CHECK_EQ(slots_of_hosts.size(), hosts_.size());
  std::string text;
  for (size_t h = 0; h < hosts_.size(); ++h) {
    text += fmt::format("{} slots={}\n", hosts_[h].name, slots_of_hosts[h]);
  }
  fs::path path = state_dir_ / "hostfile";
  FRUGAL_RETURN_IF_ERROR(
      WriteStateFile(path, text, fs::perms::owner_read | fs::perms::owner_write));
  return path;
}

StatusOr<fs::path> EmulatedNetwork::WriteRshAgent() const {
  // The emulated hosts resolve each other's names through a hosts file of their own.
  std::string hosts = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n";
  for (const auto& host : hosts_) hosts += fmt::format("{} {}\n", host.address, host.name);
  fs::path hosts_path = state_dir_ / "hosts";
  FRUGAL_RETURN_IF_ERROR(WriteStateFile(hosts_path, hosts,
                                        fs::perms::owner_read | fs::perms::owner_write |
                                            fs::perms::group_read | fs::perms::others_read));
  // Open MPI calls the agent like ssh: AGENT [options] HOST WORD...; the words form one command
  // line for a shell (they carry their own quoting). `ip netns exec` runs the command in a mount
  // namespace of its own, so the bind mount over /etc/hosts stays inside the emulated host.
  std::string text = fmt::format(
      "#!/bin/sh\n"
      "# plm_rsh_agent of the emulated network {0}: run a command on an emulated host, inside\n"
      "# its network namespace, a UTS namespace of its own named after it, and with {1}\n"
      "# as /etc/hosts.\n"
      "while [ $# -gt 0 ]; do case \"$1\" in -*) shift ;; *) break ;; esac; done\n"
      "host=\"$1\"; shift\n"
      "case \"$host\" in\n"
      "  {0}-h[0-9]*) ;;\n"
      "  *) echo \"frugal rsh agent: $host is not a host of {0}\" >&2; exit 255 ;;\n"
      "esac\n"
      "exec ip netns exec \"$host\" unshare --uts sh -c "
      "'h=\"$0\"; f=\"$1\"; shift; mount --bind \"$f\" /etc/hosts && hostname \"$h\" && "
      "exec sh -c \"$*\"' \"$host\" {1} \"$@\"\n",
      tag_, hosts_path.string());
  fs::path path = state_dir_ / "rsh-agent.sh";
  FRUGAL_RETURN_IF_ERROR(WriteStateFile(path, text, fs::perms::owner_all));
  return path;
}

}  // namespace frugal::apps
