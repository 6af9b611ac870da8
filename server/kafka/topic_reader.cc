#include "server/kafka/topic_reader.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/kafka/message.h"
#include "server/kafka/properties.h"
#include "server/kafka/watermarks.h"

namespace retryd::kafka {
namespace {

int RemainingMs(absl::Time deadline) {
  return static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

// A consumer that never commits nor joins its group: it is assigned its
// partitions. `eof`: it reports each partition's end.
absl::StatusOr<HandlePtr> NewReader(const std::string& bootstrap_servers,
                                    const std::map<std::string, std::string>& properties,
                                    bool eof = false) {
  Properties user = properties;
  user.emplace("client.id", "retryd-topic-reader");
  absl::StatusOr<ConfPtr> conf =
      MakeConf(bootstrap_servers, user,
               {{"enable.auto.commit", "false"},
                {"enable.partition.eof", eof ? "true" : "false"},
                {"group.id", "retryd-topic-reader"},
                // A position that went out of range is reported, never skipped over.
                {"auto.offset.reset", "error"}});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  rd_kafka_poll_set_consumer(rk->get());
  return rk;
}

// The watermarks of each of `topic`'s partitions, by partition.
absl::StatusOr<std::vector<Watermarks>> TopicWatermarks(rd_kafka_t* rk, const std::string& topic,
                                                        absl::Time deadline) {
  absl::StatusOr<int> partition_count =
      PartitionCount(rk, topic, absl::Milliseconds(RemainingMs(deadline)));
  if (!partition_count.ok()) return partition_count.status();
  return QueryWatermarks(rk, topic, *partition_count, deadline);
}

// Assigns every partition that has records, from its low watermark.
absl::Status AssignNonEmpty(rd_kafka_t* rk, const std::string& topic,
                            const std::vector<Watermarks>& watermarks) {
  const int partitions = static_cast<int>(watermarks.size());
  rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) {
    if (watermarks[p].high > watermarks[p].low) {
      rd_kafka_topic_partition_list_add(assignment, topic.c_str(), p)->offset = watermarks[p].low;
    }
  }
  const rd_kafka_resp_err_t err = rd_kafka_assign(rk, assignment);
  rd_kafka_topic_partition_list_destroy(assignment);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(absl::StrCat("assign ", topic, ": ", rd_kafka_err2str(err)));
  }
  return absl::OkStatus();
}

// Visits the assigned partitions' records, read up to the high watermark of
// each.
absl::Status ConsumeToEnd(rd_kafka_t* rk, const std::string& topic,
                          const std::vector<Watermarks>& watermarks, absl::Time deadline,
                          const std::function<void(const Record&)>& visit) {
  const int partitions = static_cast<int>(watermarks.size());
  // A partition is complete once its record at high - 1 has been read.
  std::vector<bool> complete(partitions, true);
  int remaining = 0;
  for (int p = 0; p < partitions; ++p) {
    if (watermarks[p].high > watermarks[p].low) {
      complete[p] = false;
      ++remaining;
    }
  }
  while (remaining > 0) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("reading ", topic, ": ", remaining,
                                                      " partitions not read to the end in time"));
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, std::min(100, RemainingMs(deadline)));
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
      const std::string what = rd_kafka_message_errstr(m);
      rd_kafka_message_destroy(m);
      return absl::DataLossError(absl::StrCat("reading ", topic, ": ", what));
    }
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition < partitions) {
      const int p = m->partition;
      if (m->offset < watermarks[p].high) visit(ToRecord(m));
      if (!complete[p] && m->offset >= watermarks[p].high - 1) {
        complete[p] = true;
        --remaining;
      }
    }
    rd_kafka_message_destroy(m);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ScanTopic(const std::string& bootstrap_servers,
                       const std::map<std::string, std::string>& properties,
                       const std::string& topic, const std::map<int32_t, int64_t>& from,
                       absl::Duration timeout, const std::function<void(const Record&)>& visit) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<HandlePtr> rk = NewReader(bootstrap_servers, properties);
  if (!rk.ok()) return rk.status();
  absl::StatusOr<std::vector<Watermarks>> watermarks = TopicWatermarks(rk->get(), topic, deadline);
  if (!watermarks.ok()) return watermarks.status();
  for (const auto& [partition, offset] : from) {
    if (partition >= 0 && partition < static_cast<int32_t>(watermarks->size())) {
      Watermarks& w = (*watermarks)[partition];
      w.low = std::clamp(offset, w.low, w.high);
    }
  }
  if (absl::Status assigned = AssignNonEmpty(rk->get(), topic, *watermarks); !assigned.ok()) {
    return assigned;
  }
  absl::Status read = ConsumeToEnd(rk->get(), topic, *watermarks, deadline, visit);
  // The reader never commits: what close reports changes nothing here.
  (void)rd_kafka_consumer_close(rk->get());
  return read;
}

absl::StatusOr<std::vector<Record>> ReadTopic(const std::string& bootstrap_servers,
                                              const std::map<std::string, std::string>& properties,
                                              const std::string& topic, absl::Duration timeout) {
  std::map<int32_t, std::vector<Record>> by_partition;
  absl::Status read = ScanTopic(bootstrap_servers, properties, topic, /*from=*/{}, timeout,
                                [&](const Record& r) { by_partition[r.partition].push_back(r); });
  if (!read.ok()) return read;
  std::vector<Record> out;
  for (auto& [partition, records] : by_partition) {
    for (Record& r : records) out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<OffsetRange>> TopicOffsetRanges(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& topic, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<HandlePtr> rk = NewReader(bootstrap_servers, properties);
  if (!rk.ok()) return rk.status();
  absl::StatusOr<std::vector<Watermarks>> watermarks = TopicWatermarks(rk->get(), topic, deadline);
  if (!watermarks.ok()) return watermarks.status();
  std::vector<OffsetRange> out;
  for (const Watermarks& w : *watermarks) out.push_back({w.low, w.high});
  return out;
}

absl::StatusOr<std::map<int32_t, int64_t>> TopicOffsetsSince(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& topic, absl::Time time, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<HandlePtr> rk = NewReader(bootstrap_servers, properties);
  if (!rk.ok()) return rk.status();
  absl::StatusOr<std::vector<Watermarks>> watermarks = TopicWatermarks(rk->get(), topic, deadline);
  if (!watermarks.ok()) return watermarks.status();
  const int partitions = static_cast<int>(watermarks->size());
  absl::StatusOr<std::vector<int64_t>> offsets =
      ListOffsets(rk->get(), topic, partitions, absl::ToUnixMillis(time), deadline);
  if (!offsets.ok()) return offsets.status();
  std::map<int32_t, int64_t> out;
  for (int p = 0; p < partitions; ++p) {
    out[p] = (*offsets)[p] < 0 ? (*watermarks)[p].high : (*offsets)[p];
  }
  return out;
}

PartitionReader::PartitionReader(HandlePtr rk, std::string topic, std::map<int32_t, int64_t> ends)
    : rk_(std::move(rk)), topic_(std::move(topic)), ends_(std::move(ends)) {}

PartitionReader::~PartitionReader() {
  // It never commits: what close reports changes nothing.
  if (rk_ != nullptr) (void)rd_kafka_consumer_close(rk_.get());
}

absl::StatusOr<std::unique_ptr<PartitionReader>> PartitionReader::Open(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& topic, const std::map<int32_t, OffsetRange>& ranges) {
  absl::StatusOr<HandlePtr> rk = NewReader(bootstrap_servers, properties, /*eof=*/true);
  if (!rk.ok()) return rk.status();
  std::map<int32_t, int64_t> ends;
  for (const auto& [partition, range] : ranges) ends[partition] = range.high;
  std::unique_ptr<PartitionReader> reader(
      new PartitionReader(*std::move(rk), topic, std::move(ends)));
  rd_kafka_topic_partition_list_t* assignment =
      rd_kafka_topic_partition_list_new(static_cast<int>(ranges.size()));
  for (const auto& [partition, range] : ranges) {
    reader->positions_[partition] = std::min(range.low, range.high);
    if (range.high > range.low) {
      rd_kafka_topic_partition_list_add(assignment, topic.c_str(), partition)->offset = range.low;
      ++reader->remaining_;
    }
  }
  const rd_kafka_resp_err_t err = rd_kafka_assign(reader->rk_.get(), assignment);
  rd_kafka_topic_partition_list_destroy(assignment);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(absl::StrCat("assign ", topic, ": ", rd_kafka_err2str(err)));
  }
  return reader;
}

void PartitionReader::Done(int32_t partition) {
  positions_[partition] = ends_.at(partition);
  --remaining_;
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic_.c_str(), partition);
  (void)rd_kafka_pause_partitions(rk_.get(), list);
  rd_kafka_topic_partition_list_destroy(list);
}

absl::StatusOr<std::optional<Record>> PartitionReader::Next(absl::Time deadline) {
  while (remaining_ > 0) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("reading ", topic_, ": ", remaining_,
                                                      " partitions not read to their end in time"));
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_.get(), std::min(100, RemainingMs(deadline)));
    if (m == nullptr) continue;
    const std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> owned(
        m, rd_kafka_message_destroy);
    if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
      return absl::DataLossError(
          absl::StrCat("reading ", topic_, ": ", rd_kafka_message_errstr(m)));
    }
    auto end = ends_.find(m->partition);
    if (end == ends_.end()) continue;
    int64_t& position = positions_[m->partition];
    if (position >= end->second) continue;  // Done already.
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      // Nothing more now: records below the end that never come (a
      // compacted or aborted range) do not hold the reader.
      if (m->offset >= end->second) Done(m->partition);
      continue;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;  // librdkafka retries.
    if (m->offset >= end->second) {
      Done(m->partition);
      continue;
    }
    position = m->offset + 1;
    Record record = ToRecord(m);
    if (position >= end->second) Done(m->partition);
    return std::optional<Record>(std::move(record));
  }
  return std::optional<Record>();
}

}  // namespace retryd::kafka
