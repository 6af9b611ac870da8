// Bearer-token check for the control API and the HTTP listener.
//
// A handler calls Check() (gRPC) or CheckHeader() (HTTP) first thing,
// saying whether its call mutates the engine. With no token configured every call passes. With a
// token, mutating calls must carry the metadata `authorization: Bearer <token>`; read-only calls
// must too only when `read_only_requires_token`. The comparison takes the same time whatever the
// presented token shares with the real one, so a caller cannot guess it byte by byte. Health and
// reflection are separate services and never see this check.
//
// Authenticate() is Check() (AuthenticateHeader() is CheckHeader()) plus a
// warning for each refused call, naming
// the caller's address and the reason (never a token), at most one line a
// second with a count of the lines held back, so a client retrying in a
// loop or guessing tokens cannot flood the log.
//
// Thread-safe: immutable after construction but for the log throttle, which
// is thread-safe and shared by copies.
#ifndef RETRYD_SERVER_CONTROL_AUTH_H_
#define RETRYD_SERVER_CONTROL_AUTH_H_

#include <grpcpp/support/string_ref.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/common/log_throttle.h"

namespace retryd::control {

enum class Access {
  kReadOnly,  // GetStatus, WatchMetrics, ListInFlight.
  // StartRetryThreads, StopRetryThreads, SetInOrder, SetOrderingMode,
  // DeadLetterRecord.
  kMutating,
};

class BearerTokenAuth {
 public:
  // No token: every call passes.
  BearerTokenAuth() = default;
  // `token` must not be empty.
  BearerTokenAuth(std::string token, bool read_only_requires_token);

  bool enabled() const { return token_.has_value(); }

  // OK, or UNAUTHENTICATED saying what is missing or wrong (never the
  // token). `metadata` is the call's client metadata.
  absl::Status Check(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                     Access access) const;

  // Check(), logging a refusal with `peer` (gRPC's "ipv4:10.0.0.7:51234").
  absl::Status Authenticate(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                            Access access, absl::string_view peer) const;

  // Check() for an HTTP request: `authorization` is the value of its
  // Authorization header, nullopt without one.
  absl::Status CheckHeader(std::optional<absl::string_view> authorization, Access access) const;
  // CheckHeader(), logging a refusal with `peer` ("10.0.0.7:51234").
  absl::Status AuthenticateHeader(std::optional<absl::string_view> authorization, Access access,
                                  absl::string_view peer) const;

  // Whether `a` equals `b`, in time that depends only on their lengths.
  static bool ConstantTimeEquals(const std::string& a, const std::string& b);

 private:
  // The check itself; `carrier` names where the token travels ("metadata",
  // "header") in the error's advice.
  absl::Status CheckValue(std::optional<absl::string_view> authorization, Access access,
                          absl::string_view carrier) const;
  absl::Status LogRefusal(absl::Status status, absl::string_view peer) const;

  std::optional<std::string> token_;
  bool read_only_requires_token_ = false;
  std::shared_ptr<LogThrottle> refusal_log_ = std::make_shared<LogThrottle>(absl::Seconds(1));
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_AUTH_H_
