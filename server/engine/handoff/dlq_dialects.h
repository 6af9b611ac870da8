// Other tools' dead-letter headers ("dialects"): written beside retryd's own
// on a dead-letter record, so that tools built for them read retryd's
// dead-letter topic, and read back from a dead-letter record those tools
// wrote, so that retryd's dead-letter tools list and redrive it.
//
//  - kSpring: Spring Kafka's DeadLetterPublishingRecoverer (spring-kafka
//    4.1.1, KafkaHeaders and DeadLetterRecordManager): kafka_dlt-* headers;
//    partition, offset and timestamp as big-endian binary integers.
//  - kStreams: Kafka Streams' dead-letter queue (KIP-1034, Apache Kafka 4.2,
//    ExceptionHandlerUtils): __streams.errors.* headers, all UTF-8 text, and
//    the failed record's timestamp as the dead-letter record's
//    (DeadLetterTimestampMs).
//  - kKip1191: share groups' dead-letter queues (KIP-1191, experimental:
//    the KIP page's revision of 2026-06-09): __dlq.errors.* headers, all
//    UTF-8 text.
//
// docs/dead-letters.md ("Dead letters") lists every header and its value.
//
// Thread-safety: every function here is pure and may be called from any
// thread.
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_DLQ_DIALECTS_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_DLQ_DIALECTS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/engine/api/options.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/model/record.h"

namespace retryd::engine {

namespace spring {
inline constexpr std::string_view kPrefix = "kafka_dlt-";
inline constexpr std::string_view kExceptionFqcn = "kafka_dlt-exception-fqcn";
inline constexpr std::string_view kExceptionCauseFqcn = "kafka_dlt-exception-cause-fqcn";
inline constexpr std::string_view kExceptionMessage = "kafka_dlt-exception-message";
inline constexpr std::string_view kExceptionStacktrace = "kafka_dlt-exception-stacktrace";
inline constexpr std::string_view kOriginalTopic = "kafka_dlt-original-topic";
inline constexpr std::string_view kOriginalPartition = "kafka_dlt-original-partition";
inline constexpr std::string_view kOriginalOffset = "kafka_dlt-original-offset";
inline constexpr std::string_view kOriginalTimestamp = "kafka_dlt-original-timestamp";
inline constexpr std::string_view kOriginalTimestampType = "kafka_dlt-original-timestamp-type";
inline constexpr std::string_view kOriginalConsumerGroup = "kafka_dlt-original-consumer-group";
}  // namespace spring

namespace streams {
inline constexpr std::string_view kPrefix = "__streams.errors.";
inline constexpr std::string_view kException = "__streams.errors.exception";
inline constexpr std::string_view kMessage = "__streams.errors.message";
inline constexpr std::string_view kStacktrace = "__streams.errors.stacktrace";
inline constexpr std::string_view kTopic = "__streams.errors.topic";
inline constexpr std::string_view kPartition = "__streams.errors.partition";
inline constexpr std::string_view kOffset = "__streams.errors.offset";
}  // namespace streams

namespace kip1191 {
inline constexpr std::string_view kPrefix = "__dlq.errors.";
inline constexpr std::string_view kTopic = "__dlq.errors.topic";
inline constexpr std::string_view kPartition = "__dlq.errors.partition";
inline constexpr std::string_view kOffset = "__dlq.errors.offset";
inline constexpr std::string_view kGroup = "__dlq.errors.group";
inline constexpr std::string_view kDeliveryCount = "__dlq.errors.delivery.count";
inline constexpr std::string_view kMessage = "__dlq.errors.message";
}  // namespace kip1191

// The Java class names retryd gives its failures where a dialect wants one
// (Spring's exception FQCNs, Streams' exception).
inline constexpr std::string_view kFailureClassName = "retryd.ProcessingFailure";

// "spring", "streams", "kip1191": DeadLetter.dialect's values.
std::string_view DialectName(DeadLetterDialect dialect);
std::optional<DeadLetterDialect> DialectFromName(std::string_view name);

// Whether `key` is a header of any dialect (by its prefix).
bool IsDialectHeader(std::string_view key);

// `headers` without those of `dialect` (by its prefix); the others keep
// their order and bytes.
Headers StripDialectHeaders(const Headers& headers, DeadLetterDialect dialect);

// The headers `dialect` gives a dead-letter record described by `m` (the
// attempts made, the last error, the original coordinates) that consumer
// group `group` read, in the order that dialect's own writer adds them.
Headers DialectHeaders(DeadLetterDialect dialect, const RetryMetadata& m, std::string_view group);

// `headers` followed by DialectHeaders() of each of `dialects`, in order
// (one listed twice, once);
// any header already there with a key one of them writes is removed first,
// so writing twice never duplicates one.
Headers WithDialectHeaders(const Headers& headers, std::span<const DeadLetterDialect> dialects,
                           const RetryMetadata& m, std::string_view group);

// The Kafka timestamp a dead-letter record described by `m` gets with
// `dialects` on: the original record's when Streams is among them (its
// writer gives the dead letter the failed record's timestamp, and its
// readers, retryd's included, take it for the original's), whichever others
// are on too; otherwise, or for a record without a timestamp, -1: the
// producer's clock, as Spring's writer (which leaves it unset) and retryd's
// own dead letters have it.
int64_t DeadLetterTimestampMs(std::span<const DeadLetterDialect> dialects, const RetryMetadata& m);

// The first dialect, in the order Spring, Streams, KIP-1191, whose
// original-topic header `headers` has; none if it has none.
std::optional<DeadLetterDialect> DetectDialect(const Headers& headers);

// What `dialect`'s headers say of a dead-letter record: the original
// topic, partition, offset and timestamp (-1: not known), the error (the
// exception's message, else its class) and the attempts (0: not known);
// and the original timestamp's type (Spring's header, else
// DefaultTimestampType()); the other fields are left as RetryMetadata's
// defaults. Each header is read from its last copy, as the dialect's own
// readers do. Streams puts the original timestamp in the dead-letter
// record's: `record_timestamp_ms`.
// Failures are InvalidArgument errors naming the header, e.g.
//   missing header kafka_dlt-original-offset
//   header kafka_dlt-original-partition is not a 4-byte big-endian integer: 2 bytes
absl::StatusOr<RetryMetadata> ParseDialectHeaders(const Headers& headers, DeadLetterDialect dialect,
                                                  int64_t record_timestamp_ms);

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_DLQ_DIALECTS_H_
