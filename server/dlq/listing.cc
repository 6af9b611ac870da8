// DeadLetterTools::List and the purge marks it skips (dead_letter_tools.h).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "server/common/error_reason.h"
#include "server/dlq/dead_letter_tools.h"
#include "server/dlq/dead_letters.h"
#include "server/dlq/tool_limits.h"
#include "server/kafka/group_tools.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::dlq {
namespace {

// The checks of `query` alone; its cursor, if it has a page token.
absl::StatusOr<std::optional<ListCursor>> CheckQuery(const ListQuery& query) {
  if (query.page_size > kMaxPageSize) {
    return InvalidField(absl::StrCat("page_size: must be at most ", kMaxPageSize, ", got ",
                                     query.page_size, "; 0 means ", kDefaultPageSize));
  }
  if (query.max_value_bytes > kMaxValueBytes) {
    return InvalidField(absl::StrCat("max_value_bytes: must be at most ", kMaxValueBytes, ", got ",
                                     query.max_value_bytes));
  }
  if (absl::Status s = ValidateFilter(query.filter); !s.ok()) return s;
  std::optional<ListCursor> cursor;
  if (!query.page_token.empty()) {
    absl::StatusOr<ListCursor> decoded = DecodePageToken(query.page_token);
    if (!decoded.ok()) return decoded.status();
    cursor = *std::move(decoded);
  }
  return cursor;
}

// Reads one page of `query` from `read` into `page`; the cursor moved on.
absl::Status ReadPage(const ToolsOptions& options, const ListedBytes& listed_bytes,
                      const ListQuery& query, const std::map<int32_t, kafka::OffsetRange>& read,
                      absl::Time deadline, ListCursor& cursor, ListPage& page) {
  const uint32_t page_size = query.page_size == 0 ? kDefaultPageSize : query.page_size;
  const size_t value_bytes =
      query.max_value_bytes == 0 ? kDefaultValueBytes : query.max_value_bytes;
  absl::StatusOr<std::unique_ptr<kafka::PartitionReader>> reader = kafka::PartitionReader::Open(
      options.bootstrap_servers, options.kafka_properties, options.dead_letter_topic, read);
  if (!reader.ok()) return reader.status();
  // Leaves time for the answer to reach the caller.
  const absl::Time read_until =
      deadline - std::min(absl::Seconds(1), (deadline - absl::Now()) / 10);
  size_t bytes = 0;
  int64_t scanned = 0;
  while (page.records.size() < page_size && bytes < kMaxPageBytes && scanned < kMaxScannedPerPage) {
    absl::StatusOr<std::optional<Record>> next = (*reader)->Next(read_until);
    if (absl::IsDeadlineExceeded(next.status()) && scanned > 0) break;  // A short page.
    if (!next.ok()) return next.status();
    if (!next->has_value()) break;
    ++scanned;
    DeadLetter dead = DecodeDeadLetter(**next, value_bytes);
    if (!Matches(query.filter, dead)) continue;
    bytes += listed_bytes(dead);
    page.records.push_back(std::move(dead));
  }
  page.scanned = scanned;
  for (const auto& [p, next] : (*reader)->positions()) cursor.partitions[p].next = next;
  return absl::OkStatus();
}

}  // namespace

std::string PurgeGroup(const std::string& group_id) { return group_id + ".dlq-tools"; }
std::string RedriveGroupPrefix(const std::string& group_id) { return group_id + ".ops."; }

absl::Status InvalidField(const std::string& message) {
  return WithReason(absl::InvalidArgumentError(message), reason::kInvalidField);
}

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  absl::Status out(status.code(), absl::StrCat(prefix, status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::StatusOr<std::map<int32_t, int64_t>> DeadLetterTools::PurgeMarks(
    int partitions, absl::Duration timeout) const {
  absl::StatusOr<std::unique_ptr<kafka::GroupLagProbe>> probe =
      kafka::GroupLagProbe::Create(options_.bootstrap_servers, options_.kafka_properties,
                                   PurgeGroup(options_.group_id), options_.dead_letter_topic);
  if (!probe.ok()) return probe.status();
  absl::StatusOr<std::map<int32_t, int64_t>> marks = (*probe)->Committed(timeout);
  if (!marks.ok()) return marks.status();
  for (int p = 0; p < partitions; ++p) marks->emplace(p, -1);
  return marks;
}

absl::StatusOr<ListPage> DeadLetterTools::List(const ListQuery& query, absl::Time deadline) const {
  absl::StatusOr<std::optional<ListCursor>> cursor = CheckQuery(query);
  if (!cursor.ok()) return cursor.status();
  absl::StatusOr<std::vector<kafka::OffsetRange>> ranges =
      kafka::TopicOffsetRanges(options_.bootstrap_servers, options_.kafka_properties,
                               options_.dead_letter_topic, Until(deadline));
  if (!ranges.ok()) return ranges.status();
  const int partitions = static_cast<int>(ranges->size());
  absl::StatusOr<std::map<int32_t, int64_t>> marks = PurgeMarks(partitions, Until(deadline));
  if (!marks.ok()) return marks.status();
  absl::StatusOr<std::vector<int32_t>> chosen = FilterPartitions(query.filter, partitions);
  if (!chosen.ok()) return chosen.status();
  if (!cursor->has_value()) {
    cursor->emplace();
    for (int32_t p : *chosen) {
      (*cursor)->partitions[p] = {std::max((*ranges)[p].low, (*marks)[p]), (*ranges)[p].high};
    }
  }
  // What was purged or deleted since the last page is skipped.
  std::map<int32_t, kafka::OffsetRange> read;
  for (auto& [p, range] : (*cursor)->partitions) {
    if (p >= partitions) continue;
    range.next = std::min(range.end, std::max({range.next, (*ranges)[p].low, (*marks)[p]}));
    if (range.next < range.end) read[p] = {range.next, range.end};
  }
  ListPage page;
  page.topic = options_.dead_letter_topic;
  if (!read.empty()) {
    if (absl::Status s = ReadPage(options_, listed_bytes_, query, read, deadline, **cursor, page);
        !s.ok()) {
      return s;
    }
  }
  page.next_page_token = EncodePageToken(**cursor);
  return page;
}

}  // namespace retryd::dlq
