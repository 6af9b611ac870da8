#include "server/common/logging.h"

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace retryd {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
thread_local std::string thread_name;

// Keeps lines from different threads whole.
absl::Mutex& OutputMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

void SetMinLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= min_level.load(std::memory_order_relaxed);
}

void LogLine(LogLevel level, absl::string_view message) {
  const std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()), " ",
      LevelName(level), " [", thread_name.empty() ? "main" : thread_name, "] ", message, "\n");
  absl::MutexLock lock(&OutputMutex());
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void SetThreadName(absl::string_view name) {
  thread_name = std::string(name);
  pthread_setname_np(pthread_self(), std::string(name.substr(0, 15)).c_str());
}

}  // namespace retryd
