#include "server/kafka/watermarks.h"

#include <algorithm>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace retryd::kafka {

absl::StatusOr<std::vector<int64_t>> ListOffsets(rd_kafka_t* rk, const std::string& topic,
                                                 int partitions, int64_t timestamp,
                                                 absl::Time deadline) {
  std::vector<int64_t> offsets(partitions, -1);
  if (partitions == 0) return offsets;
  std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)> list(
      rd_kafka_topic_partition_list_new(partitions), rd_kafka_topic_partition_list_destroy);
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset = timestamp;
  }
  const int timeout_ms =
      static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now())));
  const rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, list.get(), timeout_ms);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    const std::string message = absl::StrCat("offsets of ", topic, ": ", rd_kafka_err2str(err));
    return err == RD_KAFKA_RESP_ERR__TIMED_OUT ? absl::DeadlineExceededError(message)
                                               : absl::UnavailableError(message);
  }
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = list->elems[i];
    if (p.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return absl::UnavailableError(
          absl::StrCat("offsets of ", topic, "/", p.partition, ": ", rd_kafka_err2str(p.err)));
    }
    if (p.partition >= 0 && p.partition < partitions) offsets[p.partition] = p.offset;
  }
  return offsets;
}

absl::StatusOr<std::vector<Watermarks>> QueryWatermarks(rd_kafka_t* rk, const std::string& topic,
                                                        int partitions, absl::Time deadline) {
  // A ListOffsets request for the timestamp OFFSET_BEGINNING answers the
  // low watermark, one for OFFSET_END the high: the requests
  // rd_kafka_query_watermark_offsets() makes, sent through
  // rd_kafka_offsets_for_times(), which keeps to its timeout.
  absl::StatusOr<std::vector<int64_t>> low =
      ListOffsets(rk, topic, partitions, RD_KAFKA_OFFSET_BEGINNING, deadline);
  if (!low.ok()) return low.status();
  absl::StatusOr<std::vector<int64_t>> high =
      ListOffsets(rk, topic, partitions, RD_KAFKA_OFFSET_END, deadline);
  if (!high.ok()) return high.status();
  std::vector<Watermarks> watermarks(partitions);
  for (int p = 0; p < partitions; ++p) {
    // A broker that gives no start for an empty partition: it starts at its end.
    watermarks[p] = {(*low)[p] < 0 ? std::max<int64_t>(0, (*high)[p]) : (*low)[p], (*high)[p]};
  }
  return watermarks;
}

}  // namespace retryd::kafka
