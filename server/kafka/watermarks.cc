#include "server/kafka/watermarks.h"

#include <algorithm>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace retryd::kafka {

absl::StatusOr<std::vector<Watermarks>> QueryWatermarks(rd_kafka_t* rk, const std::string& topic,
                                                        int partitions, absl::Time deadline) {
  std::vector<Watermarks> watermarks(partitions);
  if (partitions == 0) return watermarks;
  // A ListOffsets request for the timestamp OFFSET_BEGINNING answers the
  // low watermark, one for OFFSET_END the high: the requests
  // rd_kafka_query_watermark_offsets() makes, sent through
  // rd_kafka_offsets_for_times(), which keeps to its timeout.
  for (const int64_t which : {RD_KAFKA_OFFSET_BEGINNING, RD_KAFKA_OFFSET_END}) {
    std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)>
        list(rd_kafka_topic_partition_list_new(partitions), rd_kafka_topic_partition_list_destroy);
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset = which;
    }
    const int timeout_ms =
        static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now())));
    const rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, list.get(), timeout_ms);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      const std::string message =
          absl::StrCat("watermarks of ", topic, ": ", rd_kafka_err2str(err));
      return err == RD_KAFKA_RESP_ERR__TIMED_OUT ? absl::DeadlineExceededError(message)
                                                 : absl::UnavailableError(message);
    }
    for (int i = 0; i < list->cnt; ++i) {
      const rd_kafka_topic_partition_t& p = list->elems[i];
      if (p.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return absl::UnavailableError(
            absl::StrCat("watermarks of ", topic, "/", p.partition, ": ", rd_kafka_err2str(p.err)));
      }
      if (p.partition < 0 || p.partition >= partitions) continue;
      Watermarks& w = watermarks[p.partition];
      (which == RD_KAFKA_OFFSET_BEGINNING ? w.low : w.high) = p.offset;
    }
  }
  // A broker that gives no start for an empty partition: it starts at its end.
  for (Watermarks& w : watermarks) {
    if (w.low < 0) w.low = std::max<int64_t>(0, w.high);
  }
  return watermarks;
}

}  // namespace retryd::kafka
