// The embedded broker: librdkafka's mock cluster, a real Kafka-protocol
// server on loopback. It keeps everything in memory and a bounded log per
// partition (about 100,000 batches or 5 MiB): it is for demos and tests,
// never for data that matters.
//
// Thread-safe: the methods may be called from any thread.
#ifndef RETRYD_SERVER_KAFKA_EMBEDDED_BROKER_H_
#define RETRYD_SERVER_KAFKA_EMBEDDED_BROKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/kafka/handle.h"
struct rd_kafka_mock_cluster_s;

namespace retryd::kafka {

class EmbeddedBroker {
 public:
  // Starts `brokers` brokers listening on loopback ports the OS picks.
  static absl::StatusOr<std::unique_ptr<EmbeddedBroker>> Start(int brokers = 3);
  ~EmbeddedBroker();

  EmbeddedBroker(const EmbeddedBroker&) = delete;
  EmbeddedBroker& operator=(const EmbeddedBroker&) = delete;

  // "127.0.0.1:port,..." for any Kafka client.
  const std::string& bootstrap_servers() const { return bootstrap_servers_; }
  int broker_count() const { return broker_count_; }

  absl::Status CreateTopic(const std::string& topic, int partitions, int replication_factor);

  // Fault injection, for tests and drills. `api_key` is the Kafka protocol
  // API key (0 Produce, 1 Fetch, 8 OffsetCommit, ...); `errors` are Kafka
  // error codes returned, one per request, before normal service resumes.
  void PushRequestErrors(int16_t api_key, const std::vector<int>& errors);
  void ClearRequestErrors(int16_t api_key);
  // Makes metadata answers report `error` (a Kafka error code) for `topic`,
  // as for a deleted topic (3, UNKNOWN_TOPIC_OR_PART) or a forbidden one
  // (29); 0 clears it. The mock cannot delete a topic.
  void SetTopicError(const std::string& topic, int error);
  // A broker down refuses connections and drops the ones it has; its
  // partitions keep it as leader (the mock elects no other) until it is up.
  absl::Status SetBrokerDown(int32_t broker_id);
  absl::Status SetBrokerUp(int32_t broker_id);
  // Delays every answer of `broker_id` by `rtt` (zero: none).
  absl::Status SetBrokerRtt(int32_t broker_id, absl::Duration rtt);
  // Makes `broker_id` the leader of `topic`/`partition`; clients learn it
  // from their next metadata request.
  absl::Status SetPartitionLeader(const std::string& topic, int32_t partition, int32_t broker_id);
  // Makes `broker_id` the coordinator of consumer group `group` for clients
  // that look it up from now on.
  absl::Status SetGroupCoordinator(const std::string& group, int32_t broker_id);

 private:
  EmbeddedBroker() = default;

  HandlePtr rk_;                                // Hosts the cluster.
  rd_kafka_mock_cluster_s* cluster_ = nullptr;  // Owned.
  std::string bootstrap_servers_;
  int broker_count_ = 0;
};

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_EMBEDDED_BROKER_H_
