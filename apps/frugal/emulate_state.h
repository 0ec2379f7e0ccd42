// What emulated networks leave on this machine, and how a run finds and removes what a killed run
// left behind.
//
// Names: everything a run creates is named frg-<pid>-<k>-... (namespaces) and kept under
// /run/frugal-emulate/frg-<pid>-<k>/ (hostfile, agent script, owner record). Every run records
// "pid start-time" of its owner in state_dir/owner before creating anything. A run whose owner
// process is gone (or whose pid now belongs to a process started at another time) is dead:
// RemoveLeftovers() kills the processes still inside its namespaces, deletes them and its state
// directory. Creation and left-over removal happen under an exclusive flock on the state root's
// lock file (StateLock), so two starting runs never pick the same tag or remove each other's
// half-built namespaces.
//
// Needs root for anything that touches namespaces. Not thread safe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/logging.h"
#include "frugal/status.h"

namespace frugal::apps {

inline constexpr std::string_view kEmulateStateRoot = "/run/frugal-emulate";

// "/run/netns/NAME": where `ip netns` keeps namespace NAME.
std::string NamespacePath(const std::string& name);

// "frg-123-0-h2" -> "frg-123-0"; empty when the name does not follow the pattern.
std::string TagOf(const std::string& name);
// The owner's pid in a tag: "frg-123-0" -> 123. Precondition: TagOf(tag) == tag.
long PidOfTag(const std::string& tag);

// An exclusive flock on the state root's lock file, taken within 60 s (kTimeout otherwise).
class StateLock {
 public:
  static StatusOr<std::unique_ptr<StateLock>> Acquire();
  ~StateLock();  // closing releases the flock
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_;
};

// Writes `text` to `path` with permissions `perms` (kIoError naming the file).
Status WriteStateFile(const std::filesystem::path& path, const std::string& text,
                      std::filesystem::perms perms);

// Records this process as the owner of the run kept in `state_dir`.
Status WriteOwnerRecord(const std::filesystem::path& state_dir);

// Kills every process inside namespace `name`, waits until none is left (kTimeout after 5 s) and
// deletes the namespace (which deletes the interfaces in it). Nothing to do when it is gone.
Status DeleteNamespace(const std::string& name);

// Removes what killed earlier runs left behind (namespaces, their processes, state directories)
// and logs one warning per removed run; runs whose owner process is alive are left alone.
// RemoveLeftovers takes the state lock itself, RemoveLeftoversLocked expects it held. Return the
// tags of the runs removed.
StatusOr<std::vector<std::string>> RemoveLeftovers(const Logger& logger);
StatusOr<std::vector<std::string>> RemoveLeftoversLocked(const Logger& logger);

}  // namespace frugal::apps
