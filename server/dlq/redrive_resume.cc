// DeadLetterTools::ResumeUnfinished (dead_letter_tools.h): redrives whose
// group has no member resume under their ids.
#include <optional>
#include <vector>

#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/dlq/dead_letter_tools.h"
#include "server/dlq/tool_limits.h"
#include "server/kafka/group_tools.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::dlq {

void DeadLetterTools::ResumeUnfinished() {
  absl::MutexLock lock(&start_mu_);
  if (resume_thread_.joinable() || stopping_->load()) return;
  resume_thread_ = std::thread([this] {
    SetThreadName("dlq-resume");
    SetThreadComponent("control");
    absl::StatusOr<std::unique_ptr<kafka::GroupAdmin>> admin =
        kafka::GroupAdmin::Create(options_.bootstrap_servers, options_.kafka_properties);
    if (!admin.ok()) return;
    while (!stopping_->load()) {
      absl::Status scanned = ScanForUnfinished(**admin);
      if (ReasonOf(scanned) == std::string(reason::kAdminApiUnavailable)) {
        LogInfo("dead-letter tools: redrives are not resumed here: ", scanned.message());
        return;
      }
      if (!scanned.ok()) {
        LogWarning("dead-letter tools: looking for unfinished redrives: ", scanned.ToString());
      }
      absl::MutexLock wait(&stop_mu_);
      stop_mu_.AwaitWithTimeout(
          absl::Condition(
              +[](std::atomic<bool>* stopping) { return stopping->load(); }, stopping_.get()),
          kResumeScanInterval);
    }
  });
}

absl::Status DeadLetterTools::ScanForUnfinished(const kafka::GroupAdmin& admin) {
  absl::StatusOr<std::vector<kafka::OffsetRange>> ranges =
      kafka::TopicOffsetRanges(options_.bootstrap_servers, options_.kafka_properties,
                               options_.dead_letter_topic, kScanTimeout);
  if (!ranges.ok()) return ranges.status();
  absl::StatusOr<std::vector<kafka::GroupListing>> groups =
      admin.ListGroups(RedriveGroupPrefix(options_.group_id), kScanTimeout);
  if (!groups.ok()) return groups.status();
  const int partitions = static_cast<int>(ranges->size());
  for (const kafka::GroupListing& group : *groups) {
    if (stopping_->load()) break;
    // A member runs it (here or on another retryd); a dead member's group
    // empties at its session timeout, and a later scan takes it.
    if (group.state != "Empty") continue;
    if (absl::Status s = ResumeGroup(admin, group.group, partitions); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DeadLetterTools::ResumeGroup(const kafka::GroupAdmin& admin, const std::string& group,
                                          int partitions) {
  const std::string id = group.substr(RedriveGroupPrefix(options_.group_id).size());
  // Started or resumed here already (its consumer may not have joined yet).
  if (operations_.Known(id)) return absl::OkStatus();
  absl::StatusOr<std::vector<kafka::CommittedOffset>> offsets =
      admin.GroupOffsets(group, options_.dead_letter_topic, partitions, kScanTimeout);
  if (!offsets.ok()) return offsets.status();
  std::optional<RedriveSpec> spec;
  std::map<int32_t, int64_t> starts;
  std::map<int32_t, int64_t> ends;
  std::map<int32_t, RedriveCheckpoint> carried;
  for (const kafka::CommittedOffset& o : *offsets) {
    std::optional<RedriveSpec> s = codec_.decode(o.metadata);
    if (o.offset < 0 || !s.has_value()) continue;
    spec = s;
    starts[o.partition] = o.offset;
    ends[o.partition] = s->end_offset;
    carried[o.partition] = s->checkpoint.value_or(RedriveCheckpoint());
  }
  if (!spec.has_value() || spec->dead_letter_topic != options_.dead_letter_topic ||
      spec->operation_id != id) {
    return absl::OkStatus();
  }
  absl::Status launched =
      Launch(*spec, starts, ends, carried, /*resumed=*/true, "resumed: its group had no member",
             [this](RedriveJob job) { return operations_.Launch(std::move(job)); });
  if (!launched.ok() && !absl::IsAlreadyExists(launched)) {
    LogWarning("dead-letter tools: cannot resume redrive ", id, ": ", launched.ToString());
  }
  return absl::OkStatus();
}

}  // namespace retryd::dlq
