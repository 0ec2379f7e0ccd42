// Lets the emulated hosts' namespaces take a TCP congestion control the machine restricts.
//
// A network namespace other than the machine's own may only take as its default a congestion
// control listed in the machine's net.ipv4.tcp_allowed_congestion_control (the kernel refuses the
// others with EPERM). That list holds reno and the machine's own default unless an administrator
// widened it, so on a machine whose default is bbr the emulation's default, cubic, is refused.
// TcpAllowance adds the name to the list while the namespaces take it and puts the list back when
// it is destroyed: a namespace keeps the default it took, so the machine's list differs only while
// a network is built. Callers hold the emulation's StateLock, so two runs never interleave their
// changes of the list.
//
// Needs root. Not thread safe.
#pragma once

#include <optional>
#include <string>

#include "frugal/logging.h"
#include "frugal/status.h"

namespace frugal::apps {

class TcpAllowance {
 public:
  explicit TcpAllowance(const Logger& logger) : logger_(logger) {}
  ~TcpAllowance();  // Restore(), errors logged
  TcpAllowance(const TcpAllowance&) = delete;
  TcpAllowance& operator=(const TcpAllowance&) = delete;

  // Adds `name` to the machine's allowed list when the kernel has it (it is in
  // tcp_available_congestion_control) and the list does not; true when it did. kIoError when the
  // list cannot be read or written.
  StatusOr<bool> Allow(const std::string& name);
  // Writes back the list as it was before the first Allow that changed it. Idempotent.
  Status Restore();

 private:
  Logger logger_;
  std::optional<std::string> original_;  // the list before this object changed it
};

// True when the space-separated `list` holds the word `name`.
bool ListsWord(const std::string& list, const std::string& name);

}  // namespace frugal::apps
