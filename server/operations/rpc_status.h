// An absl::Status as a google.rpc.Status, without gRPC: the code kept code
// for code (the canonical codes; one absl adds and the canonical set lacks
// becomes UNKNOWN), the message as is. A status with a reason
// (server/common/error_reason.h) carries one google.rpc.ErrorInfo{reason,
// domain "retryd.io"} in its details.
//
// An ended operation's error is this; control/'s ToGrpcStatus
// (server/control/status.h) sends it as a call's status and details.
//
// Thread-safe: pure functions.
#ifndef RETRYD_SERVER_OPERATIONS_RPC_STATUS_H_
#define RETRYD_SERVER_OPERATIONS_RPC_STATUS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/rpc/status.pb.h"

namespace retryd::control {

// ErrorInfo.domain of every reason.
inline constexpr absl::string_view kErrorDomain = "retryd.io";

// The canonical code (google.rpc.Code, grpc::StatusCode) of `code`.
int32_t CanonicalCode(absl::StatusCode code);

// OK: code 0, nothing else.
google::rpc::Status ToRpcStatus(const absl::Status& status);

}  // namespace retryd::control

#endif  // RETRYD_SERVER_OPERATIONS_RPC_STATUS_H_
