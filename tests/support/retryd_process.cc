#include "tests/support/retryd_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace retryd::testing {
const char kRetrydBinary[] = RETRYD_BINARY;

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

::testing::AssertionResult ExitedWith(const std::optional<int>& status, int code) {
  if (!status.has_value()) return ::testing::AssertionFailure() << "still running";
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << DescribeStatus(*status) << ", want exit status " << code;
}

RetrydProcess::RetrydProcess(const std::string& log_prefix, const std::vector<std::string>& args,
                             const std::string& binary)
    : stdout_path_(log_prefix + ".stdout"), stderr_path_(log_prefix + ".stderr") {
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  // librdkafka's debug lines (see KafkaDebugConfig) are logged at debug level.
  if (const char* d = std::getenv("RETRYD_KAFKA_DEBUG");
      binary == kRetrydBinary && d != nullptr && *d != 0) {
    argv_strings.push_back("--verbose");
  }
  // Everything the child needs is prepared here: after fork() in a
  // multi-threaded process it may only make async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int out = open(stdout_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || err < 0 || null < 0) {
    ADD_FAILURE() << "cannot open log files " << log_prefix << ".*: " << std::strerror(errno);
  } else {
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      // Dies with the test process, even if a timeout kills it with SIGKILL.
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      struct sigaction dfl = {};
      dfl.sa_handler = SIG_DFL;
      sigaction(SIGINT, &dfl, nullptr);
      sigaction(SIGTERM, &dfl, nullptr);
      sigaction(SIGPIPE, &dfl, nullptr);
      if (dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (pid_ < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
  }
  for (int fd : {out, err, null}) {
    if (fd >= 0) close(fd);
  }
}

RetrydProcess::~RetrydProcess() {
  if (pid_ <= 0 || status_.has_value()) return;
  kill(pid_, SIGKILL);
  if (!WaitExit(absl::Seconds(30)).has_value()) {
    ADD_FAILURE() << "retryd pid " << pid_ << " survived SIGKILL for 30 s";
  }
}

bool RetrydProcess::Running() {
  if (pid_ <= 0 || status_.has_value()) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) status_ = status;
  return !status_.has_value();
}

void RetrydProcess::Signal(int sig) {
  ASSERT_TRUE(Running()) << "retryd already " << DescribeStatus(*status_);
  ASSERT_EQ(kill(pid_, sig), 0) << std::strerror(errno);
}

std::optional<int> RetrydProcess::WaitExit(absl::Duration timeout) {
  WaitFor([&] { return !Running(); }, timeout);
  return status_;
}

std::string RetrydProcess::Stdout() const { return ReadFileOrEmpty(stdout_path_); }
std::string RetrydProcess::Stderr() const { return ReadFileOrEmpty(stderr_path_); }

namespace {

// The last `lines` lines of `text`.
std::string Tail(const std::string& text, size_t lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (size_t n = 0; n < lines && pos > 0; ++n) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos == 0 ? 0 : pos + 1);
}

}  // namespace

std::string KafkaDebugConfig() {
  const char* d = std::getenv("RETRYD_KAFKA_DEBUG");
  if (d == nullptr || *d == 0) return "";
  return absl::StrCat("  properties { key: \"debug\" value: \"", d, "\" }\n");
}

void KeepLogsAndPrintTails(TempDir& dir, size_t lines) {
  if (dir.path().empty()) return;
  dir.Keep();
  std::vector<std::filesystem::path> logs;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path(), ignored)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".stdout" || ext == ".stderr") logs.push_back(entry.path());
  }
  std::sort(logs.begin(), logs.end());
  for (const auto& path : logs) {
    std::fprintf(stderr, "---- tail of %s ----\n%s\n", path.c_str(),
                 Tail(ReadFileOrEmpty(path.string()), lines).c_str());
  }
  std::fprintf(stderr, "---- logs and configs kept in %s ----\n", dir.path().c_str());
}

}  // namespace retryd::testing
