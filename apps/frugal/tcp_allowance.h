// Lets the emulated hosts' namespaces take a TCP congestion control the machine restricts.
//
// A network namespace other than the machine's own may only take as its default a congestion
// control listed in the machine's net.ipv4.tcp_allowed_congestion_control (the kernel refuses the
// others with EPERM). That list holds reno and the machine's own default unless an administrator
// widened it, so on a machine whose default is bbr the emulation's default, cubic, is refused.
// TcpAllowance adds the name to the list while the namespaces take it and puts the list back when
// it is destroyed: a namespace keeps the default it took, so the machine's list differs only while
// a network is built. Callers hold the emulation's StateLock, so two runs never interleave their
// changes of the list. The list as it was is recorded in the state root (kAllowanceRecord) while
// it is widened, so that the next run puts it back when a run is killed in between
// (RestoreLeftAllowance).
//
// Needs root. Not thread safe.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "frugal/logging.h"
#include "frugal/status.h"

namespace frugal::apps {

// The machine's allowed list while a run has widened it, in kEmulateStateRoot.
inline constexpr std::string_view kAllowanceRecord = "tcp_allowed_congestion_control";

class TcpAllowance {
 public:
  // `state_root`: where the record of the list is kept (kEmulateStateRoot).
  TcpAllowance(std::filesystem::path state_root, const Logger& logger)
      : record_(std::move(state_root) / kAllowanceRecord), logger_(logger) {}
  ~TcpAllowance();  // Restore(), errors logged
  TcpAllowance(const TcpAllowance&) = delete;
  TcpAllowance& operator=(const TcpAllowance&) = delete;

  // Adds `name` to the machine's allowed list when the kernel has it (it is in
  // tcp_available_congestion_control) and the list does not; true when it did. kIoError when the
  // list cannot be read or written.
  StatusOr<bool> Allow(const std::string& name);
  // Writes back the list as it was before the first Allow that changed it and removes the record.
  // Idempotent.
  Status Restore();

 private:
  std::filesystem::path record_;
  Logger logger_;
  std::optional<std::string> original_;  // the list before this object changed it
};

// Puts back the list a killed run left widened (its record in `state_root`), with a warning;
// nothing to do without a record. Callers hold the StateLock.
Status RestoreLeftAllowance(const std::filesystem::path& state_root, const Logger& logger);

// The first line of /proc/sys/net/ipv4/NAME, the machine's own (kIoError naming the file when it
// cannot be read).
StatusOr<std::string> ReadIpv4Sysctl(const std::string& name);

// Sets the machine's net.ipv4.tcp_allowed_congestion_control to `list` (space-separated names).
// Callers hold the StateLock.
Status SetAllowedCongestionControls(const std::string& list);

// True when the space-separated `list` holds the word `name`.
bool ListsWord(const std::string& list, const std::string& name);

}  // namespace frugal::apps
