// The dead-letter tools' requests and results as plain values: what
// control/ translates its RPC messages to and from (dead_letter_convert.h
// there), and the narrow interfaces the tools use of control/ (the
// operations a redrive runs as, the codec of a redrive's spec).
//
// Thread-safety: plain values; the interfaces say their own.
#ifndef RETRYD_SERVER_DLQ_TOOL_TYPES_H_
#define RETRYD_SERVER_DLQ_TOOL_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/dlq/dead_letters.h"
#include "server/engine/api/cancellation.h"

namespace retryd::dlq {

struct ToolsOptions {
  std::string bootstrap_servers;
  std::map<std::string, std::string> kafka_properties;
  std::string dead_letter_topic;
  std::string group_id;  // The engine's; the tools' groups are named after it.
  std::string retry_topic;
  std::string instance_name;  // In a redrive's spec: who started it.
  // How often a redrive flushes its producer and commits its position: the
  // most it redrives again after a SIGKILL.
  absl::Duration commit_interval = absl::Seconds(1);
};

// The tools' consumer group names.
std::string PurgeGroup(const std::string& group_id);          // "<group_id>.dlq-tools"
std::string RedriveGroupPrefix(const std::string& group_id);  // "<group_id>.ops."

// ListDeadLetters.
// The bytes a listed dead letter takes in the answer (its encoded
// retryd.v1.DeadLetter), which control/ provides: a page ends once its
// records take kMaxPageBytes (tool_limits.h). Thread-safe.
using ListedBytes = std::function<size_t(const DeadLetter&)>;
struct ListQuery {
  DeadLetterFilter filter;
  uint32_t page_size = 0;  // 0: the default.
  std::string page_token;
  uint32_t max_value_bytes = 0;  // 0: the default.
};
struct ListPage {
  std::vector<DeadLetter> records;
  std::string next_page_token;
  int64_t scanned = 0;
  std::string topic;
};

// PurgeDeadLetters.
struct PurgeRequest {
  // Per partition, the first offset to keep, in the request's order (the
  // first one refused is the one named).
  std::vector<std::pair<int32_t, int64_t>> up_to;
  bool all = false;
  bool delete_records = false;
};
struct PartitionPurge {
  int32_t partition = 0;
  int64_t from = 0;
  int64_t to = 0;
  bool deleted = false;
};
struct PurgeResult {
  std::vector<PartitionPurge> partitions;
  std::string topic;
};

// StartRedrive.
struct RedriveRequest {
  std::string request_id;
  // Whether the request carried a filter at all (kept so that the spec's
  // stored form stays as it was).
  bool has_filter = false;
  DeadLetterFilter filter;
  std::string target_topic;
  uint32_t rate_per_s = 0;
  bool reset_attempts = false;
  bool dry_run = false;
  uint32_t max_redrives = 0;
};

// A redrive's counts in one partition up to its committed offset.
struct RedriveCheckpoint {
  int64_t scanned = 0;
  int64_t matched = 0;
  int64_t redriven = 0;
  int64_t skipped = 0;
  int64_t sent_twice = 0;
  int64_t commit_time_unix_ms = 0;
};

// What a redrive keeps in the commit metadata of each partition of its
// group (see RedriveSpecCodec).
struct RedriveSpec {
  std::string operation_id;
  std::string dead_letter_topic;
  RedriveRequest request;  // Its request_id cleared.
  int64_t end_offset = 0;
  int64_t create_time_unix_ms = 0;
  std::string started_by;
  std::optional<RedriveCheckpoint> checkpoint;  // None before the first commit.
};

// How far a redrive has come.
struct RedriveProgress {
  int64_t scanned = 0;
  int64_t matched = 0;
  int64_t redriven = 0;
  int64_t skipped = 0;
  double rate_per_s = 0;
  int64_t eta_ms = 0;
  int64_t total = 0;
  bool dry_run = false;
  bool resumed = false;
  int64_t sent_twice = 0;
};
// A redrive's progress as its operation shows it.
struct RedriveOperationProgress {
  int64_t done = 0;
  int64_t total = 0;
  std::string unit;
  std::string description;
  RedriveProgress redrive;
};
struct RedriveCount {
  std::string key;
  int64_t matched = 0;
  int64_t skipped = 0;
};
struct RedriveResult {
  RedriveProgress progress;
  std::vector<RedriveCount> by_partition;
  std::vector<RedriveCount> by_reason;
  std::string target;
  std::string group;
};

// The stored form of a redrive's spec, which control/ provides (a resumed
// redrive reads what an older retryd wrote). Thread-safe.
struct RedriveSpecCodec {
  std::function<std::string(const RedriveSpec&)> encode;
  // None if `text` is not a spec.
  std::function<std::optional<RedriveSpec>(const std::string& text)> decode;
  // A filter, as a log line shows it.
  std::function<std::string(const DeadLetterFilter&)> describe_filter;
};

// A redrive as an operation: its id, the request's, its progress and its
// work (returns how it ended; fills the result).
struct RedriveJob {
  std::string id;
  std::string request_id;
  std::function<void(RedriveOperationProgress&)> progress;
  absl::AnyInvocable<absl::Status(engine::Cancellation& cancel, RedriveResult& result) &&> work;
};

// The operations a redrive runs as; control/ implements it. Thread-safe.
class RedriveOperations {
 public:
  virtual ~RedriveOperations() = default;
  // A new operation id.
  virtual std::string NewId() = 0;
  // Whether an operation `id` is known.
  virtual bool Known(const std::string& id) const = 0;
  // Runs `job` as an operation on a thread of its own: ALREADY_EXISTS if
  // its id is known, UNAVAILABLE after shutdown.
  virtual absl::Status Launch(RedriveJob job) = 0;
};

}  // namespace retryd::dlq

#endif  // RETRYD_SERVER_DLQ_TOOL_TYPES_H_
