// A stable, machine-readable reason on an absl::Status: why a control
// operation was refused, in words a controller can match on. The control
// API sends it as a google.rpc.ErrorInfo (domain retryd.io) in the call's
// status details (server/control/status.cc); the engine, which knows no
// gRPC, attaches it here as a payload.
//
// The reasons are part of the API: a reason, once published, keeps its
// meaning (docs/control-api.md lists them). A new one may be added.
//
// Thread-safe: pure functions.
#ifndef RETRYD_SERVER_COMMON_ERROR_REASON_H_
#define RETRYD_SERVER_COMMON_ERROR_REASON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace retryd {

// The reasons. Every error a mutating call returns with one of these applied
// nothing, unless its description says otherwise.
namespace reason {
// Retry threads cannot run in in-order mode.
inline constexpr absl::string_view kInOrderActive = "IN_ORDER_ACTIVE";
// The request would pass retry.max_threads.
inline constexpr absl::string_view kMaxThreadsReached = "MAX_THREADS_REACHED";
// The request would leave fewer than retry.min_threads.
inline constexpr absl::string_view kMinThreadsReached = "MIN_THREADS_REACHED";
// A switch of the ordering mode (a drain) holds the engine's control.
inline constexpr absl::string_view kDrainRunning = "DRAIN_RUNNING";
// retry.autoscale sets the thread count.
inline constexpr absl::string_view kAutoscaleActive = "AUTOSCALE_ACTIVE";
// A thread id names no running retry thread.
inline constexpr absl::string_view kThreadNotFound = "THREAD_NOT_FOUND";
// Retry threads run, or records wait in the retry topic, and no drain was
// asked for.
inline constexpr absl::string_view kRetryThreadsRunning = "RETRY_THREADS_RUNNING";
inline constexpr absl::string_view kRetryBacklog = "RETRY_BACKLOG_NOT_EMPTY";
// The engine is starting, stopping or stopped.
inline constexpr absl::string_view kEngineNotRunning = "ENGINE_NOT_RUNNING";
// Changes applied together conflict (a desired count would stop threads
// another change starts): try again.
inline constexpr absl::string_view kConcurrentChange = "CONCURRENT_CHANGE";
// The call waited for other control operations until its deadline.
inline constexpr absl::string_view kControlBusy = "CONTROL_BUSY";
// The same request_id came with a different request.
inline constexpr absl::string_view kRequestIdReused = "REQUEST_ID_REUSED";
// No operation has that id (or it was forgotten).
inline constexpr absl::string_view kOperationNotFound = "OPERATION_NOT_FOUND";
// A request field is out of range (the message names it).
inline constexpr absl::string_view kInvalidField = "INVALID_FIELD";
// Another redrive of the same dead-letter topic runs (or waits to resume),
// on this retryd or another one of the cluster.
inline constexpr absl::string_view kRedriveRunning = "REDRIVE_RUNNING";
// The cluster does not answer the Admin API call the tool needs (the mock
// cluster has none; DeleteRecords may be refused by policy).
inline constexpr absl::string_view kAdminApiUnavailable = "ADMIN_API_UNAVAILABLE";
// Key order is not available with tiered retry topics (retry.tiers).
inline constexpr absl::string_view kRetryTiersConfigured = "RETRY_TIERS_CONFIGURED";
}  // namespace reason

// `status` with `reason` attached (an OK status stays OK, without it).
absl::Status WithReason(absl::Status status, absl::string_view reason);

// The reason attached to `status`, or "" if none is.
std::string ReasonOf(const absl::Status& status);

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_ERROR_REASON_H_
