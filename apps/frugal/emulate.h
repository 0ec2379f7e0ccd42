// Emulated multi-host networks on one Linux machine, and running an MPI job on them.
//
// `--emulate hosts=H,nic=RATE[,ranks-per-host=R]` runs the ranks of a job on H emulated hosts,
// each with a NIC limited to RATE in both directions. Every emulated host is a network namespace
// with one interface (eth0, 10.213.0.<i+1>/24) attached by a veth pair to a bridge. The bridge
// lives in a control namespace together with `mpirun` itself (10.213.0.254), so nothing is added
// to the machine's own network and concurrent emulations do not see each other. Both directions
// of each NIC are shaped with a token bucket (`tc qdisc ... tbf`): egress of the host's eth0
// (what the host sends) and egress of the bridge-side veth (what the host receives). The kernel
// has no netem, so latency is not emulated: only bandwidth.
//
// mpirun starts one orted per emulated host through a generated `plm_rsh_agent` script that runs
// `ip netns exec HOST unshare --uts sh -c 'hostname HOST; exec ...'`: each emulated host gets its
// own hostname, so Open MPI uses shared memory only between ranks of the same emulated host and
// TCP (bound to the emulated subnet) between hosts.
//
// Names: everything a run creates is named frg-<pid>-<k>-... (namespaces) and kept under
// /run/frugal-emulate/frg-<pid>-<k>/ (hostfile, agent script, owner record). A run that was
// killed leaves these behind; the next run removes those whose owner process is gone and reports
// what it removed. Creation and removal of runs are serialized by a lock file.
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), `ip`, `tc` and `unshare`. Not thread safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "child_process.h"
#include "frugal/logging.h"
#include "frugal/status.h"

namespace frugal::apps {

inline constexpr int kMaxEmulatedHosts = 64;
inline constexpr std::uint64_t kMinNicBitsPerSecond = 1'000'000;        // 1 mbit
inline constexpr std::uint64_t kMaxNicBitsPerSecond = 100'000'000'000;  // 100 gbit
inline constexpr std::string_view kEmulateStateRoot = "/run/frugal-emulate";
inline constexpr std::string_view kEmulateSubnet = "10.213.0.0/24";

struct EmulateSpec {
  int hosts = 0;
  std::uint64_t nic_bits_per_second = 0;
  int ranks_per_host = 0;  // 0: the number of ranks divided by hosts
};

// Parses "hosts=4,nic=100mbit,ranks-per-host=2". Rates take tc's units: bit, kbit, mbit, gbit
// (decimal, per second), optionally with a fraction ("2.5gbit"). Unknown keys, repeated keys,
// missing hosts or nic and out-of-range values are kInvalidArgument.
StatusOr<EmulateSpec> ParseEmulateSpec(std::string_view text);

// Parses one rate ("100mbit") into bits per second.
StatusOr<std::uint64_t> ParseRate(std::string_view text);

// "100mbit", "1gbit", "2.5gbit", "750kbit".
std::string FormatRate(std::uint64_t bits_per_second);

// The number of ranks per emulated host for a job of `np` ranks, or kInvalidArgument when `np`
// does not fill the hosts evenly (or disagrees with an explicit ranks-per-host).
StatusOr<int> RanksPerHost(const EmulateSpec& spec, int np);

// For the launcher: parses `--emulate TEXT` and checks it against --np and --hostfile
// (kInvalidArgument) and against this machine (CheckEmulationSupport, kFailedPrecondition).
// Either failure is a usage error of the command line (one line, exit code 2).
StatusOr<EmulateSpec> ValidateEmulateFlag(std::string_view text, int np, bool has_hostfile);

// kFailedPrecondition with one line when this process cannot emulate (not root, no `ip`/`tc`/
// `unshare`, no network namespace support).
Status CheckEmulationSupport();

// Removes what killed earlier runs left behind (namespaces, their processes, state directories)
// and logs one warning per removed run; runs whose owner process is alive are left alone. Takes
// the state lock itself. Returns the names of the runs it removed.
StatusOr<std::vector<std::string>> RemoveLeftovers(const Logger& logger);

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
  ~EmulatedNetwork();  // Destroy(), errors logged
  EmulatedNetwork(const EmulatedNetwork&) = delete;
  EmulatedNetwork& operator=(const EmulatedNetwork&) = delete;

  // Kills the processes left in the namespaces, deletes the namespaces (which deletes the
  // bridge, veths and qdiscs with them) and the state directory. Idempotent.
  Status Destroy();

  const std::string& tag() const { return tag_; }
  const std::vector<EmulatedHost>& hosts() const { return hosts_; }
  std::uint64_t nic_bits_per_second() const { return rate_; }
  const std::string& control_namespace() const { return control_; }
  static std::string NamespacePath(const std::string& name) { return "/run/netns/" + name; }
  const std::filesystem::path& state_dir() const { return state_dir_; }
  std::string control_address() const { return "10.213.0.254"; }

  // Writes the hostfile ("HOST slots=R" per line) and the rsh agent script into state_dir().
  StatusOr<std::filesystem::path> WriteHostfile(int slots_per_host) const;
  StatusOr<std::filesystem::path> WriteRshAgent() const;

 private:
  EmulatedNetwork(std::string tag, std::uint64_t rate, const Logger& logger);
  Status Build(int hosts);

  std::string tag_;
  std::string control_;
  std::uint64_t rate_;
  std::filesystem::path state_dir_;
  std::vector<EmulatedHost> hosts_;
  std::vector<std::string> namespaces_;  // created so far, control first
  Logger logger_;
  bool destroyed_ = false;
};

// The tbf parameters used for a rate: bucket size in bytes and queue limit in bytes.
struct TbfParameters {
  std::uint64_t burst_bytes;
  std::uint64_t limit_bytes;
};
TbfParameters TbfFor(std::uint64_t bits_per_second);

struct EmulatedJob {
  EmulateSpec spec;
  int np = 0;
  // Run on every rank: the program and its arguments.
  std::vector<std::string> command;
  // Extra mpirun options placed before the command (e.g. {"-x", "FRUGAL_SEED"}).
  std::vector<std::string> mpirun_options;
  // Added to mpirun's environment (which the ranks inherit), e.g. OMPI_ALLOW_RUN_AS_ROOT.
  Environment extra_env;
  // The whole job, setup included, is ended after this.
  std::chrono::seconds timeout{std::chrono::hours(24)};
};

// The mpirun command line for `job` on `network` (pure; exposed for tests and --dry-run).
std::vector<std::string> BuildMpirunCommand(const EmulatedJob& job, const EmulatedNetwork& network,
                                            const std::filesystem::path& hostfile,
                                            const std::filesystem::path& agent, int slots);

// Creates the emulated network, runs the job through mpirun inside it and removes everything
// again, also when the job fails, times out or SIGINT/SIGTERM/SIGHUP arrives (the signal is
// forwarded to mpirun first). Returns the exit code to exit with: mpirun's, or 128 + signal when
// interrupted. Setup failures are returned as a Status (kFailedPrecondition without privileges or
// kernel support, kInvalidArgument for a bad spec).
StatusOr<int> RunEmulatedJob(const EmulatedJob& job, const Logger& logger);

}  // namespace frugal::apps
