// The record model shared by server/kafka and server/engine: plain values, no
// librdkafka types. It sits below both so that the layers point one way.
//
// Key, value and header values are optional because Kafka distinguishes a
// null field from an empty one, and retryd keeps both byte for byte.
#ifndef RETRYD_SERVER_MODEL_RECORD_H_
#define RETRYD_SERVER_MODEL_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace retryd {

struct Header {
  std::string key;
  std::optional<std::string> value;

  friend bool operator==(const Header&, const Header&) = default;
};

using Headers = std::vector<Header>;

// A topic partition, ordered so it can key maps.
struct TopicPartition {
  std::string topic;
  int32_t partition = 0;

  friend auto operator<=>(const TopicPartition&, const TopicPartition&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const TopicPartition& tp) {
    return H::combine(std::move(h), tp.topic, tp.partition);
  }
};

// What a record's timestamp is, as Kafka's TimestampType says: set by its
// producer (CreateTime) or by the broker when it appended it (LogAppendTime,
// the topic's message.timestamp.type); none for a record without one.
enum class TimestampType { kNone, kCreateTime, kLogAppendTime };

// A record consumed from Kafka.
struct Record {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = -1;
  int64_t timestamp_ms = -1;  // -1: the broker gave none.
  std::optional<std::string> key;
  std::optional<std::string> value;
  Headers headers;
  // How the broker stamped timestamp_ms.
  TimestampType timestamp_type = TimestampType::kNone;

  TopicPartition tp() const { return {topic, partition}; }
};

// A record to produce. partition < 0 lets the partitioner choose by key.
struct OutgoingRecord {
  std::string topic;
  int32_t partition = -1;
  std::optional<std::string> key;
  std::optional<std::string> value;
  Headers headers;
  // The record's CreateTime in ms since the epoch; <= 0: the producer's
  // clock when it is produced (librdkafka reads 0 so, which makes the epoch
  // itself one ms that cannot be given). A topic whose
  // message.timestamp.type is LogAppendTime replaces it either way.
  int64_t timestamp_ms = -1;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_MODEL_RECORD_H_
