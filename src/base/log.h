// Minimal leveled logging to stderr, thread-safe, with a process-wide level (--log-level).
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

namespace fission {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warning" or "error"; anything else is an Error naming the value.
LogLevel ParseLogLevel(std::string_view name);
void LogMessage(LogLevel level, const std::string& message);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (level >= GetLogLevel()) LogMessage(level, StrCat(args...));
}

}  // namespace fission
