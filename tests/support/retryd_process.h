// The built retryd binary as a child process, for tests that judge it from
// outside: exit status, output, signals. Used from the test's thread only.
#ifndef RETRYD_TESTS_SUPPORT_RETRYD_PROCESS_H_
#define RETRYD_TESTS_SUPPORT_RETRYD_PROCESS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace retryd::testing {

// The retryd binary of this build.
extern const char kRetrydBinary[];

// "exited with status N", "killed by signal N", ... for a wait status.
std::string DescribeStatus(int status);

// Whether `status` (a wait status; nullopt: still running) is an exit with
// status `code`.
::testing::AssertionResult ExitedWith(const std::optional<int>& status, int code);

// One run of the retryd binary (or `binary`). Its stdout and stderr go to
// `<log_prefix>.stdout` and `<log_prefix>.stderr`. The destructor kills
// (SIGKILL) and reaps it if it is still running. The child dies with the
// test process.
class RetrydProcess {
 public:
  RetrydProcess(const std::string& log_prefix, const std::vector<std::string>& args,
                const std::string& binary = kRetrydBinary);
  ~RetrydProcess();

  RetrydProcess(const RetrydProcess&) = delete;
  RetrydProcess& operator=(const RetrydProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // False once the process has exited (and then it is reaped).
  bool Running();

  void Signal(int sig);

  // The wait status once the process has exited, waiting at most `timeout`;
  // nullopt if it is still running then.
  std::optional<int> WaitExit(absl::Duration timeout);

  std::string Stdout() const;
  std::string Stderr() const;

 private:
  const std::string stdout_path_;
  const std::string stderr_path_;
  int pid_ = -1;
  std::optional<int> status_;  // Set once reaped.
};

// The config lines (inside `kafka { ... }`) that turn on librdkafka's debug
// contexts named by $RETRYD_KAFKA_DEBUG (e.g. "cgrp,fetch"), or "" when it is
// unset; RetrydProcess then runs retryd with --verbose so that they show.
std::string KafkaDebugConfig();

// For a failed test: keeps `dir` for someone to look at and prints the last
// `lines` lines of every child's log in it (the *.stdout and *.stderr files
// RetrydProcess writes), then where the directory is.
void KeepLogsAndPrintTails(TempDir& dir, size_t lines);

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_RETRYD_PROCESS_H_
