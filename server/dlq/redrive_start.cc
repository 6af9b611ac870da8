// DeadLetterTools::StartRedrive and the launch of a redrive's run
// (dead_letter_tools.h).
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/dlq/dead_letter_tools.h"
#include "server/dlq/dead_letters.h"
#include "server/dlq/redrive_run.h"
#include "server/dlq/tool_limits.h"
#include "server/kafka/group_tools.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::dlq {

struct DeadLetterTools::Planned {
  RedriveSpec spec;
  std::map<int32_t, int64_t> starts;
  std::map<int32_t, int64_t> ends;
  int partitions = 0;
};

DeadLetterTools::DeadLetterTools(ToolsOptions options, RedriveSpecCodec codec,
                                 ListedBytes listed_bytes, RedriveOperations& operations)
    : options_(std::move(options)),
      codec_(std::move(codec)),
      listed_bytes_(std::move(listed_bytes)),
      operations_(operations) {}

DeadLetterTools::~DeadLetterTools() { Shutdown(); }

void DeadLetterTools::BeginShutdown() {
  stopping_->store(true);
  absl::MutexLock wake(&stop_mu_);  // The resume thread's wait looks again.
}

void DeadLetterTools::Shutdown() {
  BeginShutdown();
  std::thread resume;
  {
    absl::MutexLock lock(&start_mu_);
    resume.swap(resume_thread_);
  }
  if (resume.joinable()) resume.join();
}

absl::Status DeadLetterTools::CheckNoRedrive(int partitions, absl::Duration timeout) const {
  absl::StatusOr<std::unique_ptr<kafka::GroupAdmin>> admin =
      kafka::GroupAdmin::Create(options_.bootstrap_servers, options_.kafka_properties);
  if (!admin.ok()) return admin.status();
  absl::StatusOr<std::vector<kafka::GroupListing>> groups =
      (*admin)->ListGroups(RedriveGroupPrefix(options_.group_id), timeout);
  if (!groups.ok()) {
    return Prefixed(groups.status(),
                    "a redrive needs the Admin API, to tell whether another "
                    "one runs: ");
  }
  for (const kafka::GroupListing& group : *groups) {
    if (group.state == "Dead") continue;
    absl::StatusOr<std::vector<kafka::CommittedOffset>> offsets =
        (*admin)->GroupOffsets(group.group, options_.dead_letter_topic, partitions, timeout);
    if (!offsets.ok()) return offsets.status();
    for (const kafka::CommittedOffset& o : *offsets) {
      std::optional<RedriveSpec> spec = codec_.decode(o.metadata);
      if (o.offset < 0 || !spec.has_value() ||
          spec->dead_letter_topic != options_.dead_letter_topic) {
        continue;
      }
      return WithReason(
          absl::FailedPreconditionError(absl::StrCat(
              "redrive ", spec->operation_id, " of ", options_.dead_letter_topic, " (group ",
              group.group, ", started by ", spec->started_by, ") ",
              group.state == "Empty" ? "is unfinished and resumes when its retryd starts"
                                     : "is running",
              "; one redrive per dead-letter topic at a time: wait for it, or cancel it on the "
              "retryd that runs it")),
          reason::kRedriveRunning);
    }
  }
  return absl::OkStatus();
}

absl::Status DeadLetterTools::CheckRedriveRequest(const RedriveRequest& request) const {
  if (absl::Status s = ValidateFilter(request.filter); !s.ok()) return s;
  if (request.rate_per_s > kMaxRate) {
    return InvalidField(absl::StrCat("rate_per_s: must be at most ", kMaxRate, ", got ",
                                     request.rate_per_s, "; 0 means ", kDefaultRate));
  }
  if (request.max_redrives > 1000) {
    return InvalidField(absl::StrCat("max_redrives: must be at most 1000, got ",
                                     request.max_redrives, "; 0 means ", kDefaultMaxRedrives));
  }
  if (request.target_topic == options_.dead_letter_topic) {
    return InvalidField("target_topic: the dead-letter topic itself; redrive to another topic");
  }
  if (stopping_->load()) return absl::UnavailableError("retryd is stopping");
  return absl::OkStatus();
}

absl::StatusOr<DeadLetterTools::Planned> DeadLetterTools::PlanRedrive(const RedriveRequest& request,
                                                                      absl::Time deadline) const {
  absl::StatusOr<std::vector<kafka::OffsetRange>> ranges =
      kafka::TopicOffsetRanges(options_.bootstrap_servers, options_.kafka_properties,
                               options_.dead_letter_topic, Until(deadline));
  if (!ranges.ok()) return ranges.status();
  Planned plan;
  plan.partitions = static_cast<int>(ranges->size());
  if (!request.target_topic.empty()) {
    if (absl::Status s =
            kafka::CheckTopicsExist(options_.bootstrap_servers, options_.kafka_properties,
                                    {request.target_topic}, Until(deadline));
        !s.ok()) {
      return Prefixed(s, "target_topic: ");
    }
  }
  absl::StatusOr<std::vector<int32_t>> chosen = FilterPartitions(request.filter, plan.partitions);
  if (!chosen.ok()) return chosen.status();
  absl::StatusOr<std::map<int32_t, int64_t>> marks = PurgeMarks(plan.partitions, Until(deadline));
  if (!marks.ok()) return marks.status();
  plan.spec.operation_id = operations_.NewId();
  plan.spec.dead_letter_topic = options_.dead_letter_topic;
  plan.spec.request = request;
  plan.spec.request.request_id.clear();
  plan.spec.create_time_unix_ms = absl::ToUnixMillis(absl::Now());
  plan.spec.started_by = options_.instance_name;
  for (int p = 0; p < plan.partitions; ++p) {
    plan.ends[p] = (*ranges)[p].high;
    const bool read = std::find(chosen->begin(), chosen->end(), p) != chosen->end();
    plan.starts[p] =
        read ? std::min(plan.ends[p], std::max((*ranges)[p].low, (*marks)[p])) : plan.ends[p];
  }
  RedriveSpec widest = plan.spec;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  widest.end_offset = kMax;
  widest.checkpoint = RedriveCheckpoint{kMax, kMax, kMax, kMax, kMax, kMax};
  if (const size_t size = codec_.encode(widest).size(); size > kMaxSpecBytes) {
    return InvalidField(absl::StrCat("filter: the redrive's spec takes ", size,
                                     " bytes as commit metadata, more than ", kMaxSpecBytes,
                                     "; use a shorter filter"));
  }
  return plan;
}

absl::Status DeadLetterTools::WriteGroup(const Planned& plan, absl::Time deadline) const {
  std::vector<kafka::CommittedOffset> initial;
  for (const auto& [p, start] : plan.starts) {
    RedriveSpec with_end = plan.spec;
    with_end.end_offset = plan.ends.at(p);
    initial.push_back({p, start, codec_.encode(with_end)});
  }
  return kafka::CommitWithoutJoining(options_.bootstrap_servers, options_.kafka_properties,
                                     RedriveGroupPrefix(options_.group_id) + plan.spec.operation_id,
                                     options_.dead_letter_topic, initial, Until(deadline));
}

absl::Status DeadLetterTools::StartRedrive(const RedriveRequest& request, const std::string& caller,
                                           absl::Time deadline,
                                           absl::FunctionRef<absl::Status(RedriveJob)> launch) {
  if (absl::Status s = CheckRedriveRequest(request); !s.ok()) return s;
  absl::StatusOr<Planned> plan = PlanRedrive(request, deadline);
  if (!plan.ok()) return plan.status();
  const RedriveSpec& spec = plan->spec;
  if (request.dry_run) {
    return Launch(spec, plan->starts, plan->ends, {}, /*resumed=*/false, caller, launch);
  }
  // One start at a time on this retryd, without holding a lock across the
  // Kafka calls: a second call meanwhile is refused as it would be once the
  // first one's group exists.
  {
    absl::MutexLock lock(&start_mu_);
    if (starting_) {
      return WithReason(absl::FailedPreconditionError(
                            "another redrive is being started on this retryd; one redrive per "
                            "dead-letter topic at a time"),
                        reason::kRedriveRunning);
    }
    starting_ = true;
  }
  absl::Cleanup started = [this] {
    absl::MutexLock lock(&start_mu_);
    starting_ = false;
  };
  if (absl::Status s = CheckNoRedrive(plan->partitions, Until(deadline)); !s.ok()) return s;
  if (absl::Status s = WriteGroup(*plan, deadline); !s.ok()) return s;
  return Launch(spec, plan->starts, plan->ends, {}, /*resumed=*/false, caller, launch);
}

absl::Status DeadLetterTools::Launch(const RedriveSpec& spec,
                                     const std::map<int32_t, int64_t>& starts,
                                     const std::map<int32_t, int64_t>& ends,
                                     const std::map<int32_t, RedriveCheckpoint>& carried,
                                     bool resumed, const std::string& caller,
                                     absl::FunctionRef<absl::Status(RedriveJob)> launch) {
  auto run = std::make_shared<RedriveRun>(options_, codec_, spec, starts, ends, carried, resumed,
                                          caller, stopping_);
  LogInfo("control: redrive ", spec.operation_id, " of ", spec.dead_letter_topic,
          resumed ? " resumed" : " started", " (", caller, ", filter ",
          codec_.describe_filter(spec.request.filter), ", target ", Target(spec), ", rate ",
          spec.request.rate_per_s == 0 ? kDefaultRate : spec.request.rate_per_s, "/s",
          spec.request.reset_attempts ? ", reset_attempts" : "",
          spec.request.dry_run ? ", dry run" : "", ")");
  RedriveJob job;
  job.id = spec.operation_id;
  job.request_id = spec.request.request_id;  // Cleared in the spec, as it always was.
  job.progress = [run](RedriveOperationProgress& progress) { run->Progress(progress); };
  job.work = [run](engine::Cancellation& cancel, RedriveResult& result) {
    return run->Run(cancel, result);
  };
  return launch(std::move(job));
}

}  // namespace retryd::dlq
