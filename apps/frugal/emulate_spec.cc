// Token bucket sizing (TbfFor): the bucket holds max(16 KiB, 1 ms of traffic) so that a burst of
// full-size segments passes at line rate without inflating short-term throughput much; the queue
// holds max(64 KiB, 20 ms of traffic) so TCP keeps the link busy without building seconds of
// delay, and at least kQueueFrames frames of the MTU: tbf queues and drops whole frames, and with
// 64 KB frames 20 ms at 100 Mbit/s is under 4 of them, fewer than the initial window (10
// segments) a TCP flow sends at its start or after an idle spell, so every exchange's first
// burst lost segments. tbf counts whole frames (headers included), so TCP goodput is about
// 1448/1514 of the configured rate (~95.6%).
#include "emulate_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <utility>

namespace frugal::apps {
namespace {

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

StatusOr<long long> ParseInt(std::string_view key, std::string_view text, long long lo,
                             long long hi) {
  std::string t(text);
  if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgumentError(fmt::format("--emulate: {}={} is not a whole number", key, text));
  }
  if (t.size() > 12) {
    return InvalidArgumentError(fmt::format("--emulate: {}={} is out of range", key, text));
  }
  long long v = std::stoll(t);
  if (v < lo || v > hi) {
    return InvalidArgumentError(
        fmt::format("--emulate: {}={} is out of range [{}, {}]", key, text, lo, hi));
  }
  return v;
}

}  // namespace

StatusOr<std::uint64_t> ParseRate(std::string_view text) {
  std::string t = Lower(Trim(text));
  size_t unit_at = t.find_first_not_of("0123456789.");
  std::string number = t.substr(0, unit_at);
  std::string unit = unit_at == std::string::npos ? "" : t.substr(unit_at);
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"bit", 1.0}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}};
  double scale = 0;
  for (const auto& [name, s] : kUnits) {
    if (unit == name) scale = s;
  }
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == "." ||
      scale == 0) {
    return InvalidArgumentError(fmt::format(
        "--emulate: nic={} is not a rate (examples: 100mbit, 1gbit, 2.5gbit; units: bit, kbit, "
        "mbit, gbit per second)",
        text));
  }
  double bits = std::stod(number) * scale;
  if (bits < static_cast<double>(kMinNicBitsPerSecond) ||
      bits > static_cast<double>(kMaxNicBitsPerSecond)) {
    return InvalidArgumentError(fmt::format("--emulate: nic={} is out of range [{}, {}]", text,
                                            FormatRate(kMinNicBitsPerSecond),
                                            FormatRate(kMaxNicBitsPerSecond)));
  }
  return static_cast<std::uint64_t>(std::llround(bits));
}

std::string FormatRate(std::uint64_t bits_per_second) {
  static constexpr std::pair<std::uint64_t, std::string_view> kUnits[] = {
      {1'000'000'000, "gbit"}, {1'000'000, "mbit"}, {1'000, "kbit"}};
  for (const auto& [scale, name] : kUnits) {
    if (bits_per_second >= scale) {
      return fmt::format("{:g}{}", static_cast<double>(bits_per_second) / scale, name);
    }
  }
  return fmt::format("{}bit", bits_per_second);
}

constexpr std::string_view kEmulateKeys =
    "hosts, nic, nic.I, ranks-per-host, mtu, tcp, slow-start-after-idle";

StatusOr<EmulateSpec> ParseEmulateSpec(std::string_view text) {
  EmulateSpec spec;
  std::set<std::string> seen;
  std::vector<std::uint64_t> listed;                     // nic=R0/R1/...
  std::vector<std::pair<int, std::uint64_t>> overrides;  // nic.I=RATE
  std::string s(text);
  if (Trim(s).empty()) {
    return InvalidArgumentError(
        fmt::format("--emulate: empty; expected hosts=H,nic=RATE{} (e.g. hosts=4,nic=100mbit)",
                    kEmulateOptionalKeys));
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string item = Trim(std::string_view(s).substr(start, end - start));
    start = end + 1;
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return InvalidArgumentError(
          fmt::format("--emulate: '{}' is not key=value (keys: {})", item, kEmulateKeys));
    }
    std::string key = Trim(item.substr(0, eq));
    std::string value = Trim(item.substr(eq + 1));
    if (!seen.insert(key).second) {
      return InvalidArgumentError(fmt::format("--emulate: '{}' given twice", key));
    }
    if (key == "hosts") {
      FRUGAL_ASSIGN_OR_RETURN(long long v, ParseInt(key, value, 1, kMaxEmulatedHosts));
      spec.hosts = static_cast<int>(v);
    } else if (key == "nic") {
      size_t begin = 0;
      while (true) {
        const size_t slash = value.find('/', begin);
        FRUGAL_ASSIGN_OR_RETURN(std::uint64_t rate, ParseRate(value.substr(begin, slash - begin)));
        listed.push_back(rate);
        if (slash == std::string::npos) break;
        begin = slash + 1;
      }
      spec.nic_bits_per_second = listed[0];
    } else if (key.rfind("nic.", 0) == 0) {
      FRUGAL_ASSIGN_OR_RETURN(long long host,
                              ParseInt(key, key.substr(4), 0, kMaxEmulatedHosts - 1));
      FRUGAL_ASSIGN_OR_RETURN(std::uint64_t rate, ParseRate(value));
      overrides.emplace_back(static_cast<int>(host), rate);
    } else if (key == "ranks-per-host") {
      FRUGAL_ASSIGN_OR_RETURN(long long v, ParseInt(key, value, 1, 256));
      spec.ranks_per_host = static_cast<int>(v);
    } else if (key == "mtu") {
      FRUGAL_ASSIGN_OR_RETURN(long long v, ParseInt(key, value, kMinEmulatedMtu, kMaxEmulatedMtu));
      spec.links.mtu = static_cast<int>(v);
    } else if (key == "tcp") {
      // The kernel's names (TCP_CA_NAME_MAX - 1 characters at most): letters, digits, '_', '-'.
      const bool name_like =
          !value.empty() && value.size() <= 15 &&
          std::all_of(value.begin(), value.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
          });
      if (!name_like) {
        return InvalidArgumentError(fmt::format(
            "--emulate: tcp='{}' is not a congestion control's name (e.g. cubic, reno, bbr)",
            value));
      }
      spec.links.tcp = value;
    } else if (key == "slow-start-after-idle") {
      if (value != "0" && value != "1") {
        return InvalidArgumentError(
            fmt::format("--emulate: slow-start-after-idle='{}' is not 0 or 1", value));
      }
      spec.links.slow_start_after_idle = value == "1";
    } else {
      return InvalidArgumentError(
          fmt::format("--emulate: unknown key '{}' (accepted: {})", key, kEmulateKeys));
    }
  }
  if (spec.hosts == 0) return InvalidArgumentError("--emulate: hosts=H is missing");
  if (spec.nic_bits_per_second == 0) return InvalidArgumentError("--emulate: nic=RATE is missing");
  if (listed.size() > 1 && listed.size() != static_cast<size_t>(spec.hosts)) {
    return InvalidArgumentError(
        fmt::format("--emulate: nic lists {} rates for {} hosts (give one per host, or one rate)",
                    listed.size(), spec.hosts));
  }
  if (listed.size() > 1 || !overrides.empty()) {
    spec.host_nic_bits_per_second.assign(static_cast<size_t>(spec.hosts), listed[0]);
    if (listed.size() > 1) spec.host_nic_bits_per_second = listed;
    for (const auto& [host, rate] : overrides) {
      if (host >= spec.hosts) {
        return InvalidArgumentError(fmt::format(
            "--emulate: nic.{} names host {}, but hosts are 0 to {}", host, host, spec.hosts - 1));
      }
      spec.host_nic_bits_per_second[static_cast<size_t>(host)] = rate;
    }
    spec.nic_bits_per_second = spec.host_nic_bits_per_second[0];
  }
  return spec;
}

std::vector<std::uint64_t> NicRates(const EmulateSpec& spec) {
  if (!spec.host_nic_bits_per_second.empty()) return spec.host_nic_bits_per_second;
  return std::vector<std::uint64_t>(static_cast<size_t>(spec.hosts), spec.nic_bits_per_second);
}

std::string FormatNicRates(const EmulateSpec& spec) {
  const std::vector<std::uint64_t> rates = NicRates(spec);
  std::string text = FormatRate(spec.nic_bits_per_second);
  for (size_t host = 1; host < rates.size(); ++host) {
    if (rates[host] != spec.nic_bits_per_second) {
      text += fmt::format(", host {}: {}", host, FormatRate(rates[host]));
    }
  }
  return text;
}

StatusOr<int> RanksPerHost(const EmulateSpec& spec, int np) {
  FRUGAL_CHECK_GT(spec.hosts, 0);
  if (np < 1) return InvalidArgumentError(fmt::format("--np {} must be at least 1", np));
  if (spec.ranks_per_host > 0) {
    if (np != spec.hosts * spec.ranks_per_host) {
      return InvalidArgumentError(
          fmt::format("--np {} does not equal hosts={} x ranks-per-host={} of --emulate", np,
                      spec.hosts, spec.ranks_per_host));
    }
    return spec.ranks_per_host;
  }
  if (np % spec.hosts != 0) {
    return InvalidArgumentError(fmt::format(
        "--np {} does not spread evenly over {} emulated hosts (give a multiple of hosts)", np,
        spec.hosts));
  }
  return np / spec.hosts;
}

StatusOr<std::vector<int>> RanksOfHosts(const EmulateSpec& spec, int np, int alone) {
  FRUGAL_CHECK_GE(alone, 0);
  if (alone == 0 || spec.ranks_per_host > 0 || np == spec.hosts) {
    FRUGAL_ASSIGN_OR_RETURN(int even, RanksPerHost(spec, np));
    return std::vector<int>(static_cast<size_t>(spec.hosts), even);
  }
  const int shared_hosts = spec.hosts - alone;
  const int shared_ranks = np - alone;
  if (shared_hosts < 1 || shared_ranks < 1 || shared_ranks % shared_hosts != 0) {
    return InvalidArgumentError(fmt::format(
        "--emulate hosts={}: the last {} of the --np {} ranks (the servers) each get an emulated "
        "host of their own, so the other {} must spread evenly over the other {} host(s) (or give "
        "ranks-per-host=R to place every rank alike)",
        spec.hosts, alone, np, shared_ranks, shared_hosts));
  }
  std::vector<int> out(static_cast<size_t>(shared_hosts), shared_ranks / shared_hosts);
  out.resize(static_cast<size_t>(spec.hosts), 1);
  return out;
}

TbfParameters TbfFor(std::uint64_t bits_per_second, int mtu) {
  std::uint64_t bytes_per_second = bits_per_second / 8;
  // An Ethernet header and a VLAN tag beyond the MTU.
  const std::uint64_t frame = static_cast<std::uint64_t>(std::max(mtu, 0)) + 18;
  return TbfParameters{
      .burst_bytes = std::max({std::uint64_t{16 * 1024}, bytes_per_second / 1000, frame}),
      .limit_bytes =
          std::max({std::uint64_t{64 * 1024}, bytes_per_second / 50, kQueueFrames * frame}),
  };
}

}  // namespace frugal::apps
