// Child processes for the command-line layer, all started the same way (ForkExec in the .cc):
// run a command with a deadline and capture its output, supervise a long-running child while
// SIGINT/SIGTERM/SIGHUP are held back so that the caller can clean up before it exits, or run a
// child to its end forwarding those signals.
//
// Used by the launcher (mpirun for --np), the network emulation (ip, tc, mpirun) and the sweep
// harness (one `frugal train` per point). Not thread safe: meant for the single main thread of
// the `frugal` command.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

// Variables added to (or replacing those of) the inherited environment of a child.
using Environment = std::vector<std::pair<std::string, std::string>>;

struct CommandResult {
  int exit_code = -1;   // exit status when the command exited, else -1
  int term_signal = 0;  // the signal that ended it, else 0
  std::string output;   // stdout and stderr, interleaved, when captured
};

struct RunCommandOptions {
  std::chrono::milliseconds timeout{10000};
  // Path of a network namespace (/run/netns/NAME) the child enters before exec, or empty.
  std::string netns_path;
};

// Runs argv[0] (looked up on PATH) with its arguments, stdin from /dev/null and stdout+stderr
// captured. Returns kTimeout (after killing it) when it does not finish in time, kNotFound when
// the program does not exist, kIoError when it cannot be started. A non-zero exit is not an error
// here: look at exit_code.
StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   const RunCommandOptions& options = {});

// RunCommand, and turn anything but exit code 0 into kIoError quoting the command and the last
// line of its output.
Status RunChecked(const std::vector<std::string>& argv, const RunCommandOptions& options = {});

// "ip netns add frg-1-0-c" (arguments with spaces are quoted).
std::string ShellQuote(const std::vector<std::string>& argv);

// While alive, SIGINT, SIGTERM, SIGHUP and SIGCHLD are blocked in the calling thread; they stay
// pending until Poll() takes them. Restores the previous mask when destroyed. Children started by
// this file unblock every signal before exec.
class HeldSignals {
 public:
  HeldSignals();
  ~HeldSignals();
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

  // Waits up to `timeout` for one of the held signals. Returns SIGINT/SIGTERM/SIGHUP when one
  // arrived (and remembers it), nothing on SIGCHLD or expiry.
  std::optional<int> Poll(std::chrono::milliseconds timeout);
  // Takes a pending SIGINT/SIGTERM/SIGHUP without waiting.
  std::optional<int> Pending() { return Poll(std::chrono::milliseconds(0)); }
  // The first termination signal seen, if any.
  std::optional<int> received() const { return received_; }

 private:
  sigset_t old_mask_;
  std::optional<int> received_;
};

struct SpawnOptions {
  // Start the child in a process group of its own (so a terminal's Ctrl-C reaches only us).
  bool new_process_group = true;
  // The kernel sends this signal to the child when the parent dies (0: none).
  int parent_death_signal = SIGTERM;
  // Path of a network namespace the child enters before exec, or empty.
  std::string netns_path;
  // File to write stdout and stderr to (appending), or empty to inherit ours.
  std::string output_path;
  Environment extra_env;
};

// A started child process, waited for with a deadline.
class Child {
 public:
  static StatusOr<Child> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options);

  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) = delete;
  Child(const Child&) = delete;
  ~Child();  // kills and reaps a child that is still running

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Reaps the child if it has ended. Returns true when it has (then result() is valid).
  bool TryReap();
  // Sends `signal` to the child (its whole process group when it has one).
  void Signal(int signal);
  // Waits for the end, checking every `poll` for termination signals in `held`:
  // - a termination signal is forwarded to the child once (it is given `grace` to end, then
  //   killed);
  // - at `deadline` the child gets SIGTERM, then SIGKILL after `grace`, and kTimeout is returned.
  // Returns OK once the child has ended (see result(); held.received() says whether we were
  // interrupted).
  Status Supervise(HeldSignals& held, std::chrono::steady_clock::time_point deadline,
                   std::chrono::milliseconds grace = std::chrono::milliseconds(15000));

  const CommandResult& result() const { return result_; }

 private:
  Child(pid_t pid, bool group) : pid_(pid), group_(group) {}
  void KillAndReap();

  pid_t pid_ = -1;
  bool group_ = false;
  CommandResult result_;
};

// The exit code a shell would report for `result`: the exit status, or 128 + signal.
int ShellExitCode(const CommandResult& result);

// Spawns `argv` and supervises it to its end without a deadline (Child::Supervise: a SIGINT,
// SIGTERM or SIGHUP this process receives is forwarded once, and the child is killed `grace`
// later if it is still running). Returns the exit code a shell would report: 128 + the signal
// when this process received one, else ShellExitCode of the child. kNotFound when the program
// does not exist, kIoError when it cannot be started.
StatusOr<int> RunSupervised(const std::vector<std::string>& argv, const SpawnOptions& options,
                            std::chrono::milliseconds grace);

// The grace `frugal` gives a job (mpirun and its ranks) between forwarding a signal and killing it.
inline constexpr auto kJobKillGrace = std::chrono::seconds(10);

}  // namespace frugal::apps
