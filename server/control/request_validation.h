// The checks of the control API's request messages, apart from the handlers
// so that they can be tested and fuzzed without a server or an engine.
//
// Each Validate function returns OK or INVALID_ARGUMENT naming the field and
// its allowed range; it runs after the bearer-token check and before the
// engine is touched. GetStatusRequest has no fields, so it has no function.
//
// Thread-safety: pure functions.
#ifndef RETRYD_SERVER_CONTROL_REQUEST_VALIDATION_H_
#define RETRYD_SERVER_CONTROL_REQUEST_VALIDATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/repeated_field.h"
#include "retryd/v1/control.pb.h"

namespace retryd::control {

// Bounds of WatchMetricsRequest.interval_ms.
inline constexpr uint32_t kMinWatchIntervalMs = 100;
inline constexpr uint32_t kMaxWatchIntervalMs = 60'000;
// The most thread ids one request may name.
inline constexpr int kMaxThreadIdsPerRequest = 1024;

// count must lie in 1..(max_threads - running): `max_threads` is
// retry.max_threads, `running` the retry threads that have not ended.
// Below 1: INVALID_ARGUMENT; past the cap: FAILED_PRECONDITION
// (MAX_THREADS_REACHED), the engine's state rather than a bad request.
absl::Status ValidateStartRetryThreadsRequest(const v1::StartRetryThreadsRequest& request,
                                              int max_threads, int running);

// Either thread_ids (each an id in 1..INT_MAX, none twice, at most
// kMaxThreadIdsPerRequest) or a count of at least 1, not both.
absl::Status ValidateStopRetryThreadsRequest(const v1::StopRetryThreadsRequest& request);

// target in 0..max_threads: INVALID_ARGUMENT below (the engine checks the
// cap and retry.min_threads).
absl::Status ValidateSetRetryThreadCountRequest(const v1::SetRetryThreadCountRequest& request);

// drain_retries only with in_order.
absl::Status ValidateSetInOrderRequest(const v1::SetInOrderRequest& request);

// mode set (ORDERING_UNORDERED, ORDERING_IN_ORDER or ORDERING_KEY);
// drain_retries only with ORDERING_IN_ORDER.
absl::Status ValidateSetOrderingModeRequest(const v1::SetOrderingModeRequest& request);

// interval_ms in kMinWatchIntervalMs..kMaxWatchIntervalMs; thread_ids as for
// StopRetryThreads (an empty list means every thread).
absl::Status ValidateWatchMetricsRequest(const v1::WatchMetricsRequest& request);

// Bounds of ListInFlightRequest.limit; 0 means kDefaultInFlightLimit.
inline constexpr uint32_t kDefaultInFlightLimit = 100;
inline constexpr uint32_t kMaxInFlightLimit = 10'000;

// limit at most kMaxInFlightLimit.
absl::Status ValidateListInFlightRequest(const v1::ListInFlightRequest& request);
// The limit a valid request asks for (its default filled in).
size_t InFlightLimit(const v1::ListInFlightRequest& request);

// topic a Kafka topic name (not empty, at most 249 characters), partition
// and offset not negative.
absl::Status ValidateDeadLetterRecordRequest(const v1::DeadLetterRecordRequest& request);

// The engine's ids for a thread_ids field that passed validation.
std::vector<int> EngineThreadIds(const google::protobuf::RepeatedField<uint32_t>& thread_ids);

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_REQUEST_VALIDATION_H_
