#include "server/common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace retryd {
namespace {

// Closes the descriptor on every return path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  const int fd_;
};

// The path as it goes into a message: a path may hold any byte but NUL, and
// a newline in it would split the one-line errors callers build around it.
std::string Quoted(const std::string& path) {
  return absl::StrCat("\"", absl::CHexEscape(path), "\"");
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  const FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", Quoted(path)));
  }
  std::string contents;
  char buffer[64 * 1024];
  for (;;) {
    // One byte past the limit is enough to know the file is too large.
    const size_t want = std::min(sizeof(buffer), max_bytes + 1 - contents.size());
    const ssize_t n = read(fd.get(), buffer, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", Quoted(path)));
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
    if (contents.size() > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(path), " is larger than ", max_bytes, " bytes"));
    }
  }
  return contents;
}

}  // namespace retryd
