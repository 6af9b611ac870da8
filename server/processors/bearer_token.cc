#include "server/processors/bearer_token.h"

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/common/read_file.h"

namespace retryd {
namespace {

std::string Quote(const std::string& s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

}  // namespace

BearerToken::BearerToken(std::string path, std::string token, FileStamp stamp)
    : path_(std::move(path)),
      token_(std::move(token)),
      stamp_(stamp),
      next_check_(absl::Now() + kRecheckInterval) {}

absl::StatusOr<BearerToken::FileStamp> BearerToken::Stamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", Quote(path)));
  }
  return FileStamp{st.st_mtim, st.st_size, st.st_ino};
}

absl::StatusOr<std::string> BearerToken::TokenIn(const std::string& contents,
                                                 const std::string& where) {
  const absl::string_view token = absl::StripAsciiWhitespace(contents);
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " holds no token"));
  for (char c : token) {
    // It travels as an HTTP/2 header value.
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " holds a token with a byte that is not printable ASCII (a wrong file?)"));
    }
  }
  return std::string(token);
}

absl::StatusOr<std::unique_ptr<BearerToken>> BearerToken::FromFile(const std::string& path) {
  // Stamped before reading: a change during the read is seen at the next
  // check rather than missed.
  absl::StatusOr<FileStamp> stamp = Stamp(path);
  if (!stamp.ok()) return stamp.status();
  absl::StatusOr<std::string> contents = ReadFileToString(path, kMaxTokenBytes);
  if (!contents.ok()) return contents.status();
  absl::StatusOr<std::string> token = TokenIn(*contents, Quote(path));
  if (!token.ok()) return token.status();
  return std::unique_ptr<BearerToken>(new BearerToken(path, *std::move(token), *stamp));
}

absl::StatusOr<std::unique_ptr<BearerToken>> BearerToken::FromEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", Quote(name), " is not set"));
  }
  absl::StatusOr<std::string> token =
      TokenIn(value, absl::StrCat("environment variable ", Quote(name)));
  if (!token.ok()) return token.status();
  return std::unique_ptr<BearerToken>(new BearerToken("", *std::move(token), FileStamp{}));
}

std::string BearerToken::Get() {
  FileStamp known;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (path_.empty() || now < next_check_) return token_;
    // This caller checks; the others keep the current token meanwhile.
    next_check_ = now + kRecheckInterval;
    known = stamp_;
  }
  absl::StatusOr<FileStamp> stamp = Stamp(path_);
  std::string token;
  if (stamp.ok() && *stamp == known) {
    absl::MutexLock lock(&mu_);
    return token_;
  }
  absl::Status failure;
  if (stamp.ok()) {
    absl::StatusOr<std::string> contents = ReadFileToString(path_, kMaxTokenBytes);
    absl::StatusOr<std::string> read =
        contents.ok() ? TokenIn(*contents, Quote(path_)) : contents.status();
    if (read.ok()) {
      token = *std::move(read);
    } else {
      failure = read.status();
    }
  } else {
    failure = stamp.status();
  }
  if (!failure.ok()) {
    // At most once per kRecheckInterval: the stamp is not taken, so the
    // next check reads again.
    LogWarning("grpc processor: token_file: ", failure.message(), "; keeping the last good token");
    absl::MutexLock lock(&mu_);
    return token_;
  }
  absl::MutexLock lock(&mu_);
  token_ = std::move(token);
  stamp_ = *stamp;
  return token_;
}

}  // namespace retryd
