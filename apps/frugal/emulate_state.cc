#include "emulate_state.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "child_process.h"
#include "frugal/backoff.h"

namespace frugal::apps {
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr milliseconds kLockTimeout{60000};
constexpr milliseconds kProcessGoneTimeout{5000};
// Polls of the state lock and of the processes left in a namespace: sleeps growing to 50 / 20 ms.
constexpr BackOffPolicy kLockPoll{.max_sleep = milliseconds(50)};
constexpr BackOffPolicy kProcessPoll{.max_sleep = milliseconds(20)};

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

}  // namespace

std::string NamespacePath(const std::string& name) { return "/run/netns/" + name; }

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

StatusOr<std::unique_ptr<StateLock>> StateLock::Acquire() {
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
      return TimeoutError(
          fmt::format("{} stayed locked by another frugal for {} ms", path, kLockTimeout.count()));
    }
    BackOff(kLockPoll, steady_clock::now() - start);
  }
  return std::unique_ptr<StateLock>(new StateLock(fd));
}

StateLock::~StateLock() { ::close(fd_); }

Status WriteStateFile(const fs::path& path, const std::string& text, fs::perms perms) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IoError(fmt::format("cannot write {}", path.string()));
  std::error_code ec;
  fs::permissions(path, perms, ec);
  if (ec) return IoError(fmt::format("cannot chmod {}: {}", path.string(), ec.message()));
  return Status::Ok();
}

Status WriteOwnerRecord(const fs::path& state_dir) {
  const long pid = ::getpid();
  const auto start = ProcessStartTime(pid);
  FRUGAL_INTERNAL_ASSERT(start.has_value(), "no start time for our own pid");
  return WriteStateFile(state_dir / "owner", fmt::format("{} {}\n", pid, *start),
                        fs::perms::owner_read | fs::perms::owner_write);
}

Status DeleteNamespace(const std::string& name) {
  Status killed = KillNamespaceProcesses(name);
  if (!fs::exists(NamespacePath(name))) return killed;
  Status deleted = RunChecked({"ip", "netns", "delete", name});
  return killed.ok() ? deleted : killed;
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

StatusOr<std::vector<std::string>> RemoveLeftovers(const Logger& logger) {
  FRUGAL_ASSIGN_OR_RETURN(auto lock, StateLock::Acquire());
  return RemoveLeftoversLocked(logger);
}

}  // namespace frugal::apps
