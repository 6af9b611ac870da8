// Start-up checks against a real cluster.
#ifndef RETRYD_SERVER_KAFKA_TOPICS_H_
#define RETRYD_SERVER_KAFKA_TOPICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace retryd::kafka {

// Returns OK if every topic in `topics` exists; otherwise NotFound naming the
// missing ones, or Unavailable if the cluster did not answer within
// `timeout`. Asks for the full topic list, so it never triggers the broker's
// topic auto-creation.
absl::Status CheckTopicsExist(const std::string& bootstrap_servers,
                              const std::map<std::string, std::string>& properties,
                              const std::vector<std::string>& topics, absl::Duration timeout);

// Records of `topic` not yet committed by consumer group `group_id`: the sum
// over its partitions of high watermark minus committed offset (the low
// watermark where the group has none). Reads the group's offsets without
// joining it. Blocks up to `timeout`.
absl::StatusOr<int64_t> CommittedLag(const std::string& bootstrap_servers,
                                     const std::map<std::string, std::string>& properties,
                                     const std::string& group_id, const std::string& topic,
                                     absl::Duration timeout);

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_TOPICS_H_
