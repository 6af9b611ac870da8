#include "server/kafka/topics.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/kafka/properties.h"
#include "server/kafka/watermarks.h"

namespace retryd::kafka {
namespace {

// What is left of `deadline` in librdkafka's milliseconds, at least 1.
int RemainingMs(absl::Time deadline) {
  return static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

}  // namespace

absl::Status CheckTopicsExist(const std::string& bootstrap_servers,
                              const std::map<std::string, std::string>& properties,
                              const std::vector<std::string>& topics, absl::Duration timeout) {
  Properties user = properties;
  user.emplace("client.id", "retryd-topic-check");
  absl::StatusOr<ConfPtr> conf = MakeConf(bootstrap_servers, user, {});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  const rd_kafka_metadata_t* metadata = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk->get(), /*all_topics=*/1, nullptr, &metadata,
                        static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(absl::StrCat("cannot read topic metadata from ",
                                               bootstrap_servers, ": ", rd_kafka_err2str(err)));
  }
  std::set<std::string> present;
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    if (metadata->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      present.insert(metadata->topics[i].topic);
    }
  }
  rd_kafka_metadata_destroy(metadata);
  std::vector<std::string> missing;
  for (const std::string& topic : topics) {
    if (!present.contains(topic)) missing.push_back(topic);
  }
  if (!missing.empty()) {
    return absl::NotFoundError(
        absl::StrCat("topic", missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "),
                     missing.size() > 1 ? " do" : " does", " not exist on ", bootstrap_servers,
                     "; create ", missing.size() > 1 ? "them" : "it",
                     " (retryd does not create topics on a "
                     "real cluster)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GroupLagProbe>> GroupLagProbe::Create(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& group_id, const std::string& topic) {
  Properties user = properties;
  user.emplace("client.id", "retryd-lag-probe");
  // A consumer handle that never subscribes reads the group's offsets
  // without becoming a member.
  absl::StatusOr<ConfPtr> conf =
      MakeConf(bootstrap_servers, user, {{"group.id", group_id}, {"enable.auto.commit", "false"}});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  return std::unique_ptr<GroupLagProbe>(new GroupLagProbe(*std::move(rk), group_id, topic));
}

absl::StatusOr<std::map<int32_t, int64_t>> GroupLagProbe::Committed(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<int> partitions = PartitionCount(rk_.get(), topic_, timeout);
  if (!partitions.ok()) return partitions.status();
  std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)> list(
      rd_kafka_topic_partition_list_new(*partitions), rd_kafka_topic_partition_list_destroy);
  for (int p = 0; p < *partitions; ++p) {
    rd_kafka_topic_partition_list_add(list.get(), topic_.c_str(), p);
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

absl::StatusOr<int64_t> GroupLagProbe::Measure(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<std::map<int32_t, int64_t>> committed = Committed(timeout);
  if (!committed.ok()) return committed.status();
  absl::StatusOr<std::vector<Watermarks>> watermarks =
      QueryWatermarks(rk_.get(), topic_, static_cast<int>(committed->size()), deadline);
  if (!watermarks.ok()) return watermarks.status();
  int64_t lag = 0;
  for (const auto& [partition, offset] : *committed) {
    const Watermarks& w = (*watermarks)[partition];
    const int64_t from = offset >= 0 ? std::max(offset, w.low) : w.low;
    if (w.high > from) lag += w.high - from;
  }
  return lag;
}

}  // namespace retryd::kafka
