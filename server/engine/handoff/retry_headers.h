// The retryd-* headers that carry a record's retry state through the retry
// topic, and the functions that write, read and remove them.
//
// A record on the retry topic is the original record (key, value and the
// original headers byte for byte) plus the eleven headers below, all written
// as decimal text except the topic, timestamp type and error strings.
// Reading is strict: a record whose retry headers are missing or malformed
// is rejected with a message naming the header, so the caller can
// dead-letter it instead of retrying it with made-up state. The timestamp
// type, first error and error reason came later: a record without them,
// written by an older retryd, still parses (see ParseRetryHeaders).
//
// A dead-letter record carries the same headers, describing the attempts
// made, plus two saying when and by which thread it was dead-lettered
// (WithDeadLetterHeaders).
//
// Thread-safety: every function here is pure and may be called from any
// thread.
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_RETRY_HEADERS_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_RETRY_HEADERS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/record.h"

namespace retryd::engine {

inline constexpr std::string_view kRetrydHeaderPrefix = "retryd-";

inline constexpr std::string_view kAttemptHeader = "retryd-attempt";
inline constexpr std::string_view kDueMsHeader = "retryd-due-ms";
inline constexpr std::string_view kFirstFailureMsHeader = "retryd-first-failure-ms";
inline constexpr std::string_view kOriginalTopicHeader = "retryd-original-topic";
inline constexpr std::string_view kOriginalPartitionHeader = "retryd-original-partition";
inline constexpr std::string_view kOriginalOffsetHeader = "retryd-original-offset";
inline constexpr std::string_view kOriginalTimestampMsHeader = "retryd-original-timestamp-ms";
// The original timestamp's type, by Kafka's TimestampType names:
// "CreateTime", "LogAppendTime" or "NoTimestampType".
inline constexpr std::string_view kOriginalTimestampTypeHeader = "retryd-original-timestamp-type";
inline constexpr std::string_view kErrorHeader = "retryd-error";
// The retryd-error of the record's first failure.
inline constexpr std::string_view kFirstErrorHeader = "retryd-first-error";
// The last failure's machine-readable reason as the processor gave it (for
// the grpc processor, "<domain>/<reason>" of the google.rpc.ErrorInfo in the
// downstream's status details); empty when it gave none.
inline constexpr std::string_view kErrorReasonHeader = "retryd-error-reason";
// Only on a dead-letter record: when (ms since the epoch) and by which
// thread ("<instance>/thread-<id>", see DeadLetteredBy) it was dead-lettered.
inline constexpr std::string_view kDeadLetteredMsHeader = "retryd-dead-lettered-ms";
inline constexpr std::string_view kDeadLetteredByHeader = "retryd-dead-lettered-by";
// Only on a record a redrive produced again from the dead-letter topic:
// where it was there ("<topic>/<partition>@<offset>") and how many times
// it has been redriven (1 the first time). They are lineage, not retry
// state: StripRetrydHeaders keeps them, so they stay with the record through
// the retry topic and back into the dead-letter topic, where the redrive's
// loop guard reads the count.
inline constexpr std::string_view kRedrivenFromHeader = "retryd-redriven-from";
inline constexpr std::string_view kRedriveCountHeader = "retryd-redrive-count";
// Only on a dead-letter record cut to fit (FitDeadLetter, dead_letter_fit.h): the original and
// the kept sizes, so nothing mistakes it for the record itself.
inline constexpr std::string_view kTruncatedHeader = "retryd-truncated";

// Longest retryd-error (and retryd-first-error) value written; longer
// errors are cut at a UTF-8 character boundary so a record never grows
// without bound as it retries.
inline constexpr size_t kMaxErrorBytes = 1024;

// Longest retryd-error-reason value written, cut as errors are.
inline constexpr size_t kMaxErrorReasonBytes = 256;

// Largest accepted retryd-attempt.
inline constexpr int kMaxAttempt = 1000000;

// Kafka's limit on topic name length.
inline constexpr size_t kMaxTopicLength = 249;

struct RetryMetadata {
  int attempt = 1;               // The attempt to make when due (>= 1).
  int64_t due_ms = 0;            // When it is due, ms since the epoch.
  int64_t first_failure_ms = 0;  // When attempt 1 failed.
  std::string original_topic;    // Where the record was first consumed.
  int32_t original_partition = 0;
  int64_t original_offset = 0;
  int64_t original_timestamp_ms = -1;  // -1: the broker gave none.
  // What set original_timestamp_ms (Record::timestamp_type).
  TimestampType original_timestamp_type = TimestampType::kNone;
  std::string error;  // Why the last attempt failed.
  // Why the first attempt failed; empty when not known (a record written by
  // an older retryd, or restored from in-order commit metadata).
  std::string first_error;
  // The last failure's machine-readable reason (kErrorReasonHeader); empty
  // for none.
  std::string error_reason;

  friend bool operator==(const RetryMetadata&, const RetryMetadata&) = default;
};

// When and by whom a record was dead-lettered.
struct DeadLetterStamp {
  int64_t ms = 0;  // Ms since the epoch.
  std::string by;  // DeadLetteredBy().
};

// "<instance>/thread-<id>", or "thread-<id>" for an empty `instance`.
std::string DeadLetteredBy(std::string_view instance, int thread_id);

// Returns `headers` without those whose key starts with "retryd-", but for
// the redrive's lineage (kRedrivenFromHeader, kRedriveCountHeader); the
// others keep their order and bytes, null values included.
Headers StripRetrydHeaders(const Headers& headers);

// Kafka's TimestampType name of `type` ("CreateTime", "LogAppendTime",
// "NoTimestampType"), and back (none for any other string).
std::string_view TimestampTypeName(TimestampType type);
std::optional<TimestampType> TimestampTypeFromName(std::string_view name);

// The type a timestamp read without one is taken to have: CreateTime for a
// timestamp (Kafka's default, and what retryd wrote in Spring's header
// before it kept the type), none for -1.
TimestampType DefaultTimestampType(int64_t timestamp_ms);

// Returns StripRetrydHeaders(original) followed by the eleven retryd headers
// describing `m`, in the order declared above (empty strings written as
// empty values). The errors are cut to kMaxErrorBytes and the reason to
// kMaxErrorReasonBytes with TruncateUtf8(). Stripping first means retry
// state read from an earlier trip through the retry topic is replaced,
// never duplicated.
Headers WithRetryHeaders(const Headers& original, const RetryMetadata& m);

// WithRetryHeaders(original, m) followed by retryd-dead-lettered-ms and
// retryd-dead-lettered-by from `stamp`: a dead-letter record's headers.
Headers WithDeadLetterHeaders(const Headers& original, const RetryMetadata& m,
                              const DeadLetterStamp& stamp);

// Parses the retryd headers of `headers`. Every header but
// retryd-original-timestamp-type, retryd-error, retryd-first-error and
// retryd-error-reason is required (a missing error reads as empty, a missing
// type as DefaultTimestampType(original_timestamp_ms)); each may appear once
// and must not be null. Integers are plain decimal: an optional '-' and
// digits, no '+', no whitespace. Ranges: attempt in [1, kMaxAttempt]; due_ms,
// first_failure_ms and original_offset >= 0; original_partition in
// [0, INT32_MAX]; original_timestamp_ms >= -1; original_topic a valid Kafka
// topic name (1..249 characters of [A-Za-z0-9._-], not "." or "..");
// original_timestamp_type one of TimestampTypeName()'s three.
// Other "retryd-" headers are ignored, so a newer writer may add some.
// When several things are wrong, the one reported is fixed: presence,
// duplicates and nulls are checked for all headers (in the order declared
// above) before any value is.
// Failures are InvalidArgument errors whose message names the header, e.g.
//   missing header retryd-attempt
//   header retryd-due-ms is not a decimal integer: "12x"
//   header retryd-attempt appears 2 times
//   header retryd-attempt has a null value
absl::StatusOr<RetryMetadata> ParseRetryHeaders(const Headers& headers);

// The checks ParseRetryHeaders makes of one header's value, for readers of
// other tools' dead-letter headers (dlq_dialects.h): `value` as plain
// decimal in [min, max], and `topic` as a valid Kafka topic name. Errors
// name the header `name`, as ParseRetryHeaders' do.
absl::StatusOr<int64_t> ParseDecimalHeader(std::string_view name, std::string_view value,
                                           int64_t min, int64_t max);
absl::Status ValidateTopicHeader(std::string_view name, std::string_view topic);

// Returns the longest prefix of `s` of at most `max_bytes` bytes that does not
// end inside a UTF-8 multi-byte sequence. Bytes that are not valid UTF-8 are
// treated as single characters, so binary input is cut at max_bytes.
std::string TruncateUtf8(std::string_view s, size_t max_bytes);

// Removes every header whose key is `key`, then appends {key, value}.
void SetHeader(Headers& headers, std::string_view key, std::string value);

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_RETRY_HEADERS_H_
