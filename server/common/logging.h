// Minimal leveled logging to stderr, safe from any thread.
//
// Abseil 20220623 has no absl/log, so retryd carries this small stand-in:
// one line per call, prefixed with UTC time, level and the calling thread's
// name (see SetThreadName).
#ifndef RETRYD_SERVER_COMMON_LOGGING_H_
#define RETRYD_SERVER_COMMON_LOGGING_H_

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace retryd {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Lines below `level` are dropped. Default: kInfo.
void SetMinLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

// Writes one line. Thread-safe.
void LogLine(LogLevel level, absl::string_view message);

// Names the calling thread in log lines (and for the OS, first 15 bytes).
void SetThreadName(absl::string_view name);

template <typename... Args>
void LogInfo(const Args&... args) {
  if (LogEnabled(LogLevel::kInfo)) LogLine(LogLevel::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  if (LogEnabled(LogLevel::kWarning)) LogLine(LogLevel::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  if (LogEnabled(LogLevel::kError)) LogLine(LogLevel::kError, absl::StrCat(args...));
}
template <typename... Args>
void LogDebug(const Args&... args) {
  if (LogEnabled(LogLevel::kDebug)) LogLine(LogLevel::kDebug, absl::StrCat(args...));
}

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_LOGGING_H_
