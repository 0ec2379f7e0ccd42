// `--emulate hosts=H,nic=RATE[,nic.I=RATE...][,ranks-per-host=R][,mtu=BYTES][,tcp=NAME]
// [,slow-start-after-idle=0|1]`: what the flag says, how the ranks spread over the emulated hosts
// and how a NIC rate becomes token-bucket parameters. Pure functions; the network itself is
// emulated_network.h, running a job on it emulate_job.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

inline constexpr int kMaxEmulatedHosts = 64;
inline constexpr std::uint64_t kMinNicBitsPerSecond = 1'000'000;        // 1 mbit
inline constexpr std::uint64_t kMaxNicBitsPerSecond = 100'000'000'000;  // 100 gbit
// The emulated NICs' MTU: IPv4's minimum to what a veth pair carries.
inline constexpr int kMinEmulatedMtu = 576;
inline constexpr int kMaxEmulatedMtu = 65535;
// The TCP congestion control of the emulated hosts unless tcp=NAME says otherwise: Linux's own
// default, so that emulated figures do not depend on what the machine's sysctl chose (a network
// namespace starts with the machine's).
inline constexpr std::string_view kDefaultEmulatedTcp = "cubic";

// What every emulated NIC and host's TCP share.
struct EmulatedLinks {
  // The MTU of every emulated NIC (mtu=BYTES); 0: the kernel's default for a veth (1500). Jumbo
  // frames (9000) carry the same bytes in a sixth of the packets, and the token buckets release
  // packet by packet: a timer interrupt each, on the cores the ranks compute on.
  int mtu = 0;
  // net.ipv4.tcp_congestion_control in every namespace of the network (tcp=NAME).
  std::string tcp{kDefaultEmulatedTcp};
  // net.ipv4.tcp_slow_start_after_idle in every namespace (slow-start-after-idle=0|1): true,
  // Linux's default, restarts a connection idle for longer than its retransmission timeout from
  // the initial window; false keeps its window (a common setting of clusters).
  bool slow_start_after_idle = true;
};

struct EmulateSpec {
  int hosts = 0;
  std::uint64_t nic_bits_per_second = 0;  // host 0's, and every host's not set apart
  int ranks_per_host = 0;                 // 0: the number of ranks divided by hosts
  // The NIC rate of each host (hosts values) when they differ; empty: all nic_bits_per_second.
  std::vector<std::uint64_t> host_nic_bits_per_second{};
  EmulatedLinks links{};
};

// The NIC rate of every host (spec.hosts values).
std::vector<std::uint64_t> NicRates(const EmulateSpec& spec);
// "100mbit" when every host has it, otherwise "1gbit, host 3: 100mbit, ...".
std::string FormatNicRates(const EmulateSpec& spec);

// Parses "hosts=4,nic=100mbit,ranks-per-host=2" (and mtu=BYTES, tcp=NAME: a congestion control
// the kernel knows, e.g. cubic, reno, bbr; its name is checked here only for its characters). Rates
// take tc's units: bit, kbit, mbit, gbit (decimal, per second), optionally with a fraction
// ("2.5gbit"). Hosts may differ: "nic.I=RATE" gives host I (0-based) its own rate, or
// "nic=R0/R1/.../R(H-1)" lists one rate per host. Unknown keys, repeated keys, missing hosts or
// nic, a host index out of range, a list that does not have one rate per host and out-of-range
// values are kInvalidArgument.
StatusOr<EmulateSpec> ParseEmulateSpec(std::string_view text);

// Parses one rate ("100mbit") into bits per second.
StatusOr<std::uint64_t> ParseRate(std::string_view text);

// "100mbit", "1gbit", "2.5gbit", "750kbit".
std::string FormatRate(std::uint64_t bits_per_second);

// The number of ranks per emulated host for a job of `np` ranks, or kInvalidArgument when `np`
// does not fill the hosts evenly (or disagrees with an explicit ranks-per-host).
StatusOr<int> RanksPerHost(const EmulateSpec& spec, int np);

// The number of ranks each emulated host runs (spec.hosts values, in host order: mpirun fills
// the hosts in that order) for a job of `np` ranks whose last `alone` ranks each want a host of
// their own (a parameter server's servers, so that a server's NIC is its own). With alone > 0
// and no ranks-per-host, the last `alone` hosts run one rank each and the other np - alone ranks
// spread evenly over the other hosts; otherwise every host runs RanksPerHost ranks
// (ranks-per-host=R places every rank alike, servers included). kInvalidArgument when the ranks
// do not spread so.
StatusOr<std::vector<int>> RanksOfHosts(const EmulateSpec& spec, int np, int alone);

// The tbf parameters used for a rate: bucket size in bytes and queue limit in bytes.
struct TbfParameters {
  std::uint64_t burst_bytes;
  std::uint64_t limit_bytes;
};
// The bucket holds at least one packet of `mtu` bytes (a larger packet would never pass); the
// queue at least kQueueFrames of them.
inline constexpr std::uint64_t kQueueFrames = 16;

// The optional keys of --emulate as its messages and help show them, after hosts and nic.
inline constexpr char kEmulateOptionalKeys[] =
    "[,ranks-per-host=R][,mtu=BYTES][,tcp=NAME][,slow-start-after-idle=0|1]";
TbfParameters TbfFor(std::uint64_t bits_per_second, int mtu = 0);

}  // namespace frugal::apps
