// Logging: leveled lines to stderr, prefixed with time, level and (when known) the rank.
//
// A Logger is a value owned by whatever context needs one; there is no process-wide logger.
// Log() writes one whole line with a single write, so lines of concurrent threads or ranks do not
// interleave. Thread safe.
#pragma once

#include <string>
#include <string_view>

#include "frugal/status.h"

namespace frugal {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

StatusOr<LogLevel> ParseLogLevel(std::string_view name);

class Logger {
 public:
  Logger() = default;
  explicit Logger(LogLevel level, int rank = -1) : level_(level), rank_(rank) {}

  LogLevel level() const { return level_; }
  bool Enabled(LogLevel level) const { return level >= level_; }
  void Log(LogLevel level, std::string_view message) const;

  void Debug(std::string_view m) const { Log(LogLevel::kDebug, m); }
  void Info(std::string_view m) const { Log(LogLevel::kInfo, m); }
  void Warning(std::string_view m) const { Log(LogLevel::kWarning, m); }
  void Error(std::string_view m) const { Log(LogLevel::kError, m); }

 private:
  LogLevel level_ = LogLevel::kWarning;
  int rank_ = -1;
};

}  // namespace frugal
