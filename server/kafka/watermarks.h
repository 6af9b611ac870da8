// A topic's watermarks, asked of its partitions' leaders within a deadline.
// Internal to server/kafka/.
#ifndef RETRYD_SERVER_KAFKA_WATERMARKS_H_
#define RETRYD_SERVER_KAFKA_WATERMARKS_H_

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace retryd::kafka {

// Where a partition's records start (its log start offset) and end (the
// offset the next record will get).
struct Watermarks {
  int64_t low = 0;
  int64_t high = 0;
};

// The watermarks of partitions 0..partitions-1 of `topic`, by partition.
// Returns by `deadline`: DEADLINE_EXCEEDED if a leader did not answer in
// time (down, or partitioned away), UNAVAILABLE for any other failure.
//
// Not rd_kafka_query_watermark_offsets(): in librdkafka 2.0.2 it waits for
// the leader's answer with no regard for its timeout, so with the leader
// down it blocks for as long as the leader stays down.
absl::StatusOr<std::vector<Watermarks>> QueryWatermarks(rd_kafka_t* rk, const std::string& topic,
                                                        int partitions, absl::Time deadline);

// One ListOffsets request for partitions 0..partitions-1 of `topic`, by
// partition: for `timestamp` (Unix ms) the first offset whose timestamp is
// at or after it (-1 where none is), for RD_KAFKA_OFFSET_BEGINNING or
// RD_KAFKA_OFFSET_END a watermark. Errors as QueryWatermarks's.
absl::StatusOr<std::vector<int64_t>> ListOffsets(rd_kafka_t* rk, const std::string& topic,
                                                 int partitions, int64_t timestamp,
                                                 absl::Time deadline);

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_WATERMARKS_H_
