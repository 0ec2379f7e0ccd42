#include "frugal/logging.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

namespace frugal {
namespace {

std::string_view LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
    case LogLevel::kOff:
      return "-";
  }
  return "?";
}

}  // namespace

StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  return InvalidArgumentError(
      fmt::format("unknown log level '{}' (accepted: debug, info, warning, error, off)", name));
}

void Logger::Log(LogLevel level, std::string_view message) const {
  if (!Enabled(level) || level == LogLevel::kOff) return;
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::string line = rank_ >= 0
                         ? fmt::format("{}{:%H:%M:%S}.{:03d} [rank {}] {}\n", LevelTag(level),
                                       fmt::localtime(std::chrono::system_clock::to_time_t(now)),
                                       ms.count(), rank_, message)
                         : fmt::format("{}{:%H:%M:%S}.{:03d} {}\n", LevelTag(level),
                                       fmt::localtime(std::chrono::system_clock::to_time_t(now)),
                                       ms.count(), message);
  // One write per line keeps concurrent lines whole.
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace frugal
