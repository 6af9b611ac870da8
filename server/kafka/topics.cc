#include "server/kafka/topics.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "server/kafka/properties.h"
#include "server/kafka/watermarks.h"

namespace retryd::kafka {
namespace {

// What is left of `deadline` in librdkafka's milliseconds, at least 1.
int RemainingMs(absl::Time deadline) {
  return static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* metadata) const {
    rd_kafka_metadata_destroy(metadata);
  }
};
struct NewTopicDeleter {
  void operator()(rd_kafka_NewTopic_t* topic) const { rd_kafka_NewTopic_destroy(topic); }
};
struct AdminOptionsDeleter {
  void operator()(rd_kafka_AdminOptions_t* options) const {
    rd_kafka_AdminOptions_destroy(options);
  }
};
struct QueueDeleter {
  void operator()(rd_kafka_queue_t* queue) const { rd_kafka_queue_destroy(queue); }
};
struct EventDeleter {
  void operator()(rd_kafka_event_t* event) const { rd_kafka_event_destroy(event); }
};
using NewTopicPtr = std::unique_ptr<rd_kafka_NewTopic_t, NewTopicDeleter>;

// A topic as the cluster's metadata shows it.
struct TopicState {
  int partitions = 0;
  bool led = false;  // Every partition has a leader.
};

// The cluster's brokers and the topics it serves (those it reports with no
// error), from one metadata request for every topic, which never triggers
// the broker's topic auto-creation.
struct ClusterTopics {
  int brokers = 0;
  std::map<std::string, TopicState> topics;
};

absl::StatusOr<ClusterTopics> ReadClusterTopics(rd_kafka_t* rk,
                                                const std::string& bootstrap_servers,
                                                absl::Time deadline) {
  const rd_kafka_metadata_t* raw = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, /*all_topics=*/1, nullptr, &raw, RemainingMs(deadline));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(absl::StrCat("cannot read topic metadata from ",
                                               bootstrap_servers, ": ", rd_kafka_err2str(err)));
  }
  const std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter> metadata(raw);
  ClusterTopics cluster;
  cluster.brokers = metadata->broker_cnt;
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& topic = metadata->topics[i];
    if (topic.err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    TopicState& state = cluster.topics[topic.topic];
    state.partitions = topic.partition_cnt;
    state.led = topic.partition_cnt > 0;
    for (int p = 0; p < topic.partition_cnt; ++p) {
      if (topic.partitions[p].leader < 0) state.led = false;
    }
  }
  return cluster;
}

std::vector<std::string> Missing(const ClusterTopics& cluster,
                                 const std::vector<std::string>& topics) {
  std::vector<std::string> missing;
  for (const std::string& topic : topics) {
    if (!cluster.topics.contains(topic) &&
        std::find(missing.begin(), missing.end(), topic) == missing.end()) {
      missing.push_back(topic);
    }
  }
  return missing;
}

// "topic x does not exist on ...; create it" and what `hint` adds.
absl::Status MissingTopicsError(const std::vector<std::string>& missing,
                                const std::string& bootstrap_servers, absl::string_view hint) {
  const bool many = missing.size() > 1;
  return absl::NotFoundError(absl::StrCat(
      many ? "topics " : "topic ", absl::StrJoin(missing, ", "), many ? " do" : " does",
      " not exist on ", bootstrap_servers, "; create ", many ? "them" : "it", " (", hint, ")"));
}

absl::StatusOr<HandlePtr> AdminHandle(const std::string& bootstrap_servers,
                                      const std::map<std::string, std::string>& properties,
                                      const std::string& client_id) {
  Properties user = properties;
  user.emplace("client.id", client_id);
  absl::StatusOr<ConfPtr> conf = MakeConf(bootstrap_servers, user, {});
  if (!conf.ok()) return conf.status();
  return NewHandle(RD_KAFKA_PRODUCER, *std::move(conf));
}

// The status a refused topic creation maps to: what the operator has to
// change (the request, or the principal's permissions), or a transient
// failure.
absl::StatusCode CreateErrorCode(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
      return absl::StatusCode::kPermissionDenied;
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICA_ASSIGNMENT:
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
    case RD_KAFKA_RESP_ERR_INVALID_REQUEST:
    case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

// One NewTopic per topic, with its retention if given.
absl::StatusOr<std::vector<NewTopicPtr>> NewTopics(const std::vector<std::string>& topics,
                                                   int partitions, int replication_factor,
                                                   const std::optional<int64_t>& retention_ms) {
  char errstr[512];
  std::vector<NewTopicPtr> owned;
  for (const std::string& topic : topics) {
    NewTopicPtr request(rd_kafka_NewTopic_new(topic.c_str(), partitions, replication_factor, errstr,
                                              sizeof(errstr)));
    if (request == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("cannot create topic ", topic, ": ", errstr));
    }
    if (retention_ms.has_value()) {
      const rd_kafka_resp_err_t err = rd_kafka_NewTopic_set_config(
          request.get(), "retention.ms", absl::StrCat(*retention_ms).c_str());
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return absl::InvalidArgumentError(
            absl::StrCat("retention.ms of topic ", topic, ": ", rd_kafka_err2str(err)));
      }
    }
    owned.push_back(std::move(request));
  }
  return owned;
}

using AdminOptionsPtr = std::unique_ptr<rd_kafka_AdminOptions_t, AdminOptionsDeleter>;

// The options of a CreateTopics request that ends by `deadline`.
absl::StatusOr<AdminOptionsPtr> CreateTopicsOptions(rd_kafka_t* rk, absl::Time deadline) {
  char errstr[512];
  AdminOptionsPtr options(rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS));
  // The broker answers once the controller has created the topics, or when
  // the operation timeout passes.
  if (rd_kafka_AdminOptions_set_request_timeout(options.get(), RemainingMs(deadline), errstr,
                                                sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      rd_kafka_AdminOptions_set_operation_timeout(options.get(), RemainingMs(deadline), errstr,
                                                  sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat("CreateTopics options: ", errstr));
  }
  return options;
}

// The topics a CreateTopics answer says were created, or why some were
// refused (a topic that existed already is neither).
absl::StatusOr<std::vector<std::string>> TopicsCreated(rd_kafka_event_t* event) {
  const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event);
  if (result == nullptr) return absl::InternalError("CreateTopics: no result in its answer");
  size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(result, &count);
  std::vector<std::string> created;
  std::vector<std::string> refused;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (size_t i = 0; i < count; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    const std::string name = rd_kafka_topic_result_name(results[i]);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      created.push_back(name);
    } else if (err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      // Another client (a second retryd starting) creating it too is fine.
      const char* why = rd_kafka_topic_result_error_string(results[i]);
      refused.push_back(absl::StrCat(name, ": ", rd_kafka_err2name(err), " (",
                                     why != nullptr ? why : rd_kafka_err2str(err), ")"));
      // The most specific code wins: what the operator must fix over what
      // may pass.
      if (code == absl::StatusCode::kOk || code == absl::StatusCode::kUnavailable) {
        code = CreateErrorCode(err);
      }
    }
  }
  if (!refused.empty()) {
    return absl::Status(
        code, absl::StrCat("the cluster refused to create ", absl::StrJoin(refused, "; ")));
  }
  return created;
}

// Sends one CreateTopics request for `topics` and waits for its answer.
// Returns the topics the cluster created (not those that existed already).
absl::StatusOr<std::vector<std::string>> SendCreateTopics(
    rd_kafka_t* rk, const std::vector<std::string>& topics, int partitions, int replication_factor,
    const std::optional<int64_t>& retention_ms, absl::Time deadline) {
  absl::StatusOr<std::vector<NewTopicPtr>> owned =
      NewTopics(topics, partitions, replication_factor, retention_ms);
  if (!owned.ok()) return owned.status();
  std::vector<rd_kafka_NewTopic_t*> requests;
  for (const NewTopicPtr& request : *owned) requests.push_back(request.get());
  absl::StatusOr<AdminOptionsPtr> options = CreateTopicsOptions(rk, deadline);
  if (!options.ok()) return options.status();
  const std::unique_ptr<rd_kafka_queue_t, QueueDeleter> queue(rd_kafka_queue_new(rk));
  rd_kafka_CreateTopics(rk, requests.data(), requests.size(), options->get(), queue.get());
  // The request timeout ends the request with an error event; the margin
  // lets that event arrive.
  const std::unique_ptr<rd_kafka_event_t, EventDeleter> event(
      rd_kafka_queue_poll(queue.get(), RemainingMs(deadline) + 1000));
  if (event == nullptr) {
    return absl::DeadlineExceededError("the cluster did not answer CreateTopics in time");
  }
  if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::Status(CreateErrorCode(rd_kafka_event_error(event.get())),
                        absl::StrCat("CreateTopics: ", rd_kafka_event_error_string(event.get())));
  }
  return TopicsCreated(event.get());
}

}  // namespace

absl::Status CheckTopicsExist(const std::string& bootstrap_servers,
                              const std::map<std::string, std::string>& properties,
                              const std::vector<std::string>& topics, absl::Duration timeout) {
  absl::StatusOr<HandlePtr> rk = AdminHandle(bootstrap_servers, properties, "retryd-topic-check");
  if (!rk.ok()) return rk.status();
  absl::StatusOr<ClusterTopics> cluster =
      ReadClusterTopics(rk->get(), bootstrap_servers, absl::Now() + timeout);
  if (!cluster.ok()) return cluster.status();
  if (const std::vector<std::string> missing = Missing(*cluster, topics); !missing.empty()) {
    return MissingTopicsError(missing, bootstrap_servers,
                              "retryd creates no topic on a real cluster unless "
                              "kafka.create_topics is set, and never an input topic");
  }
  return absl::OkStatus();
}

absl::StatusOr<CreatedTopics> CreateMissingTopics(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::vector<std::string>& required, const std::vector<std::string>& topics,
    const NewTopicSpec& spec, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<HandlePtr> rk = AdminHandle(bootstrap_servers, properties, "retryd-topic-create");
  if (!rk.ok()) return rk.status();
  absl::StatusOr<ClusterTopics> cluster = ReadClusterTopics(rk->get(), bootstrap_servers, deadline);
  if (!cluster.ok()) return cluster.status();
  if (const std::vector<std::string> missing = Missing(*cluster, required); !missing.empty()) {
    return MissingTopicsError(missing, bootstrap_servers,
                              "kafka.create_topics creates the retry, dead-letter and output "
                              "topics, never an input topic");
  }
  CreatedTopics out;
  const std::vector<std::string> to_create = Missing(*cluster, topics);
  if (to_create.empty()) return out;
  out.partitions = spec.partitions;
  if (out.partitions <= 0) {
    if (required.empty()) {
      return absl::InvalidArgumentError("no input topic to take the partition count from");
    }
    out.partitions = cluster->topics.at(required.front()).partitions;
  }
  out.replication_factor =
      spec.replication_factor > 0 ? spec.replication_factor : std::min(3, cluster->brokers);
  absl::StatusOr<std::vector<std::string>> created = SendCreateTopics(
      rk->get(), to_create, out.partitions, out.replication_factor, spec.retention_ms, deadline);
  if (!created.ok()) return created.status();
  out.topics = *std::move(created);
  // A created topic's partitions get their leaders a moment after the
  // controller answers, and producers and consumers need them. Metadata
  // offers nothing to wait on, so it is asked again until then.
  for (;;) {
    cluster = ReadClusterTopics(rk->get(), bootstrap_servers, deadline);
    if (!cluster.ok()) return cluster.status();
    std::vector<std::string> waiting;
    for (const std::string& topic : to_create) {
      auto it = cluster->topics.find(topic);
      if (it == cluster->topics.end() || !it->second.led) waiting.push_back(topic);
    }
    if (waiting.empty()) return out;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("created ", absl::StrJoin(waiting, ", "),
                       ", but not every partition has a leader in time"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::StatusOr<std::unique_ptr<GroupLagProbe>> GroupLagProbe::Create(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& group_id, const std::string& topic) {
  return Create(bootstrap_servers, properties, group_id, std::vector<std::string>{topic});
}

absl::StatusOr<std::unique_ptr<GroupLagProbe>> GroupLagProbe::Create(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& group_id, std::vector<std::string> topics) {
  if (topics.empty()) return absl::InvalidArgumentError("a lag probe needs a topic");
  Properties user = properties;
  user.emplace("client.id", "retryd-lag-probe");
  // A consumer handle that never subscribes reads the group's offsets
  // without becoming a member.
  absl::StatusOr<ConfPtr> conf =
      MakeConf(bootstrap_servers, user, {{"group.id", group_id}, {"enable.auto.commit", "false"}});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  return std::unique_ptr<GroupLagProbe>(
      new GroupLagProbe(*std::move(rk), group_id, std::move(topics)));
}

absl::StatusOr<std::map<int32_t, int64_t>> GroupLagProbe::Committed(absl::Duration timeout) const {
  return CommittedOn(topics_.front(), absl::Now() + timeout);
}

absl::StatusOr<std::map<int32_t, int64_t>> GroupLagProbe::CommittedOn(const std::string& topic,
                                                                      absl::Time deadline) const {
  absl::StatusOr<int> partitions =
      PartitionCount(rk_.get(), topic, std::max(absl::ZeroDuration(), deadline - absl::Now()));
  if (!partitions.ok()) return partitions.status();
  std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)> list(
      rd_kafka_topic_partition_list_new(*partitions), rd_kafka_topic_partition_list_destroy);
  for (int p = 0; p < *partitions; ++p) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p);
  }
  const rd_kafka_resp_err_t err = rd_kafka_committed(rk_.get(), list.get(), RemainingMs(deadline));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        absl::StrCat("committed offsets of ", group_id_, ": ", rd_kafka_err2str(err)));
  }
  std::map<int32_t, int64_t> committed;
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = list->elems[i];
    committed[p.partition] = p.offset >= 0 ? p.offset : -1;
  }
  return committed;
}

absl::StatusOr<std::vector<std::map<int32_t, int64_t>>> GroupLagProbe::MeasurePartitions(
    absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::map<int32_t, int64_t>> lags;
  for (const std::string& topic : topics_) {
    absl::StatusOr<std::map<int32_t, int64_t>> committed = CommittedOn(topic, deadline);
    if (!committed.ok()) return committed.status();
    absl::StatusOr<std::vector<Watermarks>> watermarks =
        QueryWatermarks(rk_.get(), topic, static_cast<int>(committed->size()), deadline);
    if (!watermarks.ok()) return watermarks.status();
    std::map<int32_t, int64_t>& each = lags.emplace_back();
    for (const auto& [partition, offset] : *committed) {
      const Watermarks& w = (*watermarks)[partition];
      const int64_t from = offset >= 0 ? std::max(offset, w.low) : w.low;
      each[partition] = w.high > from ? w.high - from : 0;
    }
  }
  return lags;
}

absl::StatusOr<std::vector<int64_t>> GroupLagProbe::MeasureEach(absl::Duration timeout) const {
  absl::StatusOr<std::vector<std::map<int32_t, int64_t>>> each = MeasurePartitions(timeout);
  if (!each.ok()) return each.status();
  std::vector<int64_t> lags;
  for (const auto& partitions : *each) {
    int64_t lag = 0;
    for (const auto& [partition, l] : partitions) lag += l;
    lags.push_back(lag);
  }
  return lags;
}

absl::StatusOr<int64_t> GroupLagProbe::Measure(absl::Duration timeout) const {
  absl::StatusOr<std::vector<int64_t>> each = MeasureEach(timeout);
  if (!each.ok()) return each.status();
  int64_t lag = 0;
  for (int64_t l : *each) lag += l;
  return lag;
}

absl::StatusOr<std::unique_ptr<ClusterProbe>> ClusterProbe::Create(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties) {
  Properties user = properties;
  // The probe's own timeouts, whatever the operator chose for the engine's
  // clients: a request that gets no answer in a second on the wire takes
  // its broker down (socket.max.fails 1), so the next one goes elsewhere;
  // a connection to every broker, tried again within a second.
  user.erase("socket.timeout.ms");
  user.erase("socket.max.fails");
  user.erase("enable.sparse.connections");
  user.erase("reconnect.backoff.ms");
  user.erase("reconnect.backoff.max.ms");
  user.insert_or_assign("client.id", "retryd-cluster-probe");
  absl::StatusOr<ConfPtr> conf = MakeConf(bootstrap_servers, user,
                                          {{"socket.timeout.ms", "1000"},
                                           {"socket.max.fails", "1"},
                                           {"enable.sparse.connections", "false"},
                                           // Back within a second of the brokers.
                                           {"reconnect.backoff.ms", "100"},
                                           {"reconnect.backoff.max.ms", "1000"}});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  return std::unique_ptr<ClusterProbe>(new ClusterProbe(*std::move(rk)));
}

absl::Status ClusterProbe::Ping(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  // Bounded: an attempt either answers, fails when its broker is taken
  // down (then the next goes to another), or waits out the deadline.
  constexpr int kAttempts = 4;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
  for (int attempt = 0; attempt < kAttempts && absl::Now() < deadline; ++attempt) {
    const rd_kafka_metadata_t* metadata = nullptr;
    // No topic and all_topics=0: a request for the broker list only.
    err = rd_kafka_metadata(rk_.get(), /*all_topics=*/0, nullptr, &metadata, RemainingMs(deadline));
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_metadata_destroy(metadata);
      return absl::OkStatus();
    }
  }
  return absl::UnavailableError(absl::StrCat("metadata request: ", rd_kafka_err2str(err)));
}

}  // namespace retryd::kafka
