// Minimal leveled logging to stderr, safe from any thread.
//
// Abseil 20220623 has no absl/log, so retryd carries this small stand-in:
// one line per call. As text (the default): UTC time, level, the calling
// thread's name (see SetThreadName) and the message. As JSON (--log_format
// =json, for log shippers): one object per line with the fields "time",
// "level", "component", "thread" and "message", in that order, strings
// escaped so that any message bytes give valid JSON. Messages are written
// as given: what must not be logged (secrets) is kept out by the callers
// (server/kafka/properties.h's RedactLogLine for librdkafka's lines).
#ifndef RETRYD_SERVER_COMMON_LOGGING_H_
#define RETRYD_SERVER_COMMON_LOGGING_H_

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace retryd {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Lines below `level` are dropped. Default: kInfo.
void SetMinLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

enum class LogFormat { kText, kJson };

// "text" or "json"; nullopt for anything else.
std::optional<LogFormat> ParseLogFormat(absl::string_view name);

// How every line is written from now on. Default: kText. Meant to be set
// once, by main(), before other threads log.
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();

// Writes one line to stderr, for the calling thread's component (see
// SetThreadComponent). Thread-safe.
void LogLine(LogLevel level, absl::string_view message);

// Writes one line to stderr for `component`, whichever thread calls it:
// for lines relayed from a library on its own threads (librdkafka's).
void LogLineFor(LogLevel level, absl::string_view component, absl::string_view message);

// Writes one line to stdout: `message` as it is in text format, a log
// object of level INFO in JSON format. For what retryd prints rather than
// logs (the control API's address, the summary lines), so that in JSON
// format both streams hold only objects. Thread-safe; flushes.
void PrintLine(absl::string_view message);

// Appends `s` as a JSON string, quotes included: control characters,
// quotes and backslashes escaped, a byte that is not part of well-formed
// UTF-8 replaced by U+FFFD. Pure.
void AppendJsonString(std::string* out, absl::string_view s);

// One line as LogLine writes it in `format`, newline included. Pure.
std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view component, absl::string_view thread,
                          absl::string_view message);

// Names the calling thread in log lines (and for the OS, first 15 bytes).
// A thread that names none is "main" if it is the process's first thread,
// else the name the OS knows it by (librdkafka names its own threads).
void SetThreadName(absl::string_view name);

// The part of retryd the calling thread works for, the "component" of its
// lines in JSON format: "engine", "kafka", "control", "processor", "demo",
// "main". A thread that sets none is "main" if it is the process's first
// thread, else "retryd".
void SetThreadComponent(absl::string_view component);

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
