#include "server/dlq/redrive_run.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/dlq/dead_letters.h"
#include "server/dlq/tool_limits.h"
#include "server/kafka/producer.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::dlq {

std::string Target(const RedriveSpec& spec) {
  return spec.request.target_topic.empty() ? "ORIGIN" : spec.request.target_topic;
}

RedriveRun::RedriveRun(const ToolsOptions& options, RedriveSpecCodec codec, RedriveSpec spec,
                       std::map<int32_t, int64_t> starts, std::map<int32_t, int64_t> ends,
                       const std::map<int32_t, RedriveCheckpoint>& carried, bool resumed,
                       std::string caller, std::shared_ptr<const std::atomic<bool>> stopping)
    : options_(options),
      codec_(std::move(codec)),
      spec_(std::move(spec)),
      starts_(std::move(starts)),
      ends_(std::move(ends)),
      resumed_(resumed),
      caller_(std::move(caller)),
      stopping_(std::move(stopping)),
      rate_(spec_.request.rate_per_s == 0 ? kDefaultRate : spec_.request.rate_per_s),
      max_redrives_(spec_.request.max_redrives == 0 ? kDefaultMaxRedrives
                                                    : spec_.request.max_redrives),
      group_(RedriveGroupPrefix(options_.group_id) + spec_.operation_id),
      pacer_(rate_, rate_ * absl::ToDoubleSeconds(kBurst)) {
  absl::Time committed = absl::InfiniteFuture();
  for (const auto& [p, end] : ends_) {
    const auto start = starts_.find(p);
    const int64_t left = std::max<int64_t>(0, end - (start == starts_.end() ? end : start->second));
    const auto c = carried.find(p);
    const RedriveCheckpoint before = c == carried.end() ? RedriveCheckpoint() : c->second;
    // The range is what was scanned before the resume and what is left.
    total_ += before.scanned + left;
    if (left > 0) {
      committed = std::min(committed, absl::FromUnixMillis(before.commit_time_unix_ms > 0
                                                               ? before.commit_time_unix_ms
                                                               : spec_.create_time_unix_ms));
    }
    counts_[p] = before;
  }
  look_back_from_ = committed - kClockSlack;
}

RedriveRun::~RedriveRun() = default;

void RedriveRun::Progress(RedriveOperationProgress& out) const {
  RedriveProgress& p = out.redrive;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [partition, c] : counts_) {
      p.scanned += c.scanned;
      p.matched += c.matched;
      p.redriven += c.redriven;
      p.skipped += c.skipped;
      p.sent_twice += c.sent_twice;
    }
    p.rate_per_s = RateLocked(absl::Now());
  }
  p.total = total_;
  p.dry_run = spec_.request.dry_run;
  p.resumed = resumed_;
  const int64_t left = std::max<int64_t>(0, total_ - p.scanned);
  if (spec_.request.dry_run) {
    p.eta_ms = -1;
  } else {
    // What is left to scan, at the share that matched so far, at the set rate.
    const double share =
        p.scanned == 0 ? 1.0 : static_cast<double>(p.matched) / static_cast<double>(p.scanned);
    p.eta_ms = static_cast<int64_t>(static_cast<double>(left) * share * 1000.0 / rate_);
  }
  out.done = p.scanned;
  out.total = total_;
  out.unit = "records";
  out.description =
      absl::StrCat(spec_.request.dry_run ? "dry run: " : "", p.scanned, " of ", total_,
                   " dead letters scanned, ", p.matched, " matched, ", p.redriven,
                   spec_.request.dry_run ? " would be redriven, " : " redriven, ", p.skipped,
                   " skipped by the loop guard",
                   resumed_ ? absl::StrCat(", ", p.sent_twice, " sent twice") : "");
}

absl::Status RedriveRun::Run(engine::Cancellation& cancel, RedriveResult& result) {
  started_ = absl::Now();
  absl::Status status = spec_.request.dry_run ? RunDry(cancel) : RunLive(cancel);
  if (status.ok() && cancel.cancelled()) status = Stopped();
  Fill(result);
  RedriveOperationProgress progress;
  Progress(progress);
  LogInfo("control: redrive ", spec_.operation_id, " of ", spec_.dead_letter_topic, " (", caller_,
          ", filter ", codec_.describe_filter(spec_.request.filter), ", target ", Target(spec_),
          ") ended ", status.ok() ? "SUCCEEDED" : status.ToString(), ": ", progress.description);
  return status;
}

absl::Status RedriveRun::Stopped() const {
  if (stopping_->load()) {
    return absl::CancelledError(absl::StrCat(
        "retryd is stopping: the redrive stopped where it was and resumes at the next start "
        "(its group ",
        group_, " is kept)"));
  }
  return absl::CancelledError("cancelled: the records redriven so far stay redriven");
}

double RedriveRun::RateLocked(absl::Time now) const {
  if (samples_.empty()) return 0;
  const auto& [t0, n0] = samples_.front();
  const double seconds = absl::ToDoubleSeconds(now - t0);
  if (seconds < 0.5) return 0;
  return static_cast<double>(RedrivenLocked() - n0) / seconds;
}

int64_t RedriveRun::RedrivenLocked() const {
  int64_t n = 0;
  for (const auto& [partition, c] : counts_) n += c.redriven;
  return n;
}

void RedriveRun::Sample(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (!samples_.empty() && now - samples_.back().first < absl::Milliseconds(500)) return;
  samples_.emplace_back(now, RedrivenLocked());
  while (samples_.size() > 1 && now - samples_.front().first > absl::Seconds(10)) {
    samples_.pop_front();
  }
}

void RedriveRun::Fill(RedriveResult& result) {
  RedriveOperationProgress p;
  Progress(p);
  result.progress = p.redrive;
  result.target = Target(spec_);
  if (!spec_.request.dry_run) result.group = group_;
  absl::MutexLock lock(&mu_);
  for (const auto& [partition, counts] : counts_) {
    if (counts.matched == 0) continue;
    result.by_partition.push_back({absl::StrCat(partition), counts.matched, counts.skipped});
  }
  for (const auto& [reason, counts] : by_reason_) {
    result.by_reason.push_back({reason, counts.first, counts.second});
  }
}

bool RedriveRun::Count(const DeadLetter& dead) {
  const bool undecodable = !dead.decode_error.empty() && spec_.request.target_topic.empty();
  const bool skip = undecodable || dead.redrive_count >= static_cast<int32_t>(max_redrives_);
  if (skip) {
    int64_t held_back = 0;
    if (skip_log_.Allow(absl::Now(), &held_back)) {
      LogWarning("redrive ", spec_.operation_id, ": skipped ", spec_.dead_letter_topic, "/",
                 dead.partition, "@", dead.offset, ": ",
                 undecodable ? absl::StrCat("no origin to send it to (", dead.decode_error, ")")
                             : absl::StrCat("redriven ", dead.redrive_count,
                                            " times already (max_redrives ", max_redrives_, ")"),
                 LogThrottle::HeldBackNote(held_back));
    }
  }
  absl::MutexLock lock(&mu_);
  RedriveCheckpoint& part = counts_[dead.partition];
  auto& why = by_reason_[dead.error_reason];
  ++part.matched;
  ++why.first;
  if (skip) {
    ++part.skipped;
    ++why.second;
  }
  return skip;
}

absl::Status RedriveRun::RunDry(engine::Cancellation& cancel) {
  std::map<int32_t, kafka::OffsetRange> ranges;
  for (const auto& [p, end] : ends_) ranges[p] = {starts_.at(p), end};
  absl::StatusOr<std::unique_ptr<kafka::PartitionReader>> reader = kafka::PartitionReader::Open(
      options_.bootstrap_servers, options_.kafka_properties, spec_.dead_letter_topic, ranges);
  if (!reader.ok()) return reader.status();
  while (!cancel.cancelled()) {
    absl::StatusOr<std::optional<Record>> next =
        (*reader)->Next(absl::Now() + absl::Milliseconds(200));
    if (absl::IsDeadlineExceeded(next.status())) continue;
    if (!next.ok()) return next.status();
    if (!next->has_value()) return absl::OkStatus();
    CountScanned((*next)->partition);
    const DeadLetter dead = DecodeDeadLetter(**next, 0);
    if (!Matches(spec_.request.filter, dead)) continue;
    if (!Count(dead)) CountRedriven((*next)->partition, 0);
    Sample(absl::Now());
  }
  return absl::OkStatus();
}

std::string RedriveRun::Metadata(int32_t partition) const {
  RedriveSpec spec = spec_;
  spec.end_offset = ends_.at(partition);
  {
    absl::MutexLock lock(&mu_);
    if (auto c = counts_.find(partition); c != counts_.end()) spec.checkpoint = c->second;
  }
  if (!spec.checkpoint.has_value()) spec.checkpoint.emplace();
  spec.checkpoint->commit_time_unix_ms = absl::ToUnixMillis(absl::Now());
  return codec_.encode(spec);
}

void RedriveRun::CountScanned(int32_t partition) {
  absl::MutexLock lock(&mu_);
  ++counts_[partition].scanned;
}

bool RedriveRun::AwaitSend(engine::Cancellation& cancel) {
  absl::MutexLock lock(&pace_mu_);
  while (!cancel.cancelled()) {
    const absl::Time now = absl::Now();
    const absl::Time at = pacer_.NextSend(now);
    if (at <= now) {
      pacer_.Sent(now);
      return true;
    }
    // Until then, or until an acknowledgement gives a token back.
    const int64_t seen = acknowledged_;
    auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pace_mu_) {
      return cancel.cancelled() || acknowledged_ != seen;
    };
    pace_mu_.AwaitWithDeadline(absl::Condition(&woken), at);
  }
  return false;
}

void RedriveRun::Delivered(int32_t partition, int64_t again, const absl::Status& status) {
  {
    absl::MutexLock lock(&pace_mu_);
    pacer_.Acknowledged(absl::Now());
    ++acknowledged_;
  }
  if (status.ok()) CountRedriven(partition, again);
}

void RedriveRun::CountRedriven(int32_t partition, int64_t again) {
  absl::MutexLock lock(&mu_);
  RedriveCheckpoint& part = counts_[partition];
  ++part.redriven;
  part.sent_twice += again;
}

bool RedriveRun::InRange(int32_t partition, int64_t offset) const {
  const auto start = starts_.find(partition);
  const auto end = ends_.find(partition);
  return start != starts_.end() && end != ends_.end() && offset >= start->second &&
         offset < end->second;
}

void RedriveRun::FirstTo(const std::string& topic, kafka::Producer& producer) {
  if (absl::Status s = producer.PrepareTopics({topic}, kKafkaTimeout); !s.ok()) {
    LogWarning("redrive ", spec_.operation_id, ": metadata of ", topic, ": ", s.ToString());
  }
  if (!resumed_) return;
  size_t found = 0;
  auto note = [&](const Record& record) {
    const std::optional<std::pair<int32_t, int64_t>> origin =
        RedrivenFrom(record, spec_.dead_letter_topic);
    if (origin.has_value() && InRange(origin->first, origin->second)) {
      ++sent_before_[*origin];
      ++found;
    }
  };
  absl::StatusOr<std::map<int32_t, int64_t>> from = kafka::TopicOffsetsSince(
      options_.bootstrap_servers, options_.kafka_properties, topic, look_back_from_, kKafkaTimeout);
  const absl::Status read =
      from.ok() ? kafka::ScanTopic(options_.bootstrap_servers, options_.kafka_properties, topic,
                                   *from, kLookBackTimeout, note)
                : from.status();
  if (!read.ok()) {
    LogWarning("redrive ", spec_.operation_id, ": cannot tell what ", topic,
               " holds from before the resume (sent_twice counts none of it): ", read.ToString());
    return;
  }
  LogInfo("redrive ", spec_.operation_id, ": ", topic, " holds ", found,
          " records sent after the last commit, before the resume: they are sent again");
}

}  // namespace retryd::dlq
