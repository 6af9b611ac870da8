#include "server/common/logging.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace retryd {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> log_format{static_cast<int>(LogFormat::kText)};
thread_local std::string thread_name;
thread_local std::string thread_component;

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

bool IsFirstThread() { return syscall(SYS_gettid) == getpid(); }

const std::string& ThreadName() {
  if (thread_name.empty()) {
    char name[16] = {};
    if (IsFirstThread() || pthread_getname_np(pthread_self(), name, sizeof(name)) != 0 ||
        name[0] == '\0') {
      thread_name = "main";
    } else {
      thread_name = name;
    }
  }
  return thread_name;
}

absl::string_view ThreadComponent() {
  // Decided once per thread, like its name: not a system call per line.
  if (thread_component.empty()) thread_component = IsFirstThread() ? "main" : "retryd";
  return thread_component;
}

// The length of the well-formed UTF-8 sequence at s[i], or 0 if there is
// none there (a stray continuation byte, an overlong form, a surrogate, a
// code point past U+10FFFF, or a sequence cut short).
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

void Write(std::FILE* stream, const std::string& line) {
  absl::MutexLock lock(&OutputMutex());
  std::fwrite(line.data(), 1, line.size(), stream);
  if (stream == stdout) std::fflush(stream);
}

}  // namespace

// `s` as a JSON string, quotes included: control characters, quotes and
// backslashes escaped, a byte that is not part of well-formed UTF-8
// replaced by U+FFFD.
void AppendJsonString(std::string* out, absl::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(s, i);
      if (n == 0) {
        out->append("\\ufffd");
        ++i;
      } else {
        out->append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    // JSON's two-character escapes, as pairs (the character, the one written
    // after a backslash); other control characters as \u00XX.
    static constexpr absl::string_view kShort = "\"\"\\\\\nn\rr\tt";
    const size_t at = kShort.find(static_cast<char>(c));
    if (at != absl::string_view::npos && at % 2 == 0) {
      out->push_back('\\');
      out->push_back(kShort[at + 1]);
    } else if (c < 0x20 || c == 0x7F) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xF]);
    } else {
      out->push_back(static_cast<char>(c));
    }
    ++i;
  }
  out->push_back('"');
}

void SetMinLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= min_level.load(std::memory_order_relaxed);
}

std::optional<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

void SetLogFormat(LogFormat format) { log_format.store(static_cast<int>(format)); }

LogFormat GetLogFormat() {
  return static_cast<LogFormat>(log_format.load(std::memory_order_relaxed));
}

std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view component, absl::string_view thread,
                          absl::string_view message) {
  const std::string when = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  if (format == LogFormat::kText) {
    return absl::StrCat(when, " ", LevelName(level), " [", thread, "] ", message, "\n");
  }
  std::string line =
      absl::StrCat("{\"time\":\"", when, "\",\"level\":\"", LevelName(level), "\",\"component\":");
  AppendJsonString(&line, component);
  line.append(",\"thread\":");
  AppendJsonString(&line, thread);
  line.append(",\"message\":");
  AppendJsonString(&line, message);
  line.append("}\n");
  return line;
}

void LogLine(LogLevel level, absl::string_view message) {
  Write(stderr, FormatLogLine(GetLogFormat(), absl::Now(), level, ThreadComponent(), ThreadName(),
                              message));
}

void LogLineFor(LogLevel level, absl::string_view component, absl::string_view message) {
  if (!LogEnabled(level)) return;
  Write(stderr,
        FormatLogLine(GetLogFormat(), absl::Now(), level, component, ThreadName(), message));
}

void PrintLine(absl::string_view message) {
  if (GetLogFormat() == LogFormat::kText) {
    Write(stdout, absl::StrCat(message, "\n"));
    return;
  }
  Write(stdout, FormatLogLine(LogFormat::kJson, absl::Now(), LogLevel::kInfo, ThreadComponent(),
                              ThreadName(), message));
}

void SetThreadName(absl::string_view name) {
  thread_name = std::string(name);
  pthread_setname_np(pthread_self(), std::string(name.substr(0, 15)).c_str());
}

void SetThreadComponent(absl::string_view component) { thread_component = std::string(component); }

}  // namespace retryd
