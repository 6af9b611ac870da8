// DeadLetterTools::Purge (dead_letter_tools.h).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/dlq/dead_letter_tools.h"
#include "server/dlq/tool_limits.h"
#include "server/kafka/group_tools.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::dlq {
namespace {

// The mark `request` asks for per partition, checked against `ranges`.
absl::StatusOr<std::map<int32_t, int64_t>> PurgeTargets(
    const PurgeRequest& request, const std::string& topic,
    const std::vector<kafka::OffsetRange>& ranges) {
  const int partitions = static_cast<int>(ranges.size());
  std::map<int32_t, int64_t> targets;
  if (request.all) {
    for (int p = 0; p < partitions; ++p) targets[p] = ranges[p].high;
  }
  for (const auto& [p, offset] : request.up_to) {
    if (p < 0 || p >= partitions) {
      return InvalidField(absl::StrCat("up_to: the dead-letter topic ", topic,
                                       " has partitions 0..", partitions - 1, ", not ", p));
    }
    if (offset < 0 || offset > ranges[p].high) {
      return InvalidField(absl::StrCat("up_to[", p, "]: must be in 0..", ranges[p].high,
                                       " (the partition's end), got ", offset));
    }
    targets[p] = offset;
  }
  return targets;
}

}  // namespace

absl::StatusOr<PurgeResult> DeadLetterTools::Purge(const PurgeRequest& request,
                                                   absl::Time deadline) const {
  if (request.all == !request.up_to.empty()) {
    return InvalidField("give either all (every partition up to its end) or up_to, not both");
  }
  absl::StatusOr<std::vector<kafka::OffsetRange>> ranges =
      kafka::TopicOffsetRanges(options_.bootstrap_servers, options_.kafka_properties,
                               options_.dead_letter_topic, Until(deadline));
  if (!ranges.ok()) return ranges.status();
  absl::StatusOr<std::map<int32_t, int64_t>> targets =
      PurgeTargets(request, options_.dead_letter_topic, *ranges);
  if (!targets.ok()) return targets.status();
  absl::StatusOr<std::map<int32_t, int64_t>> marks =
      PurgeMarks(static_cast<int>(ranges->size()), Until(deadline));
  if (!marks.ok()) return marks.status();
  PurgeResult result;
  result.topic = options_.dead_letter_topic;
  std::vector<kafka::CommittedOffset> moved;
  std::map<int32_t, int64_t> deletes;
  for (const auto& [p, target] : *targets) {
    const int64_t from = std::max((*ranges)[p].low, (*marks)[p]);
    const int64_t to = std::max(from, target);
    result.partitions.push_back({p, from, to, false});
    if (to > (*marks)[p]) moved.push_back({p, to, ""});
    if (request.delete_records && to > (*ranges)[p].low) deletes[p] = to;
  }
  if (request.delete_records && !deletes.empty()) {
    absl::StatusOr<std::unique_ptr<kafka::GroupAdmin>> admin =
        kafka::GroupAdmin::Create(options_.bootstrap_servers, options_.kafka_properties);
    if (!admin.ok()) return admin.status();
    if (absl::Status s = (*admin)->DeleteRecords(options_.dead_letter_topic, deletes,
                                                 Until(deadline, absl::Seconds(60)));
        !s.ok()) {
      return Prefixed(s, "no mark moved: ");
    }
    for (PartitionPurge& out : result.partitions) out.deleted = deletes.contains(out.partition);
  }
  if (!moved.empty()) {
    if (absl::Status s = kafka::CommitWithoutJoining(
            options_.bootstrap_servers, options_.kafka_properties, PurgeGroup(options_.group_id),
            options_.dead_letter_topic, moved, Until(deadline));
        !s.ok()) {
      return s;
    }
  }
  return result;
}

}  // namespace retryd::dlq
