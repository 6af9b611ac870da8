// Reads a topic's records as they stand, without joining a consumer group:
// every partition from its low watermark up to the high watermark taken at
// the start of the call. For tools and tests (dead-letter inspection,
// verification), not for the engine's consumption.
#ifndef RETRYD_SERVER_KAFKA_TOPIC_READER_H_
#define RETRYD_SERVER_KAFKA_TOPIC_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_TOPIC_READER_H_
