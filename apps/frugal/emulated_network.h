// An emulated multi-host network on one Linux machine.
//
// Every emulated host is a network namespace with one interface (eth0, 10.213.0.<i+1>/24)
// attached by a veth pair to a bridge. The bridge lives in a control namespace (10.213.0.254),
// where the caller runs what must reach every host (mpirun), so nothing is added to the
// machine's own network and concurrent emulations do not see each other. Both directions of each
// NIC are shaped with a token bucket (`tc qdisc ... tbf`, TbfFor) at that host's rate (hosts may
// have different rates): egress of the host's eth0 (what the host sends) and egress of the
// bridge-side veth (what the host receives). The kernel has no netem, so latency is not
// emulated: only bandwidth. Every NIC has the MTU given (mtu=BYTES; the kernel's 1500 otherwise),
// every namespace the TCP congestion control given (tcp=NAME; cubic otherwise, allowed for the
// namespaces while they take it when the machine restricts it: tcp_allowance.h).
// Names, state files and the removal of what killed runs left behind: emulate_state.h.
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), `ip`, `tc`, `unshare` and `sysctl`. Not thread safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "emulate_state.h"
#include "frugal/logging.h"
#include "frugal/status.h"

namespace frugal::apps {

class TcpAllowance;

inline constexpr std::string_view kEmulateSubnet = "10.213.0.0/24";

// kFailedPrecondition with one line when this process cannot emulate (not root, no `ip`/`tc`/
// `unshare`, no network namespace support), probed once per process.
Status CheckEmulationSupport();

struct EmulatedHost {
  std::string name;     // namespace and hostname, e.g. frg-1234-0-h2
  std::string address;  // 10.213.0.3
};

class EmulatedNetwork {
 public:
  // Creates the control namespace, the bridge and `hosts` shaped hosts. Removes left-overs of
  // dead runs first. On failure removes whatever it had created.
  static StatusOr<std::unique_ptr<EmulatedNetwork>> Create(int hosts,
                                                           std::uint64_t nic_bits_per_second,
                                                           const Logger& logger);
  // The same with one NIC rate per host (rates.size() hosts), every NIC's MTU and every
  // namespace's TCP congestion control (a name the kernel does not know: kInvalidArgument).
  static StatusOr<std::unique_ptr<EmulatedNetwork>> Create(
      const std::vector<std::uint64_t>& nic_bits_per_second, const Logger& logger,
      const EmulatedLinks& links = {});
  ~EmulatedNetwork();  // Destroy(), errors logged
  EmulatedNetwork(const EmulatedNetwork&) = delete;
  EmulatedNetwork& operator=(const EmulatedNetwork&) = delete;

  // Kills the processes left in the namespaces, deletes the namespaces (which deletes the
  // bridge, veths and qdiscs with them) and the state directory. Idempotent.
  Status Destroy();

  const std::string& tag() const { return tag_; }
  const std::vector<EmulatedHost>& hosts() const { return hosts_; }
  std::uint64_t nic_bits_per_second() const { return rates_[0]; }  // host 0's
  std::uint64_t nic_bits_per_second(int host) const { return rates_.at(static_cast<size_t>(host)); }
  const std::string& control_namespace() const { return control_; }
  static std::string NamespacePath(const std::string& name) { return apps::NamespacePath(name); }
  const std::filesystem::path& state_dir() const { return state_dir_; }
  std::string control_address() const { return "10.213.0.254"; }

  // Writes the hostfile ("HOST slots=R" per line) and the rsh agent script into state_dir().
  StatusOr<std::filesystem::path> WriteHostfile(const std::vector<int>& slots_of_hosts) const;
  StatusOr<std::filesystem::path> WriteRshAgent() const;

 private:
  EmulatedNetwork(std::string tag, std::vector<std::uint64_t> rates, EmulatedLinks links,
                  const Logger& logger);
  // Sets the links' TCP congestion control in namespace `ns`, through `allowance` when the
  // machine restricts it to its own namespace.
  Status SetTcp(const std::string& ns, TcpAllowance& allowance) const;
  Status Build();

  std::string tag_;
  std::string control_;
  std::vector<std::uint64_t> rates_;  // per host
  EmulatedLinks links_;
  std::filesystem::path state_dir_;
  std::vector<EmulatedHost> hosts_;
  std::vector<std::string> namespaces_;  // created so far, control first
  Logger logger_;
  bool destroyed_ = false;
};

}  // namespace frugal::apps
