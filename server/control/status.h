// The one place where retryd turns an absl::Status into a grpc::Status.
//
// Every handler of the control API computes an absl::Status (from the
// engine, from validation, from the auth check) and converts it here exactly
// once, when it finishes the call. The code is kept code for code (the two
// enums describe the same canonical codes) and the message is kept as is.
// A status with a reason (server/common/error_reason.h) also carries a
// google.rpc.Status in the call's details (the `grpc-status-details-bin`
// trailer) holding one google.rpc.ErrorInfo{reason, domain "retryd.io"}:
// the google.rpc.Status of server/operations/rpc_status.h, which also gives
// an ended operation its error.
//
// Thread-safe: a pure function.
#ifndef RETRYD_SERVER_CONTROL_STATUS_H_
#define RETRYD_SERVER_CONTROL_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace retryd::control {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_STATUS_H_
