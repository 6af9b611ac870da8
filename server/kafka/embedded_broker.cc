#include "server/kafka/embedded_broker.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "absl/strings/str_cat.h"
#include "server/kafka/properties.h"

namespace retryd::kafka {

absl::StatusOr<std::unique_ptr<EmbeddedBroker>> EmbeddedBroker::Start(int brokers) {
  if (brokers < 1) return absl::InvalidArgumentError("an embedded broker needs at least 1 broker");
  absl::StatusOr<ConfPtr> conf = MakeConf("", {{"client.id", "retryd-embedded-broker"}}, {});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(rk->get(), brokers);
  if (cluster == nullptr) return absl::InternalError("cannot start the embedded broker");
  std::unique_ptr<EmbeddedBroker> broker(new EmbeddedBroker());
  broker->rk_ = *std::move(rk);
  broker->cluster_ = cluster;
  broker->bootstrap_servers_ = rd_kafka_mock_cluster_bootstraps(cluster);
  broker->broker_count_ = brokers;
  return broker;
}

EmbeddedBroker::~EmbeddedBroker() {
  rd_kafka_mock_cluster_destroy(cluster_);  // Before rk_, which hosts it.
}

absl::Status EmbeddedBroker::CreateTopic(const std::string& topic, int partitions,
                                         int replication_factor) {
  const rd_kafka_resp_err_t err =
      rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, replication_factor);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InternalError(
        absl::StrCat("cannot create topic ", topic, ": ", rd_kafka_err2str(err)));
  }
  return absl::OkStatus();
}

void EmbeddedBroker::PushRequestErrors(int16_t api_key, const std::vector<int>& errors) {
  std::vector<rd_kafka_resp_err_t> codes;
  for (int e : errors) codes.push_back(static_cast<rd_kafka_resp_err_t>(e));
  rd_kafka_mock_push_request_errors_array(cluster_, api_key, codes.size(), codes.data());
}

void EmbeddedBroker::ClearRequestErrors(int16_t api_key) {
  rd_kafka_mock_clear_request_errors(cluster_, api_key);
}

void EmbeddedBroker::SetTopicError(const std::string& topic, int error) {
  rd_kafka_mock_topic_set_error(cluster_, topic.c_str(), static_cast<rd_kafka_resp_err_t>(error));
}

absl::Status EmbeddedBroker::SetBrokerDown(int32_t broker_id) {
  const rd_kafka_resp_err_t err = rd_kafka_mock_broker_set_down(cluster_, broker_id);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return absl::InvalidArgumentError(rd_kafka_err2str(err));
  return absl::OkStatus();
}

absl::Status EmbeddedBroker::SetBrokerUp(int32_t broker_id) {
  const rd_kafka_resp_err_t err = rd_kafka_mock_broker_set_up(cluster_, broker_id);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return absl::InvalidArgumentError(rd_kafka_err2str(err));
  return absl::OkStatus();
}

absl::Status EmbeddedBroker::SetBrokerRtt(int32_t broker_id, absl::Duration rtt) {
  const rd_kafka_resp_err_t err = rd_kafka_mock_broker_set_rtt(
      cluster_, broker_id, static_cast<int>(absl::ToInt64Milliseconds(rtt)));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return absl::InvalidArgumentError(rd_kafka_err2str(err));
  return absl::OkStatus();
}

absl::Status EmbeddedBroker::SetPartitionLeader(const std::string& topic, int32_t partition,
                                                int32_t broker_id) {
  const rd_kafka_resp_err_t err =
      rd_kafka_mock_partition_set_leader(cluster_, topic.c_str(), partition, broker_id);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat("cannot make broker ", broker_id, " lead ",
                                                   topic, "/", partition, ": ",
                                                   rd_kafka_err2str(err)));
  }
  return absl::OkStatus();
}

absl::Status EmbeddedBroker::SetGroupCoordinator(const std::string& group, int32_t broker_id) {
  const rd_kafka_resp_err_t err =
      rd_kafka_mock_coordinator_set(cluster_, "group", group.c_str(), broker_id);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat("cannot make broker ", broker_id,
                                                   " coordinate group ", group, ": ",
                                                   rd_kafka_err2str(err)));
  }
  return absl::OkStatus();
}

}  // namespace retryd::kafka
