// What the dead-letter tools know of a dead-letter record, without Kafka:
// its retryd headers decoded (DecodeDeadLetter), whether a filter selects it
// (Matches), the cursor a ListDeadLetters page hands to the next one, and
// the record a redrive produces from it (RedriveRecord).
//
// Thread-safety: pure functions.
#ifndef RETRYD_SERVER_DLQ_DEAD_LETTERS_H_
#define RETRYD_SERVER_DLQ_DEAD_LETTERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/record.h"

namespace retryd::dlq {

// What selects dead letters: retryd.v1.DeadLetterFilter (control.proto,
// which says what each field means), field by field.
struct DeadLetterFilter {
  std::string key_prefix;  // Bytes.
  std::string error_contains;
  std::string reason;
  std::string original_topic;
  std::optional<int32_t> original_partition;
  int64_t first_failure_from_unix_ms = 0;
  int64_t first_failure_to_unix_ms = 0;
  int32_t min_attempts = 0;
  int32_t max_attempts = 0;
  std::vector<int32_t> partitions;

  bool operator==(const DeadLetterFilter&) const = default;
};

// retryd.v1.DeadLetterHeader.
struct DeadLetterHeader {
  std::string key;
  std::string value;
  bool value_null = false;

  bool operator==(const DeadLetterHeader&) const = default;
};

// A dead letter as a listing shows it: retryd.v1.DeadLetter (control.proto,
// which says what each field means), field by field.
struct DeadLetter {
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t timestamp_unix_ms = 0;
  std::string key;
  bool key_null = false;
  std::string value;
  bool value_null = false;
  int64_t value_size = 0;
  std::vector<DeadLetterHeader> headers;
  std::string original_topic;
  int32_t original_partition = 0;
  int64_t original_offset = 0;
  int64_t original_timestamp_unix_ms = 0;
  int32_t attempts = 0;
  int64_t first_failure_unix_ms = 0;
  std::string error;
  std::string first_error;
  std::string error_reason;
  int64_t dead_lettered_unix_ms = 0;
  std::string dead_lettered_by;
  int32_t redrive_count = 0;
  std::string redriven_from;
  std::string truncated;
  std::string decode_error;
  std::string dialect;

  bool operator==(const DeadLetter&) const = default;
};

// ListDeadLettersRequest.max_value_bytes: the default and the largest.
inline constexpr uint32_t kDefaultValueBytes = 1024;
inline constexpr uint32_t kMaxValueBytes = 1 << 20;

// `record` (read from the dead-letter topic) with its retryd headers
// decoded, or when it has none, those of the first other tool's dialect it
// has (Spring, Streams, KIP-1191; see DeadLetter.dialect), and at most
// `max_value_bytes` of its value.
DeadLetter DecodeDeadLetter(const Record& record, size_t max_value_bytes);

// INVALID_ARGUMENT (INVALID_FIELD) naming the field when `filter` cannot
// select anything sensible: a negative bound or partition, a range whose
// end is before its start.
absl::Status ValidateFilter(const DeadLetterFilter& filter);

// Whether `filter` selects `dead` (every field set must hold). A record
// with a decode_error matches only a filter on its key and partitions.
bool Matches(const DeadLetterFilter& filter, const DeadLetter& dead);

// The partitions a filter reads, of a topic with `partitions`: those named
// (INVALID_ARGUMENT for one the topic lacks), or all.
absl::StatusOr<std::vector<int32_t>> FilterPartitions(const DeadLetterFilter& filter,
                                                      int partitions);

// Where a listing is: per partition, the next offset to read and the end
// fixed by its first page. Kept in the page token.
struct ListCursor {
  struct Range {
    int64_t next = 0;
    int64_t end = 0;
  };
  std::map<int32_t, Range> partitions;
  // Partitions with records left to read.
  bool done() const;
};

// The page token of `cursor` (opaque, URL-safe); empty when it is done.
std::string EncodePageToken(const ListCursor& cursor);
// INVALID_ARGUMENT (INVALID_FIELD) for a token this retryd did not make.
absl::StatusOr<ListCursor> DecodePageToken(const std::string& token);

// How a redrive sends a record on.
struct RedriveTarget {
  // Empty: the record's original topic.
  std::string topic;
  bool reset_attempts = false;
  // retryd's retry topic: where a record going back to its origin without
  // reset_attempts goes, with the attempts it used.
  std::string retry_topic;
};

// The record a redrive produces for `dead` (decoded as `decoded`, without
// a decode_error, read at `dlq_topic`/its partition@offset), at `now_ms`:
//  - to its origin with reset_attempts: the original key, value and
//    headers, to its original topic and partition, as a new record;
//  - to its origin without: the retry topic, its retry headers as in the
//    dead letter but due now, so the engine makes one more attempt;
//  - to a topic: the dead letter's key and value, partitioned by key, its
//    headers without retryd's retry state with reset_attempts, as they
//    were without it.
// A dead letter another tool wrote (decoded.dialect one of its
// dialects) starts over as new whatever reset_attempts says: to its
// original topic and partition, or to the topic, partitioned by key, with
// its headers but that tool's.
// Every one carries retryd-redriven-from and retryd-redrive-count (one more
// than the dead letter's).
OutgoingRecord RedriveRecord(const Record& dead, const DeadLetter& decoded,
                             const RedriveTarget& target, const std::string& dlq_topic,
                             int64_t now_ms);

// The dead letter (partition, offset) of `dlq_topic` that `record` was
// redriven from, by its last retryd-redriven-from header; none if it has
// none or names another topic.
std::optional<std::pair<int32_t, int64_t>> RedrivenFrom(const Record& record,
                                                        const std::string& dlq_topic);

}  // namespace retryd::dlq

#endif  // RETRYD_SERVER_DLQ_DEAD_LETTERS_H_
