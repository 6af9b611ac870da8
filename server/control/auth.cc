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
namespace {

constexpr absl::string_view kHowTo = "send the metadata \"authorization: Bearer <token>\"";

}  // namespace

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
  if (!token_.has_value()) return absl::OkStatus();
  if (access == Access::kReadOnly && !read_only_requires_token_) return absl::OkStatus();
  const char* what = access == Access::kMutating ? "this RPC changes the engine and needs"
                                                 : "this server needs for every RPC";
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat("missing bearer token: ", what, " the token; ", kHowTo));
  }
  const absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(value, kScheme)) {
    return absl::UnauthenticatedError(
        absl::StrCat("the authorization metadata is not a bearer token; ", kHowTo));
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
  absl::Status status = Check(metadata, access);
  int64_t held_back = 0;
  if (!status.ok() && refusal_log_->Allow(absl::Now(), &held_back)) {
    LogWarning("control: authentication failed for a call from ", peer, ": ", status.message(),
               LogThrottle::HeldBackNote(held_back));
  }
  return status;
}

}  // namespace retryd::control
