#include "server/kafka/topics.h"

#include <librdkafka/rdkafka.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/kafka/properties.h"

namespace retryd::kafka {

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
  const rd_kafka_resp_err_t err = rd_kafka_metadata(
      rk->get(), /*all_topics=*/1, nullptr, &metadata,
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
    return absl::NotFoundError(absl::StrCat(
        "topic", missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "),
        missing.size() > 1 ? " do" : " does", " not exist on ", bootstrap_servers,
        "; create ", missing.size() > 1 ? "them" : "it", " (retryd does not create topics on a "
        "real cluster)"));
  }
  return absl::OkStatus();
}

}  // namespace retryd::kafka
