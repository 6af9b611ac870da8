#include "server/control/auth.h"

#include <cstddef>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"

namespace retryd::control {
BearerTokenAuth::BearerTokenAuth(std::string token, bool read_only_requires_token)
    : token_(std::move(token)), read_only_requires_token_(read_only_requires_token) {}

bool BearerTokenAuth::ConstantTimeEquals(const std::string& a, const std::string& b) {
  // Walks the whole of `a` whatever matches, so the time reveals nothing
  // about a common prefix; `volatile` keeps the compiler from stopping
  // early once `diff` is non-zero.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  if (b.empty()) return a.empty();
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<unsigned char>(a[i] ^ b[i % b.size()]);
  }
  return diff == 0;
}

absl::Status BearerTokenAuth::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, Access access) const {
  std::optional<absl::string_view> authorization;
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  return CheckValue(authorization, access, "metadata");
}

absl::Status BearerTokenAuth::CheckHeader(std::optional<absl::string_view> authorization,
                                          Access access) const {
  return CheckValue(authorization, access, "header");
}

absl::Status BearerTokenAuth::CheckValue(std::optional<absl::string_view> authorization,
                                         Access access, absl::string_view carrier) const {
  if (!token_.has_value()) return absl::OkStatus();
  if (access == Access::kReadOnly && !read_only_requires_token_) return absl::OkStatus();
  const char* what = access == Access::kMutating ? "this call changes the engine and needs"
                                                 : "this server needs for every call";
  const std::string how_to =
      absl::StrCat("send the ", carrier, " \"authorization: Bearer <token>\"");
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat("missing bearer token: ", what, " the token; ", how_to));
  }
  const absl::string_view value = *authorization;
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(value, kScheme)) {
    return absl::UnauthenticatedError(
        absl::StrCat("the authorization ", carrier, " is not a bearer token; ", how_to));
  }
  const std::string presented(absl::StripAsciiWhitespace(value.substr(kScheme.size())));
  if (!ConstantTimeEquals(presented, *token_)) {
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return absl::OkStatus();
}

absl::Status BearerTokenAuth::Authenticate(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, Access access,
    absl::string_view peer) const {
  return LogRefusal(Check(metadata, access), peer);
}

absl::Status BearerTokenAuth::AuthenticateHeader(std::optional<absl::string_view> authorization,
                                                 Access access, absl::string_view peer) const {
  return LogRefusal(CheckHeader(authorization, access), peer);
}

absl::Status BearerTokenAuth::LogRefusal(absl::Status status, absl::string_view peer) const {
  int64_t held_back = 0;
  if (!status.ok() && refusal_log_->Allow(absl::Now(), &held_back)) {
    LogWarning("control: authentication failed for a call from ", peer, ": ", status.message(),
               LogThrottle::HeldBackNote(held_back));
  }
  return status;
}

}  // namespace retryd::control
