// The bearer token the `grpc` processor sends with every call: from a file
// that is read again when it changes (so a rotated token is picked up
// without a restart), or from an environment variable read once.
//
// Thread-safe: Get() is called by every retryd thread for every call.
#ifndef RETRYD_SERVER_PROCESSORS_BEARER_TOKEN_H_
#define RETRYD_SERVER_PROCESSORS_BEARER_TOKEN_H_

#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace retryd {

class BearerToken {
 public:
  // A token file is read at most this often, however many calls ask.
  static constexpr absl::Duration kRecheckInterval = absl::Seconds(1);
  // A token is short; a larger file is the wrong file.
  static constexpr size_t kMaxTokenBytes = 64 * 1024;

  // Reads `path` now. An error (naming the file) if it cannot be read, is
  // too large, or holds no usable token (empty, or anything but printable
  // ASCII once surrounding whitespace is trimmed).
  static absl::StatusOr<std::unique_ptr<BearerToken>> FromFile(const std::string& path);
  // The value of environment variable `name`, trimmed likewise; an error if
  // it is unset or unusable.
  static absl::StatusOr<std::unique_ptr<BearerToken>> FromEnv(const std::string& name);

  // The current token. For a file: re-read when its modification time,
  // size or inode changed, checked at most once per kRecheckInterval; a
  // failed re-read keeps the last good token (and is logged, throttled).
  std::string Get() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What identifies a version of the file without reading it.
  struct FileStamp {
    struct timespec mtime = {};
    off_t size = -1;
    ino_t inode = 0;
    bool operator==(const FileStamp& o) const {
      return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size &&
             inode == o.inode;
    }
  };

  BearerToken(std::string path, std::string token, FileStamp stamp);

  static absl::StatusOr<FileStamp> Stamp(const std::string& path);
  // The token `contents` hold, or an error saying why there is none.
  static absl::StatusOr<std::string> TokenIn(const std::string& contents, const std::string& where);

  const std::string path_;  // Empty for a token from the environment.
  absl::Mutex mu_;          // Guards the fields below.
  std::string token_ ABSL_GUARDED_BY(mu_);
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd

#endif  // RETRYD_SERVER_PROCESSORS_BEARER_TOKEN_H_
