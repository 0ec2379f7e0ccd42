#include "child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "frugal/backoff.h"

namespace frugal::apps {

/*
 * Starting and supervising children.
 *
 * ForkExec prepares everything the child needs before fork (the program resolved on PATH, argv
 * and envp arrays), so the child only makes async-signal-safe calls: it unblocks every signal
 * (the parent may hold some, see HeldSignals), optionally moves into its own process group and
 * asks for a parent-death signal (and exits if the parent is already gone), enters the network
 * namespace given by path (setns), redirects stdin from /dev/null and stdout/stderr to the
 * given descriptor, and execs. A close-on-exec pipe carries errno back when any step fails, so
 * the parent learns synchronously whether the exec happened.
 *
 * RunCommand reads the child's output through a pipe while polling waitpid(WNOHANG) against a
 * deadline; past it the child is killed and reaped and kTimeout returned.
 *
 * Long-running children are supervised with termination signals held (blocked) by HeldSignals:
 * Child::Supervise alternates waitpid(WNOHANG) with sigtimedwait on the held set, so a SIGINT,
 * SIGTERM or SIGHUP that arrives at any moment is seen exactly once. It is forwarded to the
 * child's process group, which then has `grace` to end before SIGKILL; the same two steps
 * happen at the deadline. The caller cleans up after Supervise returns and reports the signal.
 */

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Waiting for a child to exit after its output ended: sleeps that grow to 5 ms.
constexpr BackOffPolicy kExitPoll{.max_sleep = milliseconds(5)};

// Resolves a program name like execvp would, so that a missing program is reported before fork.
StatusOr<std::string> FindProgram(const std::string& name) {
  if (name.empty()) return InvalidArgumentError("empty command");
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) {
      return NotFoundError(fmt::format("{}: {}", name, std::strerror(errno)));
    }
    return name;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  path += ":/usr/local/sbin:/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + name;
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    start = end + 1;
  }
  return NotFoundError(fmt::format("program '{}' not found on PATH", name));
}

struct PreparedExec {
  std::string program;
  std::vector<std::string> args;
  std::vector<char*> argv;
  std::vector<std::string> env;
  std::vector<char*> envp;
};

// Everything the child needs, built before fork: the child only calls async-signal-safe functions.
StatusOr<PreparedExec> Prepare(const std::vector<std::string>& argv, const Environment& extra_env) {
  if (argv.empty()) return InvalidArgumentError("empty command");
  PreparedExec exec;
  FRUGAL_ASSIGN_OR_RETURN(exec.program, FindProgram(argv[0]));
  exec.args = argv;
  for (auto& a : exec.args) exec.argv.push_back(a.data());
  exec.argv.push_back(nullptr);
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [key, value] : extra_env) overridden = overridden || key == name;
    if (!overridden) exec.env.push_back(std::move(entry));
  }
  for (const auto& [key, value] : extra_env) exec.env.push_back(key + "=" + value);
  for (auto& e : exec.env) exec.envp.push_back(e.data());
  exec.envp.push_back(nullptr);
  return exec;
}

void WriteErrnoAndExit(int fd, int err) {
  ssize_t ignored = ::write(fd, &err, sizeof(err));
  (void)ignored;
  ::_exit(127);
}

// Runs in the forked child: only async-signal-safe calls from here on.
[[noreturn]] void ExecChild(const PreparedExec& exec, int error_fd, int output_fd,
                            const char* netns_path, bool new_group, int death_signal,
                            pid_t parent) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (new_group) ::setpgid(0, 0);
  if (death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, death_signal);
    if (::getppid() != parent) ::_exit(127);
  }
  if (netns_path != nullptr && netns_path[0] != '\0') {
    int ns = ::open(netns_path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) WriteErrnoAndExit(error_fd, errno);
    ::close(ns);
  }
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
    if (null_fd != STDIN_FILENO) ::close(null_fd);
  }
  if (output_fd >= 0) {
    ::dup2(output_fd, STDOUT_FILENO);
    ::dup2(output_fd, STDERR_FILENO);
    if (output_fd != STDOUT_FILENO && output_fd != STDERR_FILENO) ::close(output_fd);
  }
  ::execve(exec.program.c_str(), exec.argv.data(), exec.envp.data());
  WriteErrnoAndExit(error_fd, errno);
  ::_exit(127);
}

// Forks and execs; returns the pid once exec succeeded (or its errno as an error).
StatusOr<pid_t> ForkExec(const std::vector<std::string>& argv, const Environment& extra_env,
                         int output_fd, const std::string& netns_path, bool new_group,
                         int death_signal) {
  FRUGAL_ASSIGN_OR_RETURN(PreparedExec exec, Prepare(argv, extra_env));
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    return IoError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(error_pipe[0]);
    ::close(error_pipe[1]);
    return IoError(fmt::format("fork: {}", std::strerror(err)));
  }
  if (pid == 0) {
    ::close(error_pipe[0]);
    ExecChild(exec, error_pipe[1], output_fd, netns_path.c_str(), new_group, death_signal, parent);
  }
  ::close(error_pipe[1]);
  if (new_group) ::setpgid(pid, pid);  // also in the parent, so that Signal() never races
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    int status;
    ::waitpid(pid, &status, 0);
    std::string what = netns_path.empty() ? "" : fmt::format(" in {}", netns_path);
    return IoError(fmt::format("cannot start {}{}: {}", argv[0], what, std::strerror(child_errno)));
  }
  return pid;
}

void FillResult(int status, CommandResult& result) {
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    result.term_signal = 0;
  } else if (WIFSIGNALED(status)) {
    result.exit_code = -1;
    result.term_signal = WTERMSIG(status);
  }
}

// SIGINT, SIGTERM, SIGHUP and SIGCHLD: what HeldSignals holds.
sigset_t HeldSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  return set;
}

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, end - start + 1);
}

}  // namespace

std::string ShellQuote(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
                                   "TUVWXYZ0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) {
        if (c == '\'') {
          out += "'\\''";
        } else {
          out += c;
        }
      }
      out += '\'';
    }
  }
  return out;
}

StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   const RunCommandOptions& options) {
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return IoError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  // The child's end loses O_CLOEXEC through dup2 onto stdout/stderr.
  auto pid_or = ForkExec(argv, {}, out_pipe[1], options.netns_path, /*new_group=*/false,
                         /*death_signal=*/SIGKILL);
  ::close(out_pipe[1]);
  if (!pid_or.ok()) {
    ::close(out_pipe[0]);
    return pid_or.status();
  }
  pid_t pid = *pid_or;
  CommandResult result;
  auto deadline = steady_clock::now() + options.timeout;
  bool eof = false;
  steady_clock::time_point eof_at;
  bool exited = false;
  steady_clock::time_point exited_at;
  char buffer[4096];
  while (true) {
    if (!exited) {
      int status;
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        FillResult(status, result);
        exited = true;
        exited_at = steady_clock::now();
      }
    }
    // A grandchild may keep the pipe open; stop reading shortly after the child itself ended.
    if (exited && (eof || steady_clock::now() - exited_at > milliseconds(500))) break;
    if (!exited && steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      int status;
      ::waitpid(pid, &status, 0);
      ::close(out_pipe[0]);
      return TimeoutError(fmt::format("'{}' did not finish within {} ms", ShellQuote(argv),
                                      options.timeout.count()));
    }
    if (eof) {
      // The output is complete; the child has yet to exit.
      BackOff(kExitPoll, steady_clock::now() - eof_at);
      continue;
    }
    pollfd pfd{out_pipe[0], POLLIN, 0};
    int ready = ::poll(&pfd, 1, 20);
    if (ready > 0) {
      ssize_t n = ::read(out_pipe[0], buffer, sizeof(buffer));
      if (n > 0) {
        result.output.append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        eof = true;
        eof_at = steady_clock::now();
      }
    }
  }
  ::close(out_pipe[0]);
  return result;
}

Status RunChecked(const std::vector<std::string>& argv, const RunCommandOptions& options) {
  FRUGAL_ASSIGN_OR_RETURN(CommandResult result, RunCommand(argv, options));
  if (result.exit_code == 0) return Status::Ok();
  std::string why = LastLine(result.output);
  if (why.empty()) {
    why = result.term_signal != 0 ? fmt::format("killed by signal {}", result.term_signal)
                                  : fmt::format("exit code {}", result.exit_code);
  }
  return IoError(fmt::format("'{}' failed: {}", ShellQuote(argv), why));
}

HeldSignals::HeldSignals() {
  const sigset_t set = HeldSet();
  ::pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
}

HeldSignals::~HeldSignals() {
  // A SIGCHLD left pending would be delivered (and ignored) on unblocking; termination signals
  // that were never taken by Poll() are delivered now, as they would have been without us.
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::optional<int> HeldSignals::Poll(std::chrono::milliseconds timeout) {
  const sigset_t set = HeldSet();
  auto deadline = steady_clock::now() + timeout;
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - steady_clock::now());
    if (left.count() < 0) left = std::chrono::nanoseconds(0);
    timespec ts{static_cast<time_t>(left.count() / 1000000000),
                static_cast<long>(left.count() % 1000000000)};
    int sig = ::sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (!received_) received_ = sig;
      return sig;
    }
    if (sig == SIGCHLD) return std::nullopt;
    if (sig < 0 && errno == EINTR) continue;
    return std::nullopt;  // EAGAIN: expired
  }
}

StatusOr<Child> Child::Spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  int output_fd = -1;
  if (!options.output_path.empty()) {
    output_fd =
        ::open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (output_fd < 0) {
      return IoError(fmt::format("cannot open {}: {}", options.output_path, std::strerror(errno)));
    }
  }
  auto pid_or = ForkExec(argv, options.extra_env, output_fd, options.netns_path,
                         options.new_process_group, options.parent_death_signal);
  if (output_fd >= 0) ::close(output_fd);
  if (!pid_or.ok()) return pid_or.status();
  return Child(*pid_or, options.new_process_group);
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_), group_(other.group_), result_(std::move(other.result_)) {
  other.pid_ = -1;
}

Child::~Child() {
  if (pid_ > 0) KillAndReap();
}

bool Child::TryReap() {
  if (pid_ <= 0) return true;
  int status;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    FillResult(status, result_);
    if (group_) ::kill(-pid_, SIGKILL);  // whatever it left behind in its group
    pid_ = -1;
    return true;
  }
  return false;
}

void Child::Signal(int signal) {
  if (pid_ <= 0) return;
  if (group_) {
    ::kill(-pid_, signal);
  } else {
    ::kill(pid_, signal);
  }
}

void Child::KillAndReap() {
  Signal(SIGKILL);
  int status;
  if (::waitpid(pid_, &status, 0) == pid_) FillResult(status, result_);
  pid_ = -1;
}

Status Child::Supervise(HeldSignals& held, steady_clock::time_point deadline, milliseconds grace) {
  std::optional<steady_clock::time_point> kill_at;
  bool timed_out = false;
  while (!TryReap()) {
    auto now = steady_clock::now();
    if (kill_at && now >= *kill_at) {
      KillAndReap();
      break;
    }
    if (!kill_at && now >= deadline) {
      timed_out = true;
      Signal(SIGTERM);
      kill_at = now + grace;
    }
    std::optional<int> sig = held.Poll(milliseconds(100));
    if (sig && !kill_at) {
      Signal(*sig == SIGHUP ? SIGTERM : *sig);
      kill_at = steady_clock::now() + grace;
    }
  }
  if (timed_out) return TimeoutError("the job did not finish before its deadline");
  return Status::Ok();
}

int ShellExitCode(const CommandResult& result) {
  if (result.term_signal != 0) return 128 + result.term_signal;
  return result.exit_code;
}

StatusOr<int> RunSupervised(const std::vector<std::string>& argv, const SpawnOptions& options,
                            milliseconds grace) {
  HeldSignals held;
  FRUGAL_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, options));
  FRUGAL_RETURN_IF_ERROR(child.Supervise(held, steady_clock::time_point::max(), grace));
  if (auto sig = held.received()) return 128 + *sig;
  return ShellExitCode(child.result());
}

}  // namespace frugal::apps
