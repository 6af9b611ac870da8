#include "server/control/request_validation.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/common/error_reason.h"

namespace retryd::control {
namespace {

absl::Status ValidateThreadIds(const google::protobuf::RepeatedField<uint32_t>& thread_ids) {
  if (thread_ids.size() > kMaxThreadIdsPerRequest) {
    return absl::InvalidArgumentError(absl::StrCat("thread_ids: at most ", kMaxThreadIdsPerRequest,
                                                   " ids, got ", thread_ids.size()));
  }
  absl::flat_hash_set<uint32_t> seen;
  for (uint32_t id : thread_ids) {
    if (id == 0 || id > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("thread_ids: ", id, " is not a thread id; ids are between 1 and ",
                       std::numeric_limits<int>::max(), " (see GetStatus)"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("thread_ids: ", id, " is listed twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStartRetryThreadsRequest(const v1::StartRetryThreadsRequest& request,
                                              int max_threads, int running) {
  const int room = std::max(0, max_threads - running);
  if (request.count() >= 1 && request.count() <= room) return absl::OkStatus();
  // Below 1 is a malformed request whatever runs; past the cap, the
  // engine's state.
  const bool too_few = request.count() < 1;
  if (room == 0 && !too_few) {
    return WithReason(
        absl::FailedPreconditionError(absl::StrCat(
            "count: no room for more retry threads: ", running, " run and retry.max_threads is ",
            max_threads, "; stop some first, or raise retry.max_threads")),
        reason::kMaxThreadsReached);
  }
  if (room == 0) {
    return WithReason(absl::InvalidArgumentError(
                          absl::StrCat("count: must be at least 1, got ", request.count(), " (and ",
                                       running, " run: retry.max_threads is ", max_threads, ")")),
                      reason::kInvalidField);
  }
  return WithReason(
      absl::Status(
          too_few ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kFailedPrecondition,
          absl::StrCat("count: must be between 1 and ", room, ", got ", request.count(),
                       " (retry.max_threads is ", max_threads, ", ", running, " running)")),
      too_few ? reason::kInvalidField : reason::kMaxThreadsReached);
}

absl::Status ValidateSetRetryThreadCountRequest(const v1::SetRetryThreadCountRequest& request) {
  if (request.target() >= 0) return absl::OkStatus();
  return WithReason(absl::InvalidArgumentError(
                        absl::StrCat("target: must be at least 0, got ", request.target())),
                    reason::kInvalidField);
}

absl::Status ValidateStopRetryThreadsRequest(const v1::StopRetryThreadsRequest& request) {
  if (absl::Status s = ValidateThreadIds(request.thread_ids()); !s.ok()) return s;
  if (!request.thread_ids().empty() && request.count() != 0) {
    return absl::InvalidArgumentError(
        "count and thread_ids: give one of them, not both (thread_ids stops those threads, "
        "count the most recently started)");
  }
  if (!request.thread_ids().empty() && !request.tier().empty()) {
    return WithReason(
        absl::InvalidArgumentError(
            "tier: only with count (thread_ids name threads of any tier); leave it empty"),
        reason::kInvalidField);
  }
  if (request.thread_ids().empty() && request.count() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "count: must be at least 1 (a count above the number running stops them all), got ",
        request.count(), "; or give thread_ids"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSetInOrderRequest(const v1::SetInOrderRequest& request) {
  if (request.drain_retries() && !request.in_order()) {
    return absl::InvalidArgumentError(
        "drain_retries: only with in_order: true (it empties the retry backlog before the "
        "switch to in-order)");
  }
  return absl::OkStatus();
}

absl::Status ValidateSetOrderingModeRequest(const v1::SetOrderingModeRequest& request) {
  if (request.mode() == v1::ORDERING_UNSPECIFIED || !v1::Ordering_IsValid(request.mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("mode: must be ORDERING_UNORDERED, ORDERING_IN_ORDER or ORDERING_KEY, got ",
                     request.mode() == v1::ORDERING_UNSPECIFIED
                         ? "ORDERING_UNSPECIFIED (not set)"
                         : absl::StrCat(static_cast<int>(request.mode()))));
  }
  if (request.drain_retries() && request.mode() != v1::ORDERING_IN_ORDER) {
    return absl::InvalidArgumentError(
        absl::StrCat("drain_retries: only with mode ORDERING_IN_ORDER (it empties the retry "
                     "backlog before the switch "
                     "to in-order), got mode ",
                     v1::Ordering_Name(request.mode())));
  }
  return absl::OkStatus();
}

absl::Status ValidateWatchMetricsRequest(const v1::WatchMetricsRequest& request) {
  if (request.interval_ms() < kMinWatchIntervalMs || request.interval_ms() > kMaxWatchIntervalMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("interval_ms: must be between ", kMinWatchIntervalMs, " and ",
                     kMaxWatchIntervalMs, ", got ", request.interval_ms()));
  }
  return ValidateThreadIds(request.thread_ids());
}

std::vector<int> EngineThreadIds(const google::protobuf::RepeatedField<uint32_t>& thread_ids) {
  return std::vector<int>(thread_ids.begin(), thread_ids.end());
}

absl::Status ValidateListInFlightRequest(const v1::ListInFlightRequest& request) {
  if (request.limit() > kMaxInFlightLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: must be between 1 and ", kMaxInFlightLimit, " (0 means ",
                     kDefaultInFlightLimit, "), got ", request.limit()));
  }
  return absl::OkStatus();
}

size_t InFlightLimit(const v1::ListInFlightRequest& request) {
  return request.limit() == 0 ? kDefaultInFlightLimit : request.limit();
}

absl::Status ValidateDeadLetterRecordRequest(const v1::DeadLetterRecordRequest& request) {
  // Kafka's own limit on a topic name.
  constexpr size_t kMaxTopicLength = 249;
  if (request.topic().empty() || request.topic().size() > kMaxTopicLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("topic: must name the record's original topic (1 to ", kMaxTopicLength,
                     " characters), got ", request.topic().size(), " characters"));
  }
  if (request.partition() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition: must be 0 or more, got ", request.partition()));
  }
  if (request.offset() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset: must be 0 or more, got ", request.offset()));
  }
  return absl::OkStatus();
}

}  // namespace retryd::control
