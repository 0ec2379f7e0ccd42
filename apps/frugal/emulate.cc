#include "emulate.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "frugal/backoff.h"

namespace frugal::apps {
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

/*
 * Emulated network layout (one run, tag T = frg-<pid>-<k>):
 *
 *   namespace T-c (control)             namespace T-h<i> (emulated host i, one per host)
 *   +------------------------------+    +------------------------------------+
 *   | mpirun, rsh agent            |    | orted + ranks of host i,           |
 *   | br0 10.213.0.254/24          |    | own UTS namespace, hostname T-h<i> |
 *   |  +- h<i> [tbf: rate] --------+----+-- eth0 [tbf: rate] 10.213.0.<i+1> |
 *   +------------------------------+    +------------------------------------+
 *
 * What host i sends leaves through eth0, shaped by eth0's token bucket; what it receives leaves
 * the bridge through h<i>, shaped by h<i>'s bucket. A transfer i -> j therefore passes both i's
 * upstream and j's downstream limit, like a full-duplex NIC on a non-blocking switch. Deleting a
 * namespace destroys the interfaces in it and, with a veth, its peer; so Destroy() only has to
 * kill what still runs in the namespaces and delete them.
 *
 * Token bucket sizing (TbfFor): the bucket holds max(16 KiB, 1 ms of traffic) so that a burst
 * of full-size segments passes at line rate without inflating short-term throughput much; the
 * queue holds max(64 KiB, 20 ms of traffic) so TCP keeps the link busy without building seconds
 * of delay. tbf counts whole frames (headers included), so TCP goodput is about 1448/1514 of the
 * configured rate (~95.6%).
 *
 * Left-overs: every run records "pid start-time" of its owner in state_dir/owner before creating
 * anything. A run whose owner process is gone (or whose pid now belongs to a process started at
 * another time) is dead: RemoveLeftovers() kills the processes still inside its namespaces,
 * deletes them and its state directory. Creation and left-over removal happen under an exclusive
 * flock on the state root's lock file, so two starting runs never pick the same tag or remove
 * each other's half-built namespaces.
 */

namespace {

constexpr milliseconds kLockTimeout{60000};
constexpr milliseconds kProcessGoneTimeout{5000};
// Polls of the state lock and of the processes left in a namespace: sleeps growing to 50 / 20 ms.
constexpr BackOffPolicy kLockPoll{.max_sleep = milliseconds(50)};
constexpr BackOffPolicy kProcessPoll{.max_sleep = milliseconds(20)};

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

// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat).
std::optional<unsigned long long> ProcessStartTime(long pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  // After "pid (comm) " the state is field 3; the start time is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return std::nullopt;
  }
}

bool ProcessExists(long pid) { return fs::exists(fmt::format("/proc/{}", pid)); }

// An exclusive flock on the state root's lock file, taken with a deadline.
class StateLock {
 public:
  static StatusOr<std::unique_ptr<StateLock>> Acquire() {
    std::error_code ec;
    fs::create_directories(fs::path(kEmulateStateRoot), ec);
    if (ec) {
      return IoError(fmt::format("cannot create {}: {}", kEmulateStateRoot, ec.message()));
    }
    std::string path = std::string(kEmulateStateRoot) + "/.lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    const auto start = steady_clock::now();
    const auto deadline = start + kLockTimeout;
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ::close(fd);
        return IoError(fmt::format("cannot lock {}: {}", path, std::strerror(err)));
      }
      if (steady_clock::now() > deadline) {
        ::close(fd);
        return TimeoutError(fmt::format("{} stayed locked by another frugal for {} ms", path,
                                        kLockTimeout.count()));
      }
      BackOff(kLockPoll, steady_clock::now() - start);
    }
    return std::unique_ptr<StateLock>(new StateLock(fd));
  }
  ~StateLock() { ::close(fd_); }  // closing releases the flock

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_;
};

// "frg-123-0-h2" -> "frg-123-0"; empty when the name does not follow the pattern.
std::string TagOf(const std::string& name) {
  if (name.rfind("frg-", 0) != 0) return "";
  size_t a = name.find('-', 4);
  if (a == std::string::npos) return "";
  size_t b = name.find('-', a + 1);
  std::string pid = name.substr(4, a - 4);
  std::string k = name.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(pid) || !digits(k)) return "";
  return name.substr(0, b == std::string::npos ? name.size() : b);
}

long PidOfTag(const std::string& tag) { return std::stol(tag.substr(4, tag.find('-', 4) - 4)); }

std::vector<std::string> ListNamespaces() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/run/netns", ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Kills every process inside namespace `name` and waits until none is left.
Status KillNamespaceProcesses(const std::string& name) {
  const auto start = steady_clock::now();
  const auto deadline = start + kProcessGoneTimeout;
  while (true) {
    FRUGAL_ASSIGN_OR_RETURN(CommandResult pids, RunCommand({"ip", "netns", "pids", name}));
    if (pids.exit_code != 0) return Status::Ok();  // the namespace is already gone
    std::istringstream in(pids.output);
    std::vector<long> alive;
    long pid;
    while (in >> pid) alive.push_back(pid);
    if (alive.empty()) return Status::Ok();
    if (steady_clock::now() > deadline) {
      return TimeoutError(fmt::format("{} process(es) in namespace {} survived SIGKILL for {} ms",
                                      alive.size(), name, kProcessGoneTimeout.count()));
    }
    for (long p : alive) ::kill(static_cast<pid_t>(p), SIGKILL);
    BackOff(kProcessPoll, steady_clock::now() - start);
  }
}

Status DeleteNamespace(const std::string& name) {
  Status killed = KillNamespaceProcesses(name);
  if (!fs::exists(EmulatedNetwork::NamespacePath(name))) return killed;
  Status deleted = RunChecked({"ip", "netns", "delete", name});
  return killed.ok() ? deleted : killed;
}

bool RunIsAlive(const std::string& tag, const fs::path& state_dir, bool* ambiguous) {
  *ambiguous = false;
  long pid = PidOfTag(tag);
  std::ifstream owner(state_dir / "owner");
  long recorded_pid = 0;
  unsigned long long recorded_start = 0;
  if (owner >> recorded_pid >> recorded_start) {
    auto start = ProcessStartTime(recorded_pid);
    return start && *start == recorded_start;
  }
  // No owner record: the state directory was removed by hand or while being torn down.
  if (!ProcessExists(pid)) return false;
  *ambiguous = true;
  return true;
}

StatusOr<std::vector<std::string>> RemoveLeftoversLocked(const Logger& logger) {
  std::map<std::string, std::vector<std::string>> namespaces_by_tag;
  for (const auto& name : ListNamespaces()) {
    std::string tag = TagOf(name);
    if (!tag.empty()) namespaces_by_tag[tag].push_back(name);
  }
  std::set<std::string> tags;
  for (const auto& [tag, names] : namespaces_by_tag) tags.insert(tag);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(kEmulateStateRoot), ec)) {
    std::string tag = TagOf(entry.path().filename().string());
    if (!tag.empty() && entry.path().filename() == tag) tags.insert(tag);
  }

  std::vector<std::string> removed;
  for (const auto& tag : tags) {
    fs::path state_dir = fs::path(kEmulateStateRoot) / tag;
    bool ambiguous = false;
    if (RunIsAlive(tag, state_dir, &ambiguous)) {
      if (ambiguous) {
        logger.Warning(fmt::format(
            "emulated network {} has no owner record but process {} exists; left alone (remove "
            "it with: ip netns delete <name> for each of: {})",
            tag, PidOfTag(tag), fmt::join(namespaces_by_tag[tag], " ")));
      }
      continue;
    }
    Status status;
    auto& names = namespaces_by_tag[tag];
    // Hosts first, the control namespace (holding mpirun) last.
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      bool ac = a.ends_with("-c"), bc = b.ends_with("-c");
      return ac != bc ? bc : a < b;
    });
    for (const auto& name : names) {
      Status s = DeleteNamespace(name);
      if (status.ok() && !s.ok()) status = s;
    }
    fs::remove_all(state_dir, ec);
    if (!status.ok()) {
      return status.Annotate(fmt::format("removing the left-over emulated network {}", tag));
    }
    logger.Warning(
        fmt::format("removed the left-over emulated network {} of process {}, which no longer runs "
                    "({} namespace(s))",
                    tag, PidOfTag(tag), names.size()));
    removed.push_back(tag);
  }
  return removed;
}

Status WriteFile(const fs::path& path, const std::string& text, fs::perms perms) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IoError(fmt::format("cannot write {}", path.string()));
  std::error_code ec;
  fs::permissions(path, perms, ec);
  if (ec) return IoError(fmt::format("cannot chmod {}: {}", path.string(), ec.message()));
  return Status::Ok();
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

StatusOr<EmulateSpec> ParseEmulateSpec(std::string_view text) {
  EmulateSpec spec;
  std::set<std::string> seen;
  std::string s(text);
  if (Trim(s).empty()) {
    return InvalidArgumentError(
        "--emulate: empty; expected hosts=H,nic=RATE[,ranks-per-host=R] (e.g. "
        "hosts=4,nic=100mbit)");
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
          fmt::format("--emulate: '{}' is not key=value (keys: hosts, nic, ranks-per-host)", item));
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
      FRUGAL_ASSIGN_OR_RETURN(spec.nic_bits_per_second, ParseRate(value));
    } else if (key == "ranks-per-host") {
      FRUGAL_ASSIGN_OR_RETURN(long long v, ParseInt(key, value, 1, 256));
      spec.ranks_per_host = static_cast<int>(v);
    } else {
      return InvalidArgumentError(
          fmt::format("--emulate: unknown key '{}' (accepted: hosts, nic, ranks-per-host)", key));
    }
  }
  if (spec.hosts == 0) return InvalidArgumentError("--emulate: hosts=H is missing");
  if (spec.nic_bits_per_second == 0) return InvalidArgumentError("--emulate: nic=RATE is missing");
  return spec;
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

Status CheckEmulationSupport() {
  if (::geteuid() != 0) {
    return FailedPreconditionError(
        "--emulate needs root: it creates network namespaces, veth pairs and tc qdiscs");
  }
  for (const char* tool : {"ip", "tc", "unshare"}) {
    RunCommandOptions options;
    options.timeout = milliseconds(5000);
    auto r = RunCommand({tool, "-V"}, options);
    if (!r.ok()) {
      return FailedPreconditionError(
          fmt::format("--emulate needs '{}' (Debian packages iproute2, util-linux): {}", tool,
                      r.status().message()));
    }
  }
  if (!fs::exists("/proc/self/ns/net") || !fs::exists("/proc/self/ns/uts")) {
    return FailedPreconditionError(
        "--emulate needs network and UTS namespaces, which this kernel does not offer");
  }
  return Status::Ok();
}

StatusOr<EmulateSpec> ValidateEmulateFlag(std::string_view text, int np, bool has_hostfile) {
  FRUGAL_ASSIGN_OR_RETURN(EmulateSpec spec, ParseEmulateSpec(text));
  if (np <= 0) {
    return InvalidArgumentError("--emulate needs --np N (the number of ranks to start)");
  }
  if (has_hostfile) {
    return InvalidArgumentError("--emulate and --hostfile exclude each other");
  }
  FRUGAL_RETURN_IF_ERROR(RanksPerHost(spec, np).status());
  FRUGAL_RETURN_IF_ERROR(CheckEmulationSupport());
  return spec;
}

StatusOr<std::vector<std::string>> RemoveLeftovers(const Logger& logger) {
  FRUGAL_ASSIGN_OR_RETURN(auto lock, StateLock::Acquire());
  return RemoveLeftoversLocked(logger);
}

TbfParameters TbfFor(std::uint64_t bits_per_second) {
  std::uint64_t bytes_per_second = bits_per_second / 8;
  return TbfParameters{
      .burst_bytes = std::max<std::uint64_t>(16 * 1024, bytes_per_second / 1000),
      .limit_bytes = std::max<std::uint64_t>(64 * 1024, bytes_per_second / 50),
  };
}

EmulatedNetwork::EmulatedNetwork(std::string tag, std::uint64_t rate, const Logger& logger)
    : tag_(std::move(tag)),
      control_(tag_ + "-c"),
      rate_(rate),
      state_dir_(fs::path(kEmulateStateRoot) / tag_),
      logger_(logger) {}

EmulatedNetwork::~EmulatedNetwork() {
  Status s = Destroy();
  if (!s.ok()) logger_.Error(s.ToString());
}

StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(
    int hosts, std::uint64_t nic_bits_per_second, const Logger& logger) {
  FRUGAL_CHECK(hosts >= 1 && hosts <= kMaxEmulatedHosts, "hosts = ", hosts);
  FRUGAL_CHECK(
      nic_bits_per_second >= kMinNicBitsPerSecond && nic_bits_per_second <= kMaxNicBitsPerSecond,
      "rate = ", nic_bits_per_second);
  FRUGAL_RETURN_IF_ERROR(CheckEmulationSupport());
  FRUGAL_ASSIGN_OR_RETURN(auto lock, StateLock::Acquire());
  FRUGAL_RETURN_IF_ERROR(RemoveLeftoversLocked(logger).status());

  // A fresh tag: this process may run several networks one after another (or at once).
  long pid = ::getpid();
  std::string tag;
  for (int k = 0;; ++k) {
    tag = fmt::format("frg-{}-{}", pid, k);
    if (!fs::exists(fs::path(kEmulateStateRoot) / tag) && !fs::exists(NamespacePath(tag + "-c"))) {
      break;
    }
  }
  std::unique_ptr<EmulatedNetwork> network(new EmulatedNetwork(tag, nic_bits_per_second, logger));
  std::error_code ec;
  fs::create_directories(network->state_dir_, ec);
  if (ec) {
    return IoError(fmt::format("cannot create {}: {}", network->state_dir_.string(), ec.message()));
  }
  auto start = ProcessStartTime(pid);
  FRUGAL_INTERNAL_ASSERT(start.has_value(), "no start time for our own pid");
  FRUGAL_RETURN_IF_ERROR(WriteFile(network->state_dir_ / "owner",
                                   fmt::format("{} {}\n", pid, *start),
                                   fs::perms::owner_read | fs::perms::owner_write));
  Status built = network->Build(hosts);
  if (!built.ok()) {
    Status destroyed = network->Destroy();
    if (!destroyed.ok()) logger.Error(destroyed.ToString());
    return built.Annotate("--emulate: creating the emulated network");
  }
  return network;
}

Status EmulatedNetwork::Build(int hosts) {
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

  TbfParameters tbf = TbfFor(rate_);
  std::string rate = fmt::format("{}bit", rate_);
  std::string burst = fmt::format("{}b", tbf.burst_bytes);
  std::string limit = fmt::format("{}b", tbf.limit_bytes);
  for (int i = 0; i < hosts; ++i) {
    EmulatedHost host{fmt::format("{}-h{}", tag_, i), fmt::format("10.213.0.{}", i + 1)};
    std::string port = fmt::format("h{}", i);
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "netns", "add", host.name}));
    namespaces_.push_back(host.name);
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", host.name, "link", "set", "lo", "up"}));
    FRUGAL_RETURN_IF_ERROR(RunChecked({"ip", "-n", c, "link", "add", port, "type", "veth", "peer",
                                       "name", "eth0", "netns", host.name}));
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
  return Status::Ok();
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

StatusOr<fs::path> EmulatedNetwork::WriteHostfile(int slots_per_host) const {
  std::string text;
  for (const auto& host : hosts_) text += fmt::format("{} slots={}\n", host.name, slots_per_host);
  fs::path path = state_dir_ / "hostfile";
  FRUGAL_RETURN_IF_ERROR(WriteFile(path, text, fs::perms::owner_read | fs::perms::owner_write));
  return path;
}

StatusOr<fs::path> EmulatedNetwork::WriteRshAgent() const {
  // The emulated hosts resolve each other's names through a hosts file of their own.
  std::string hosts = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n";
  for (const auto& host : hosts_) hosts += fmt::format("{} {}\n", host.address, host.name);
  fs::path hosts_path = state_dir_ / "hosts";
  FRUGAL_RETURN_IF_ERROR(WriteFile(hosts_path, hosts,
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
  FRUGAL_RETURN_IF_ERROR(WriteFile(path, text, fs::perms::owner_all));
  return path;
}

std::vector<std::string> BuildMpirunCommand(const EmulatedJob& job, const EmulatedNetwork& network,
                                            const fs::path& hostfile, const fs::path& agent,
                                            int slots) {
  std::string subnet(kEmulateSubnet);
  std::vector<std::string> cmd = {
      "mpirun",
      "--hostfile",
      hostfile.string(),
      "-np",
      std::to_string(job.np),
      "--map-by",
      fmt::format("ppr:{}:node", slots),
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
  FRUGAL_ASSIGN_OR_RETURN(int slots, RanksPerHost(job.spec, job.np));
  auto deadline = steady_clock::now() + job.timeout;
  HeldSignals held;
  FRUGAL_ASSIGN_OR_RETURN(
      auto network, EmulatedNetwork::Create(job.spec.hosts, job.spec.nic_bits_per_second, logger));
  auto interrupted = [&](int sig) {
    logger.Warning(fmt::format("interrupted by {}; the emulated network {} was removed",
                               strsignal(sig), network->tag()));
    return 128 + sig;
  };
  if (auto sig = held.Pending()) {
    FRUGAL_RETURN_IF_ERROR(network->Destroy());
    return interrupted(*sig);
  }
  FRUGAL_ASSIGN_OR_RETURN(fs::path hostfile, network->WriteHostfile(slots));
  FRUGAL_ASSIGN_OR_RETURN(fs::path agent, network->WriteRshAgent());
  std::vector<std::string> cmd = BuildMpirunCommand(job, *network, hostfile, agent, slots);
  logger.Info(fmt::format("emulating {} hosts x {} rank(s), NIC {} each way ({}): {}",
                          job.spec.hosts, slots, FormatRate(job.spec.nic_bits_per_second),
                          network->tag(), ShellQuote(cmd)));
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
