#include "server/kafka/topic_reader.h"

#include <librdkafka/rdkafka.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/kafka/message.h"
#include "server/kafka/properties.h"

namespace retryd::kafka {

absl::StatusOr<std::vector<Record>> ReadTopic(const std::string& bootstrap_servers,
                                              const std::map<std::string, std::string>& properties,
                                              const std::string& topic, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  auto remaining_ms = [&] {
    return static_cast<int>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
  };
  Properties user = properties;
  user.emplace("client.id", "retryd-topic-reader");
  absl::StatusOr<ConfPtr> conf =
      MakeConf(bootstrap_servers, user,
               {{"enable.auto.commit", "false"},
                {"enable.partition.eof", "false"},
                {"group.id", "retryd-topic-reader"},
                // A position that went out of range is reported, never skipped over.
                {"auto.offset.reset", "error"}});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  rd_kafka_poll_set_consumer(rk->get());

  absl::StatusOr<int> partition_count =
      PartitionCount(rk->get(), topic, absl::Milliseconds(remaining_ms()));
  if (!partition_count.ok()) return partition_count.status();
  const int partitions = *partition_count;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;

  std::vector<int64_t> low(partitions, 0), high(partitions, 0);
  rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) {
    err = rd_kafka_query_watermark_offsets(rk->get(), topic.c_str(), p, &low[p], &high[p],
                                           remaining_ms());
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_topic_partition_list_destroy(assignment);
      return absl::UnavailableError(
          absl::StrCat("watermarks of ", topic, "/", p, ": ", rd_kafka_err2str(err)));
    }
    if (high[p] > low[p]) {
      rd_kafka_topic_partition_list_add(assignment, topic.c_str(), p)->offset = low[p];
    }
  }
  err = rd_kafka_assign(rk->get(), assignment);
  rd_kafka_topic_partition_list_destroy(assignment);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(absl::StrCat("assign ", topic, ": ", rd_kafka_err2str(err)));
  }

  // A partition is complete once its record at high - 1 has been read.
  std::vector<std::vector<Record>> by_partition(partitions);
  std::vector<bool> complete(partitions, true);
  int remaining = 0;
  for (int p = 0; p < partitions; ++p) {
    if (high[p] > low[p]) {
      complete[p] = false;
      ++remaining;
    }
  }
  while (remaining > 0) {
    if (absl::Now() >= deadline) {
      // The reader never commits: what close reports changes nothing here.
      (void)rd_kafka_consumer_close(rk->get());
      return absl::DeadlineExceededError(absl::StrCat("reading ", topic, ": ", remaining,
                                                      " partitions not read to the end in time"));
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk->get(), std::min(100, remaining_ms()));
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
      const std::string what = rd_kafka_message_errstr(m);
      rd_kafka_message_destroy(m);
      (void)rd_kafka_consumer_close(rk->get());  // Never commits; see above.
      return absl::DataLossError(absl::StrCat("reading ", topic, ": ", what));
    }
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition < partitions) {
      const int p = m->partition;
      if (m->offset < high[p]) by_partition[p].push_back(ToRecord(m));
      if (!complete[p] && m->offset >= high[p] - 1) {
        complete[p] = true;
        --remaining;
      }
    }
    rd_kafka_message_destroy(m);
  }
  (void)rd_kafka_consumer_close(rk->get());  // Never commits; see above.
  std::vector<Record> out;
  for (auto& records : by_partition) {
    for (Record& r : records) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace retryd::kafka
