// Reads a topic's records as they stand, without joining a consumer group:
// every partition from its low watermark up to the high watermark taken at
// the start of the call. For tools and tests (dead-letter inspection,
// verification), not for the engine's consumption.
#ifndef RETRYD_SERVER_KAFKA_TOPIC_READER_H_
#define RETRYD_SERVER_KAFKA_TOPIC_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/kafka/handle.h"
#include "server/model/record.h"

namespace retryd::kafka {

// Records in partition order, offset order within a partition.
// DeadlineExceeded if they could not all be read within `timeout`; DataLoss
// if a partition's position fell out of range while reading (the records
// there are gone), rather than silently skipping them.
absl::StatusOr<std::vector<Record>> ReadTopic(const std::string& bootstrap_servers,
                                              const std::map<std::string, std::string>& properties,
                                              const std::string& topic, absl::Duration timeout);

// Calls `visit` for each record of `topic` from offset `from[p]` of each
// partition p (its low watermark where `from` has none, or -1, or an offset
// below it) up to the high watermark taken at the start of the call; in
// offset order within a partition, partitions interleaved. Errors as
// ReadTopic's. Nothing is kept: a large topic costs no memory.
absl::Status ScanTopic(const std::string& bootstrap_servers,
                       const std::map<std::string, std::string>& properties,
                       const std::string& topic, const std::map<int32_t, int64_t>& from,
                       absl::Duration timeout, const std::function<void(const Record&)>& visit);

// Where a partition's records start (its log start offset) and end (the
// offset the next record will get); a range [low, high) to read.
struct OffsetRange {
  int64_t low = 0;
  int64_t high = 0;
};

// The offset range of each of `topic`'s partitions, by partition. Blocks up
// to `timeout`.
absl::StatusOr<std::vector<OffsetRange>> TopicOffsetRanges(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& topic, absl::Duration timeout);

// Per partition of `topic`, by partition: the first offset whose record's
// timestamp is at or after `time`, or the high watermark where no record's
// is. Where to start reading what was written since `time`. Blocks up to
// `timeout`.
absl::StatusOr<std::map<int32_t, int64_t>> TopicOffsetsSince(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& topic, absl::Time time, absl::Duration timeout);

// Reads chosen partitions of a topic, each over a range of its own, without
// joining a group, one record at a time: a caller may stop anywhere and
// knows how far each partition was read.
//
// Thread-compatible: one thread uses it.
class PartitionReader {
 public:
  // Reads partition p of `ranges` from ranges[p].low up to, not including,
  // ranges[p].high.
  static absl::StatusOr<std::unique_ptr<PartitionReader>> Open(
      const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
      const std::string& topic, const std::map<int32_t, OffsetRange>& ranges);
  ~PartitionReader();
  PartitionReader(const PartitionReader&) = delete;
  PartitionReader& operator=(const PartitionReader&) = delete;

  // The next record, partitions interleaved, in offset order within each;
  // nullopt once every partition was read to its end. DEADLINE_EXCEEDED if
  // none came by `deadline`; DATA_LOSS if a partition's position fell out
  // of range (its records there are gone).
  absl::StatusOr<std::optional<Record>> Next(absl::Time deadline);

  // Per partition, the next offset to read: its end once read to it.
  const std::map<int32_t, int64_t>& positions() const { return positions_; }

 private:
  PartitionReader(HandlePtr rk, std::string topic, std::map<int32_t, int64_t> ends);
  void Done(int32_t partition);

  HandlePtr rk_;
  const std::string topic_;
  const std::map<int32_t, int64_t> ends_;
  std::map<int32_t, int64_t> positions_;
  int remaining_ = 0;
};

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_TOPIC_READER_H_
