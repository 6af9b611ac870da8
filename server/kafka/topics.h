// Start-up checks against a real cluster, and the creation of missing topics.
#ifndef RETRYD_SERVER_KAFKA_TOPICS_H_
#define RETRYD_SERVER_KAFKA_TOPICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/kafka/handle.h"

namespace retryd::kafka {

// Returns OK if every topic in `topics` exists; otherwise NotFound naming the
// missing ones, or Unavailable if the cluster did not answer within
// `timeout`. Asks for the full topic list, so it never triggers the broker's
// topic auto-creation.
absl::Status CheckTopicsExist(const std::string& bootstrap_servers,
                              const std::map<std::string, std::string>& properties,
                              const std::vector<std::string>& topics, absl::Duration timeout);

// How CreateMissingTopics creates a topic (kafka.create_topics in
// config.proto, which states the defaults the zeros stand for).
struct NewTopicSpec {
  int partitions = 0;                   // 0: as many as the model topic has.
  int replication_factor = 0;           // 0: 3, or the broker count if smaller.
  std::optional<int64_t> retention_ms;  // Unset: the broker's retention.
};

// What CreateMissingTopics did.
struct CreatedTopics {
  std::vector<std::string> topics;  // Created by this call; empty if none was missing.
  int partitions = 0;               // Those topics' partitions and replicas.
  int replication_factor = 0;
};

// Creates those of `topics` that the cluster lacks, as `spec` says, through
// the Admin API (CreateTopics), and waits until every partition of each has
// a leader. `required` (the input topics) must exist already; it is never
// created, and its first topic is the model whose partition count a spec
// without partitions takes. A topic that another client creates at the same
// moment (a second retryd starting) counts as present, not as created.
// Returns what it created; NotFound naming what is missing from `required`,
// InvalidArgument when the cluster refuses a topic as asked (too many
// replicas, a retention it rejects), PermissionDenied without the CREATE
// permission, Unavailable or DeadlineExceeded when the cluster did not
// answer within `timeout`, which bounds the whole call. Blocks; meant for
// start-up, from any one thread.
absl::StatusOr<CreatedTopics> CreateMissingTopics(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::vector<std::string>& required, const std::vector<std::string>& topics,
    const NewTopicSpec& spec, absl::Duration timeout);

// Measures how many records of `topic` consumer group `group_id` has not yet
// committed: the sum over its partitions of high watermark minus committed
// offset (the low watermark where the group has none). Reads the group's
// offsets without joining it, over one client kept for the probe's life.
//
// Thread-safe: Measure() may be called from several threads at once.
class GroupLagProbe {
 public:
  static absl::StatusOr<std::unique_ptr<GroupLagProbe>> Create(
      const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
      const std::string& group_id, const std::string& topic);
  // The group's lag on each of `topics` (at least one).
  static absl::StatusOr<std::unique_ptr<GroupLagProbe>> Create(
      const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
      const std::string& group_id, std::vector<std::string> topics);

  GroupLagProbe(const GroupLagProbe&) = delete;
  GroupLagProbe& operator=(const GroupLagProbe&) = delete;

  // The lag summed over the topics. Blocks up to `timeout`.
  absl::StatusOr<int64_t> Measure(absl::Duration timeout) const;
  // The lag on each topic, in the order given. Blocks up to `timeout`.
  absl::StatusOr<std::vector<int64_t>> MeasureEach(absl::Duration timeout) const;
  // The lag on each partition of each topic: one map (partition -> lag) per
  // topic, in the order given. Blocks up to `timeout`.
  absl::StatusOr<std::vector<std::map<int32_t, int64_t>>> MeasurePartitions(
      absl::Duration timeout) const;

  // The group's committed offset per partition of the first topic (-1
  // where it has none). Blocks up to `timeout`.
  absl::StatusOr<std::map<int32_t, int64_t>> Committed(absl::Duration timeout) const;

 private:
  GroupLagProbe(HandlePtr rk, std::string group_id, std::vector<std::string> topics)
      : rk_(std::move(rk)), group_id_(std::move(group_id)), topics_(std::move(topics)) {}

  absl::StatusOr<std::map<int32_t, int64_t>> CommittedOn(const std::string& topic,
                                                         absl::Time deadline) const;

  const HandlePtr rk_;
  const std::string group_id_;
  const std::vector<std::string> topics_;
};

// Whether the cluster answers: a metadata request for its brokers, over a
// client of its own. That client keeps a connection to every broker and
// gives a request up after a second on the wire (disconnecting from that
// broker), and Ping() asks again while its time lasts, so one broker that
// stops answering (a paused process, a lost network path) costs one
// attempt, not the verdict: the next one goes to a broker that is up. The
// engine's producer cannot be asked instead: librdkafka sends an
// application's metadata request to its least idle broker, which is the one
// its stuck produce requests go to, and leaves the request in flight for
// socket.timeout.ms (60 s by default).
//
// Thread-safe.
class ClusterProbe {
 public:
  static absl::StatusOr<std::unique_ptr<ClusterProbe>> Create(
      const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties);

  ClusterProbe(const ClusterProbe&) = delete;
  ClusterProbe& operator=(const ClusterProbe&) = delete;

  // OK if a broker answered within `timeout`; blocks up to `timeout`.
  absl::Status Ping(absl::Duration timeout) const;

 private:
  explicit ClusterProbe(HandlePtr rk) : rk_(std::move(rk)) {}

  const HandlePtr rk_;
};

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_TOPICS_H_
