#include "server/operations/rpc_status.h"

#include <string>

#include "google/rpc/error_details.pb.h"
#include "server/common/error_reason.h"

namespace retryd::control {

int32_t CanonicalCode(absl::StatusCode code) {
  // Spelled out rather than cast: a code absl adds and the canonical set
  // lacks becomes UNKNOWN instead of an out-of-range value.
  switch (code) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnauthenticated:
      // The two enums (and google.rpc.Code) number the canonical codes alike.
      return static_cast<int32_t>(code);
    default:
      return static_cast<int32_t>(absl::StatusCode::kUnknown);
  }
}

google::rpc::Status ToRpcStatus(const absl::Status& status) {
  google::rpc::Status out;
  if (status.ok()) return out;
  out.set_code(CanonicalCode(status.code()));
  out.set_message(std::string(status.message()));
  const std::string reason = ReasonOf(status);
  if (!reason.empty()) {
    google::rpc::ErrorInfo info;
    info.set_reason(reason);
    info.set_domain(std::string(kErrorDomain));
    out.add_details()->PackFrom(info);
  }
  return out;
}

}  // namespace retryd::control
