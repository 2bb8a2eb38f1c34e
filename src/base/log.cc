#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace fission {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mutex;
}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

LogLevel ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "error" || name == "critical") return LogLevel::kError;
  Fail("unknown log level '", name, "' (expected debug, info, warning or error)");
}

void LogMessage(LogLevel level, const std::string& message) {
  static const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const double seconds = std::chrono::duration<double>(now).count();
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[%.3f %s] %s\n", seconds, kNames[static_cast<int>(level)], message.c_str());
}

}  // namespace fission
