#include "server/control/dead_letter_tools.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/common/log_throttle.h"
#include "server/common/logging.h"
#include "server/control/redrive_pacer.h"
#include "server/dlq/dead_letters.h"
#include "server/kafka/group_tools.h"
#include "server/kafka/producer.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::control {
namespace {

// Bounds of one ListDeadLetters page.
constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
constexpr size_t kMaxPageBytes = 4 << 20;
constexpr int64_t kMaxScannedPerPage = 100'000;
// StartRedriveRequest bounds.
constexpr uint32_t kDefaultRate = 100;
constexpr uint32_t kMaxRate = 100'000;
constexpr uint32_t kDefaultMaxRedrives = 3;
// The broker's offset.metadata.max.bytes default.
constexpr size_t kMaxSpecBytes = 4096;
// Each Kafka round trip of a tool call, at most.
constexpr absl::Duration kKafkaTimeout = absl::Seconds(10);
// Each Kafka call of a look for unfinished redrives, at most: the most it
// holds up a shutdown, which waits for the look in progress.
constexpr absl::Duration kScanTimeout = absl::Seconds(3);
// How often unfinished redrives are looked for.
constexpr absl::Duration kResumeScanInterval = absl::Seconds(10);
// A redrive's burst: it may send this much of its rate's worth at once,
// after a pause (a commit's flush), beyond its rate in any window.
constexpr absl::Duration kBurst = absl::Milliseconds(250);
// A resumed redrive looks in its targets for what was sent after its last
// commit from this long before that commit: the clocks of the retryd that
// committed and of the brokers that stamped the records may differ.
constexpr absl::Duration kClockSlack = absl::Minutes(1);
// Reading a target for what was sent before a resume, at most.
constexpr absl::Duration kLookBackTimeout = absl::Seconds(60);
// A redrive's flush when it ends or commits.
constexpr absl::Duration kFlushTimeout = absl::Seconds(30);

absl::Status InvalidField(const std::string& message) {
  return WithReason(absl::InvalidArgumentError(message), reason::kInvalidField);
}

// `status` with `prefix` before its message, its reason kept.
absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  absl::Status out(status.code(), absl::StrCat(prefix, status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Duration Until(absl::Time deadline, absl::Duration cap = kKafkaTimeout) {
  return std::clamp(deadline - absl::Now(), absl::Milliseconds(1), cap);
}

std::string SpecJson(const v1::RedriveSpec& spec) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &out, options);
  return out;
}

std::optional<v1::RedriveSpec> ParseSpec(const std::string& json) {
  v1::RedriveSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(json, &spec, options).ok()) return std::nullopt;
  if (spec.operation_id().empty() || spec.dead_letter_topic().empty()) return std::nullopt;
  return spec;
}

std::string DescribeFilter(const v1::DeadLetterFilter& filter) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(filter, &out, options);
  return out;
}

std::string Target(const v1::RedriveSpec& spec) {
  return spec.request().target_topic().empty() ? "ORIGIN" : spec.request().target_topic();
}

// One redrive's run and counts, shared by its operation's thread and
// whoever reads its progress.
class RedriveRun {
 public:
  // `carried`: per partition, the counts of its last commit (a resumed
  // redrive's; empty for a new one).
  RedriveRun(const DeadLetterToolsOptions& options, v1::RedriveSpec spec,
             std::map<int32_t, int64_t> starts, std::map<int32_t, int64_t> ends,
             const std::map<int32_t, v1::RedriveCheckpoint>& carried, bool resumed,
             std::string caller, std::shared_ptr<const std::atomic<bool>> stopping)
      : options_(options),
        spec_(std::move(spec)),
        starts_(std::move(starts)),
        ends_(std::move(ends)),
        resumed_(resumed),
        caller_(std::move(caller)),
        stopping_(std::move(stopping)),
        rate_(spec_.request().rate_per_s() == 0 ? kDefaultRate : spec_.request().rate_per_s()),
        max_redrives_(spec_.request().max_redrives() == 0 ? kDefaultMaxRedrives
                                                          : spec_.request().max_redrives()),
        group_(RedriveGroupPrefix(options_.group_id) + spec_.operation_id()),
        pacer_(rate_, rate_ * absl::ToDoubleSeconds(kBurst)) {
    absl::Time committed = absl::InfiniteFuture();
    for (const auto& [p, end] : ends_) {
      const auto start = starts_.find(p);
      const int64_t left =
          std::max<int64_t>(0, end - (start == starts_.end() ? end : start->second));
      const auto c = carried.find(p);
      const v1::RedriveCheckpoint before = c == carried.end() ? v1::RedriveCheckpoint() : c->second;
      // The range is what was scanned before the resume and what is left.
      total_ += before.scanned() + left;
      if (left > 0) {
        committed = std::min(committed, absl::FromUnixMillis(before.commit_time_unix_ms() > 0
                                                                 ? before.commit_time_unix_ms()
                                                                 : spec_.create_time_unix_ms()));
      }
      counts_[p] = before;
    }
    look_back_from_ = committed - kClockSlack;
  }

  void Progress(v1::OperationProgress& out) const ABSL_LOCKS_EXCLUDED(mu_) {
    v1::RedriveProgress* p = out.mutable_redrive();
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [partition, c] : counts_) {
        p->set_scanned(p->scanned() + c.scanned());
        p->set_matched(p->matched() + c.matched());
        p->set_redriven(p->redriven() + c.redriven());
        p->set_skipped(p->skipped() + c.skipped());
        p->set_sent_twice(p->sent_twice() + c.sent_twice());
      }
      p->set_rate_per_s(RateLocked(absl::Now()));
    }
    p->set_total(total_);
    p->set_dry_run(spec_.request().dry_run());
    p->set_resumed(resumed_);
    const int64_t left = std::max<int64_t>(0, total_ - p->scanned());
    if (spec_.request().dry_run()) {
      p->set_eta_ms(-1);
    } else {
      // What is left to scan, at the share that matched so far, at the set rate.
      const double share =
          p->scanned() == 0 ? 1.0
                            : static_cast<double>(p->matched()) / static_cast<double>(p->scanned());
      p->set_eta_ms(static_cast<int64_t>(static_cast<double>(left) * share * 1000.0 / rate_));
    }
    out.set_done(p->scanned());
    out.set_total(total_);
    out.set_unit("records");
    out.set_description(
        absl::StrCat(spec_.request().dry_run() ? "dry run: " : "", p->scanned(), " of ", total_,
                     " dead letters scanned, ", p->matched(), " matched, ", p->redriven(),
                     spec_.request().dry_run() ? " would be redriven, " : " redriven, ",
                     p->skipped(), " skipped by the loop guard",
                     resumed_ ? absl::StrCat(", ", p->sent_twice(), " sent twice") : ""));
  }

  absl::Status Run(engine::Cancellation& cancel, v1::Operation& result) {
    started_ = absl::Now();
    absl::Status status = spec_.request().dry_run() ? RunDry(cancel) : RunLive(cancel);
    if (status.ok() && cancel.cancelled()) status = Stopped();
    Fill(result);
    const v1::OperationProgress progress = [&] {
      v1::OperationProgress p;
      Progress(p);
      return p;
    }();
    LogInfo("control: redrive ", spec_.operation_id(), " of ", spec_.dead_letter_topic(), " (",
            caller_, ", filter ", DescribeFilter(spec_.request().filter()), ", target ",
            Target(spec_), ") ended ", status.ok() ? "SUCCEEDED" : status.ToString(), ": ",
            progress.description());
    return status;
  }

 private:
  absl::Status Stopped() const {
    if (stopping_->load()) {
      return absl::CancelledError(absl::StrCat(
          "retryd is stopping: the redrive stopped where it was and resumes at the next start "
          "(its group ",
          group_, " is kept)"));
    }
    return absl::CancelledError("cancelled: the records redriven so far stay redriven");
  }

  double RateLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (samples_.empty()) return 0;
    const auto& [t0, n0] = samples_.front();
    const double seconds = absl::ToDoubleSeconds(now - t0);
    if (seconds < 0.5) return 0;
    return static_cast<double>(RedrivenLocked() - n0) / seconds;
  }

  int64_t RedrivenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t n = 0;
    for (const auto& [partition, c] : counts_) n += c.redriven();
    return n;
  }

  void Sample(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!samples_.empty() && now - samples_.back().first < absl::Milliseconds(500)) return;
    samples_.emplace_back(now, RedrivenLocked());
    while (samples_.size() > 1 && now - samples_.front().first > absl::Seconds(10)) {
      samples_.pop_front();
    }
  }

  void Fill(v1::Operation& result) ABSL_LOCKS_EXCLUDED(mu_) {
    v1::RedriveResult* r = result.mutable_redrive();
    v1::OperationProgress p;
    Progress(p);
    *r->mutable_progress() = p.redrive();
    r->set_target(Target(spec_));
    if (!spec_.request().dry_run()) r->set_group(group_);
    absl::MutexLock lock(&mu_);
    for (const auto& [partition, counts] : counts_) {
      if (counts.matched() == 0) continue;
      v1::RedriveCount* c = r->add_by_partition();
      c->set_key(absl::StrCat(partition));
      c->set_matched(counts.matched());
      c->set_skipped(counts.skipped());
    }
    for (const auto& [reason, counts] : by_reason_) {
      v1::RedriveCount* c = r->add_by_reason();
      c->set_key(reason);
      c->set_matched(counts.first);
      c->set_skipped(counts.second);
    }
  }

  // Counts a matching record; returns whether the loop guard skips it.
  bool Count(const v1::DeadLetter& dead) ABSL_LOCKS_EXCLUDED(mu_) {
    const bool undecodable = !dead.decode_error().empty() && spec_.request().target_topic().empty();
    const bool skip = undecodable || dead.redrive_count() >= static_cast<int32_t>(max_redrives_);
    if (skip) {
      int64_t held_back = 0;
      if (skip_log_.Allow(absl::Now(), &held_back)) {
        LogWarning("redrive ", spec_.operation_id(), ": skipped ", spec_.dead_letter_topic(), "/",
                   dead.partition(), "@", dead.offset(), ": ",
                   undecodable ? absl::StrCat("no origin to send it to (", dead.decode_error(), ")")
                               : absl::StrCat("redriven ", dead.redrive_count(),
                                              " times already (max_redrives ", max_redrives_, ")"),
                   LogThrottle::HeldBackNote(held_back));
      }
    }
    absl::MutexLock lock(&mu_);
    v1::RedriveCheckpoint& part = counts_[dead.partition()];
    auto& why = by_reason_[dead.error_reason()];
    part.set_matched(part.matched() + 1);
    ++why.first;
    if (skip) {
      part.set_skipped(part.skipped() + 1);
      ++why.second;
    }
    return skip;
  }

  absl::Status RunDry(engine::Cancellation& cancel) {
    std::map<int32_t, kafka::OffsetRange> ranges;
    for (const auto& [p, end] : ends_) ranges[p] = {starts_.at(p), end};
    absl::StatusOr<std::unique_ptr<kafka::PartitionReader>> reader = kafka::PartitionReader::Open(
        options_.bootstrap_servers, options_.kafka_properties, spec_.dead_letter_topic(), ranges);
    if (!reader.ok()) return reader.status();
    while (!cancel.cancelled()) {
      absl::StatusOr<std::optional<Record>> next =
          (*reader)->Next(absl::Now() + absl::Milliseconds(200));
      if (absl::IsDeadlineExceeded(next.status())) continue;
      if (!next.ok()) return next.status();
      if (!next->has_value()) return absl::OkStatus();
      CountScanned((*next)->partition);
      const v1::DeadLetter dead = dlq::DecodeDeadLetter(**next, 0);
      if (!dlq::Matches(spec_.request().filter(), dead)) continue;
      if (!Count(dead)) CountRedriven((*next)->partition, 0);
      Sample(absl::Now());
    }
    return absl::OkStatus();
  }

  // The commit metadata of `partition`: the spec, its end and its counts.
  std::string Metadata(int32_t partition) const ABSL_LOCKS_EXCLUDED(mu_) {
    v1::RedriveSpec spec = spec_;
    spec.set_end_offset(ends_.at(partition));
    {
      absl::MutexLock lock(&mu_);
      if (auto c = counts_.find(partition); c != counts_.end()) {
        *spec.mutable_checkpoint() = c->second;
      }
    }
    spec.mutable_checkpoint()->set_commit_time_unix_ms(absl::ToUnixMillis(absl::Now()));
    return SpecJson(spec);
  }

  void CountScanned(int32_t partition) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    v1::RedriveCheckpoint& part = counts_[partition];
    part.set_scanned(part.scanned() + 1);
  }

  // Waits until the pacer lets a record go and takes its token; false if
  // cancelled first.
  bool AwaitSend(engine::Cancellation& cancel) ABSL_LOCKS_EXCLUDED(pace_mu_) {
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

  // A delivery report of a record of dead-letter partition `partition`;
  // `again`: how many copies of it the target held from before the resume.
  void Delivered(int32_t partition, int64_t again, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(pace_mu_, mu_) {
    {
      absl::MutexLock lock(&pace_mu_);
      pacer_.Acknowledged(absl::Now());
      ++acknowledged_;
    }
    if (status.ok()) CountRedriven(partition, again);
  }

  // A record of dead-letter partition `partition` redriven (in a dry run:
  // that would be), sent `again` times before a resume.
  void CountRedriven(int32_t partition, int64_t again) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    v1::RedriveCheckpoint& part = counts_[partition];
    part.set_redriven(part.redriven() + 1);
    part.set_sent_twice(part.sent_twice() + again);
  }

  // Whether dead letter `partition`@`offset` is in this redrive's range.
  bool InRange(int32_t partition, int64_t offset) const {
    const auto start = starts_.find(partition);
    const auto end = ends_.find(partition);
    return start != starts_.end() && end != ends_.end() && offset >= start->second &&
           offset < end->second;
  }

  // Readies `producer` for the first record to `topic`: fetches its
  // metadata, so that the record does not wait for it in the producer; in a
  // resumed redrive, looks there for the records sent after the last commit.
  void FirstTo(const std::string& topic, kafka::Producer& producer) {
    if (absl::Status s = producer.PrepareTopics({topic}, kKafkaTimeout); !s.ok()) {
      LogWarning("redrive ", spec_.operation_id(), ": metadata of ", topic, ": ", s.ToString());
    }
    if (!resumed_) return;
    size_t found = 0;
    auto note = [&](const Record& record) {
      const std::optional<std::pair<int32_t, int64_t>> origin =
          dlq::RedrivenFrom(record, spec_.dead_letter_topic());
      if (origin.has_value() && InRange(origin->first, origin->second)) {
        ++sent_before_[*origin];
        ++found;
      }
    };
    absl::StatusOr<std::map<int32_t, int64_t>> from =
        kafka::TopicOffsetsSince(options_.bootstrap_servers, options_.kafka_properties, topic,
                                 look_back_from_, kKafkaTimeout);
    const absl::Status read =
        from.ok() ? kafka::ScanTopic(options_.bootstrap_servers, options_.kafka_properties, topic,
                                     *from, kLookBackTimeout, note)
                  : from.status();
    if (!read.ok()) {
      LogWarning("redrive ", spec_.operation_id(), ": cannot tell what ", topic,
                 " holds from before the resume (sent_twice counts none of it): ", read.ToString());
      return;
    }
    LogInfo("redrive ", spec_.operation_id(), ": ", topic, " holds ", found,
            " records sent after the last commit, before the resume: they are sent again");
  }

  absl::Status RunLive(engine::Cancellation& cancel) {
    engine::Cancellation::Subscription wake = cancel.OnCancel([this] {
      absl::MutexLock lock(&pace_mu_);  // Wakes AwaitSend to look again.
    });
    kafka::ProducerOptions producer_options;
    producer_options.bootstrap_servers = options_.bootstrap_servers;
    producer_options.properties = options_.kafka_properties;
    producer_options.client_id = "retryd-redrive";
    absl::StatusOr<std::unique_ptr<kafka::Producer>> producer =
        kafka::Producer::Create(producer_options);
    if (!producer.ok()) return producer.status();
    absl::StatusOr<std::unique_ptr<kafka::GroupConsumer>> consumer =
        kafka::GroupConsumer::Create(options_.bootstrap_servers, options_.kafka_properties, group_,
                                     spec_.dead_letter_topic(), "retryd-redrive");
    if (!consumer.ok()) return consumer.status();

    std::map<int32_t, int64_t>
        positions;  // Next offset, for partitions read since the last commit.
    std::map<int32_t, bool> done;
    absl::Mutex error_mu;
    absl::Status produce_error;     // The first delivery failure.
    std::set<std::string> targets;  // Those a record was sent to.
    absl::Time last_commit = absl::Now();
    bool assigned = false;
    bool finished = false;
    int ended = 0;  // Partitions done; ended_seen of them looked at.
    int ended_seen = 0;
    absl::Time last_look = absl::InfinitePast();

    auto commit = [&]() -> absl::Status {
      if (absl::Status s = (*producer)->Flush(kFlushTimeout); !s.ok()) return s;
      {
        absl::MutexLock lock(&error_mu);
        if (!produce_error.ok()) return produce_error;
      }
      // Each partition's counts go with its position: all of its records
      // before it are counted, and, flushed, acknowledged.
      std::vector<kafka::CommittedOffset> offsets;
      for (const auto& [p, next] : positions) offsets.push_back({p, next, Metadata(p)});
      if (absl::Status s = (*consumer)->Commit(offsets); !s.ok()) return s;
      positions.clear();
      last_commit = absl::Now();
      return absl::OkStatus();
    };
    auto end_partition = [&](int32_t p) {
      auto end = ends_.find(p);
      const int64_t at = end == ends_.end() ? -1 : end->second;
      if (!done[p]) {
        done[p] = true;
        ++ended;
        if (at >= 0) positions[p] = std::max(positions.count(p) ? positions[p] : 0, at);
        (*consumer)->Pause(p);
      }
    };

    absl::Status status;
    while (!cancel.cancelled()) {
      absl::StatusOr<kafka::GroupConsumer::Event> event =
          (*consumer)->Poll(absl::Milliseconds(100));
      if (!event.ok()) {
        status = event.status();
        break;
      }
      if (event->record.has_value()) {
        const Record& record = *event->record;
        const int32_t p = record.partition;
        auto end = ends_.find(p);
        if (end == ends_.end() || record.offset >= end->second) {
          end_partition(p);
        } else if (!done[p]) {
          CountScanned(p);
          const v1::DeadLetter dead = dlq::DecodeDeadLetter(record, 0);
          if (dlq::Matches(spec_.request().filter(), dead) && !Count(dead)) {
            OutgoingRecord out =
                dlq::RedriveRecord(record, dead,
                                   {spec_.request().target_topic(),
                                    spec_.request().reset_attempts(), options_.retry_topic},
                                   spec_.dead_letter_topic(), absl::ToUnixMillis(absl::Now()));
            if (targets.insert(out.topic).second) FirstTo(out.topic, **producer);
            if (!AwaitSend(cancel)) break;
            int64_t again = 0;
            if (auto it = sent_before_.find({p, record.offset}); it != sent_before_.end()) {
              again = it->second;
              sent_before_.erase(it);
            }
            absl::Status produced = (*producer)->Produce(
                out, [this, p, again, &error_mu, &produce_error](absl::Status s) {
                  Delivered(p, again, s);
                  if (s.ok()) return;
                  absl::MutexLock lock(&error_mu);
                  if (produce_error.ok()) produce_error = s;
                });
            if (!produced.ok()) {
              status = produced;
              break;
            }
          }
          positions[p] = record.offset + 1;
          if (record.offset + 1 >= end->second) end_partition(p);
        }
      } else if (event->eof_partition.has_value()) {
        const int32_t p = *event->eof_partition;
        auto end = ends_.find(p);
        if (end == ends_.end() || event->eof_offset >= end->second) end_partition(p);
      }
      const absl::Time now = absl::Now();
      Sample(now);
      // Whether every partition it holds is done: asked when one ended, and
      // every 200 ms (a rebalance may have moved them), not per record.
      bool all_done = false;
      if (ended != ended_seen || now - last_look >= absl::Milliseconds(200)) {
        ended_seen = ended;
        last_look = now;
        const std::vector<int32_t> assignment = (*consumer)->Assignment();
        assigned = assigned || !assignment.empty();
        all_done = assigned && std::all_of(assignment.begin(), assignment.end(),
                                           [&](int32_t p) { return done[p]; });
      }
      if (now - last_commit >= options_.commit_interval || (all_done && !positions.empty())) {
        if (status = commit(); !status.ok()) break;
      }
      if (all_done) {
        // Partitions another member holds are its own to finish.
        std::vector<int32_t> all;
        for (const auto& [p, end] : ends_) all.push_back(p);
        absl::StatusOr<std::map<int32_t, int64_t>> committed =
            (*consumer)->Committed(all, kKafkaTimeout);
        if (committed.ok() && std::all_of(ends_.begin(), ends_.end(), [&](const auto& e) {
              auto c = committed->find(e.first);
              return e.second <= 0 || (c != committed->end() && c->second >= e.second);
            })) {
          finished = true;
          break;
        }
      }
    }
    // Whatever ended the loop, what was produced is flushed and committed,
    // so a cancel returns with the target's count final.
    if (absl::Status s = commit(); status.ok() && !s.ok()) status = s;
    (*producer)->Close(kFlushTimeout);
    (*consumer)->Close();
    const bool keep_group = !finished && status.ok() && stopping_->load();
    if (!keep_group) {
      absl::StatusOr<std::unique_ptr<kafka::GroupAdmin>> admin =
          kafka::GroupAdmin::Create(options_.bootstrap_servers, options_.kafka_properties);
      absl::Status deleted =
          admin.ok() ? (*admin)->DeleteGroup(group_, kKafkaTimeout) : admin.status();
      if (!deleted.ok()) {
        LogWarning("redrive ", spec_.operation_id(), ": could not delete its group ", group_, ": ",
                   deleted.ToString(),
                   "; the next start resumes it (it finds nothing left) and deletes it");
      }
    }
    return status;
  }

  const DeadLetterToolsOptions options_;
  const v1::RedriveSpec spec_;
  const std::map<int32_t, int64_t> starts_;
  const std::map<int32_t, int64_t> ends_;
  const bool resumed_;
  const std::string caller_;
  const std::shared_ptr<const std::atomic<bool>> stopping_;
  const uint32_t rate_;
  const uint32_t max_redrives_;
  const std::string group_;
  int64_t total_ = 0;          // Set by the constructor.
  absl::Time look_back_from_;  // Set by the constructor: see FirstTo().
  absl::Time started_;
  LogThrottle skip_log_{absl::Seconds(1)};
  // Used by the run's thread alone: the records (dead-letter partition,
  // offset) a target held from before a resume and not yet sent again, with
  // how many copies it held.
  std::map<std::pair<int32_t, int64_t>, int64_t> sent_before_;
  absl::Mutex pace_mu_;  // Guards the two fields below; AwaitSend waits on it.
  RedrivePacer pacer_ ABSL_GUARDED_BY(pace_mu_);
  int64_t acknowledged_ ABSL_GUARDED_BY(pace_mu_) = 0;  // Delivery reports so far.
  mutable absl::Mutex mu_;                              // Guards the fields below.
  // Per partition, the whole redrive's counts (those before a resume
  // included): what its commits carry, and what Progress() sums.
  std::map<int32_t, v1::RedriveCheckpoint> counts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::pair<int64_t, int64_t>> by_reason_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, int64_t>> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string PurgeGroup(const std::string& group_id) { return group_id + ".dlq-tools"; }
std::string RedriveGroupPrefix(const std::string& group_id) { return group_id + ".ops."; }

DeadLetterTools::DeadLetterTools(DeadLetterToolsOptions options, OperationRegistry& operations)
    : options_(std::move(options)), operations_(operations) {}

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

absl::StatusOr<v1::ListDeadLettersResponse> DeadLetterTools::List(
    const v1::ListDeadLettersRequest& request, absl::Time deadline) const {
  if (request.page_size() > kMaxPageSize) {
    return InvalidField(absl::StrCat("page_size: must be at most ", kMaxPageSize, ", got ",
                                     request.page_size(), "; 0 means ", kDefaultPageSize));
  }
  if (request.max_value_bytes() > dlq::kMaxValueBytes) {
    return InvalidField(absl::StrCat("max_value_bytes: must be at most ", dlq::kMaxValueBytes,
                                     ", got ", request.max_value_bytes()));
  }
  if (absl::Status s = dlq::ValidateFilter(request.filter()); !s.ok()) return s;
  std::optional<dlq::ListCursor> cursor;
  if (!request.page_token().empty()) {
    absl::StatusOr<dlq::ListCursor> decoded = dlq::DecodePageToken(request.page_token());
    if (!decoded.ok()) return decoded.status();
    cursor = *std::move(decoded);
  }
  const uint32_t page_size = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  const size_t value_bytes =
      request.max_value_bytes() == 0 ? dlq::kDefaultValueBytes : request.max_value_bytes();

  absl::StatusOr<std::vector<kafka::OffsetRange>> ranges =
      kafka::TopicOffsetRanges(options_.bootstrap_servers, options_.kafka_properties,
                               options_.dead_letter_topic, Until(deadline));
  if (!ranges.ok()) return ranges.status();
  const int partitions = static_cast<int>(ranges->size());
  absl::StatusOr<std::map<int32_t, int64_t>> marks = PurgeMarks(partitions, Until(deadline));
  if (!marks.ok()) return marks.status();
  absl::StatusOr<std::vector<int32_t>> chosen = dlq::FilterPartitions(request.filter(), partitions);
  if (!chosen.ok()) return chosen.status();
  if (!cursor.has_value()) {
    cursor.emplace();
    for (int32_t p : *chosen) {
      cursor->partitions[p] = {std::max((*ranges)[p].low, (*marks)[p]), (*ranges)[p].high};
    }
  }
  // What was purged or deleted since the last page is skipped.
  std::map<int32_t, kafka::OffsetRange> read;
  for (auto& [p, range] : cursor->partitions) {
    if (p >= partitions) continue;
    range.next = std::min(range.end, std::max({range.next, (*ranges)[p].low, (*marks)[p]}));
    if (range.next < range.end) read[p] = {range.next, range.end};
  }
  v1::ListDeadLettersResponse response;
  response.set_topic(options_.dead_letter_topic);
  if (!read.empty()) {
    absl::StatusOr<std::unique_ptr<kafka::PartitionReader>> reader = kafka::PartitionReader::Open(
        options_.bootstrap_servers, options_.kafka_properties, options_.dead_letter_topic, read);
    if (!reader.ok()) return reader.status();
    // Leaves time for the answer to reach the caller.
    const absl::Time read_until =
        deadline - std::min(absl::Seconds(1), (deadline - absl::Now()) / 10);
    size_t bytes = 0;
    int64_t scanned = 0;
    while (response.records_size() < static_cast<int>(page_size) && bytes < kMaxPageBytes &&
           scanned < kMaxScannedPerPage) {
      absl::StatusOr<std::optional<Record>> next = (*reader)->Next(read_until);
      if (absl::IsDeadlineExceeded(next.status()) && scanned > 0) break;  // A short page.
      if (!next.ok()) return next.status();
      if (!next->has_value()) break;
      ++scanned;
      v1::DeadLetter dead = dlq::DecodeDeadLetter(**next, value_bytes);
      if (!dlq::Matches(request.filter(), dead)) continue;
      bytes += dead.ByteSizeLong();
      *response.add_records() = std::move(dead);
    }
    response.set_scanned(scanned);
    for (const auto& [p, next] : (*reader)->positions()) cursor->partitions[p].next = next;
  }
  response.set_next_page_token(dlq::EncodePageToken(*cursor));
  return response;
}

absl::StatusOr<v1::PurgeDeadLettersResponse> DeadLetterTools::Purge(
    const v1::PurgeDeadLettersRequest& request, absl::Time deadline) const {
  if (request.all() == !request.up_to().empty()) {
    return InvalidField("give either all (every partition up to its end) or up_to, not both");
  }
  absl::StatusOr<std::vector<kafka::OffsetRange>> ranges =
      kafka::TopicOffsetRanges(options_.bootstrap_servers, options_.kafka_properties,
                               options_.dead_letter_topic, Until(deadline));
  if (!ranges.ok()) return ranges.status();
  const int partitions = static_cast<int>(ranges->size());
  std::map<int32_t, int64_t> targets;
  if (request.all()) {
    for (int p = 0; p < partitions; ++p) targets[p] = (*ranges)[p].high;
  }
  for (const auto& [p, offset] : request.up_to()) {
    if (p < 0 || p >= partitions) {
      return InvalidField(absl::StrCat("up_to: the dead-letter topic ", options_.dead_letter_topic,
                                       " has partitions 0..", partitions - 1, ", not ", p));
    }
    if (offset < 0 || offset > (*ranges)[p].high) {
      return InvalidField(absl::StrCat("up_to[", p, "]: must be in 0..", (*ranges)[p].high,
                                       " (the partition's end), got ", offset));
    }
    targets[p] = offset;
  }
  absl::StatusOr<std::map<int32_t, int64_t>> marks = PurgeMarks(partitions, Until(deadline));
  if (!marks.ok()) return marks.status();
  v1::PurgeDeadLettersResponse response;
  response.set_topic(options_.dead_letter_topic);
  std::vector<kafka::CommittedOffset> moved;
  std::map<int32_t, int64_t> deletes;
  for (const auto& [p, target] : targets) {
    const int64_t from = std::max((*ranges)[p].low, (*marks)[p]);
    const int64_t to = std::max(from, target);
    v1::PartitionPurge* out = response.add_partitions();
    out->set_partition(p);
    out->set_from(from);
    out->set_to(to);
    if (to > (*marks)[p]) moved.push_back({p, to, ""});
    if (request.delete_records() && to > (*ranges)[p].low) deletes[p] = to;
  }
  if (request.delete_records() && !deletes.empty()) {
    absl::StatusOr<std::unique_ptr<kafka::GroupAdmin>> admin =
        kafka::GroupAdmin::Create(options_.bootstrap_servers, options_.kafka_properties);
    if (!admin.ok()) return admin.status();
    if (absl::Status s = (*admin)->DeleteRecords(options_.dead_letter_topic, deletes,
                                                 Until(deadline, absl::Seconds(60)));
        !s.ok()) {
      return Prefixed(s, "no mark moved: ");
    }
    for (v1::PartitionPurge& out : *response.mutable_partitions()) {
      out.set_deleted(deletes.contains(out.partition()));
    }
  }
  if (!moved.empty()) {
    if (absl::Status s = kafka::CommitWithoutJoining(
            options_.bootstrap_servers, options_.kafka_properties, PurgeGroup(options_.group_id),
            options_.dead_letter_topic, moved, Until(deadline));
        !s.ok()) {
      return s;
    }
  }
  return response;
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
      std::optional<v1::RedriveSpec> spec = ParseSpec(o.metadata);
      if (o.offset < 0 || !spec.has_value() ||
          spec->dead_letter_topic() != options_.dead_letter_topic) {
        continue;
      }
      return WithReason(
          absl::FailedPreconditionError(absl::StrCat(
              "redrive ", spec->operation_id(), " of ", options_.dead_letter_topic, " (group ",
              group.group, ", started by ", spec->started_by(), ") ",
              group.state == "Empty" ? "is unfinished and resumes when its retryd starts"
                                     : "is running",
              "; one redrive per dead-letter topic at a time: wait for it, or cancel it on the "
              "retryd that runs it")),
          reason::kRedriveRunning);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Operation> DeadLetterTools::StartRedrive(const v1::StartRedriveRequest& request,
                                                            const std::string& caller,
                                                            absl::Time deadline) {
  if (absl::Status s = dlq::ValidateFilter(request.filter()); !s.ok()) return s;
  if (request.rate_per_s() > kMaxRate) {
    return InvalidField(absl::StrCat("rate_per_s: must be at most ", kMaxRate, ", got ",
                                     request.rate_per_s(), "; 0 means ", kDefaultRate));
  }
  if (request.max_redrives() > 1000) {
    return InvalidField(absl::StrCat("max_redrives: must be at most 1000, got ",
                                     request.max_redrives(), "; 0 means ", kDefaultMaxRedrives));
  }
  if (request.target_topic() == options_.dead_letter_topic) {
    return InvalidField("target_topic: the dead-letter topic itself; redrive to another topic");
  }
  if (stopping_->load()) return absl::UnavailableError("retryd is stopping");

  absl::StatusOr<std::vector<kafka::OffsetRange>> ranges =
      kafka::TopicOffsetRanges(options_.bootstrap_servers, options_.kafka_properties,
                               options_.dead_letter_topic, Until(deadline));
  if (!ranges.ok()) return ranges.status();
  const int partitions = static_cast<int>(ranges->size());
  if (!request.target_topic().empty()) {
    if (absl::Status s =
            kafka::CheckTopicsExist(options_.bootstrap_servers, options_.kafka_properties,
                                    {request.target_topic()}, Until(deadline));
        !s.ok()) {
      return Prefixed(s, "target_topic: ");
    }
  }
  absl::StatusOr<std::vector<int32_t>> chosen = dlq::FilterPartitions(request.filter(), partitions);
  if (!chosen.ok()) return chosen.status();
  absl::StatusOr<std::map<int32_t, int64_t>> marks = PurgeMarks(partitions, Until(deadline));
  if (!marks.ok()) return marks.status();

  v1::RedriveSpec spec;
  spec.set_operation_id(OperationRegistry::NewId());
  spec.set_dead_letter_topic(options_.dead_letter_topic);
  *spec.mutable_request() = request;
  spec.mutable_request()->clear_request_id();
  spec.set_create_time_unix_ms(absl::ToUnixMillis(absl::Now()));
  spec.set_started_by(options_.instance_name);
  std::map<int32_t, int64_t> starts;
  std::map<int32_t, int64_t> ends;
  for (int p = 0; p < partitions; ++p) {
    ends[p] = (*ranges)[p].high;
    const bool read = std::find(chosen->begin(), chosen->end(), p) != chosen->end();
    starts[p] = read ? std::min(ends[p], std::max((*ranges)[p].low, (*marks)[p])) : ends[p];
  }
  {
    v1::RedriveSpec widest = spec;
    widest.set_end_offset(std::numeric_limits<int64_t>::max());
    v1::RedriveCheckpoint& counts = *widest.mutable_checkpoint();
    counts.set_scanned(std::numeric_limits<int64_t>::max());
    counts.set_matched(std::numeric_limits<int64_t>::max());
    counts.set_redriven(std::numeric_limits<int64_t>::max());
    counts.set_skipped(std::numeric_limits<int64_t>::max());
    counts.set_sent_twice(std::numeric_limits<int64_t>::max());
    counts.set_commit_time_unix_ms(std::numeric_limits<int64_t>::max());
    if (const size_t size = SpecJson(widest).size(); size > kMaxSpecBytes) {
      return InvalidField(absl::StrCat("filter: the redrive's spec takes ", size,
                                       " bytes as commit metadata, more than ", kMaxSpecBytes,
                                       "; use a shorter filter"));
    }
  }
  if (request.dry_run()) return Launch(spec, starts, ends, {}, /*resumed=*/false, caller);

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
  if (absl::Status s = CheckNoRedrive(partitions, Until(deadline)); !s.ok()) return s;
  std::vector<kafka::CommittedOffset> initial;
  for (const auto& [p, start] : starts) {
    v1::RedriveSpec with_end = spec;
    with_end.set_end_offset(ends[p]);
    initial.push_back({p, start, SpecJson(with_end)});
  }
  if (absl::Status s =
          kafka::CommitWithoutJoining(options_.bootstrap_servers, options_.kafka_properties,
                                      RedriveGroupPrefix(options_.group_id) + spec.operation_id(),
                                      options_.dead_letter_topic, initial, Until(deadline));
      !s.ok()) {
    return s;
  }
  return Launch(spec, starts, ends, {}, /*resumed=*/false, caller);
}

absl::StatusOr<v1::Operation> DeadLetterTools::Launch(
    const v1::RedriveSpec& spec, const std::map<int32_t, int64_t>& starts,
    const std::map<int32_t, int64_t>& ends, const std::map<int32_t, v1::RedriveCheckpoint>& carried,
    bool resumed, const std::string& caller) {
  auto run = std::make_shared<RedriveRun>(options_, spec, starts, ends, carried, resumed, caller,
                                          stopping_);
  LogInfo("control: redrive ", spec.operation_id(), " of ", spec.dead_letter_topic(),
          resumed ? " resumed" : " started", " (", caller, ", filter ",
          DescribeFilter(spec.request().filter()), ", target ", Target(spec), ", rate ",
          spec.request().rate_per_s() == 0 ? kDefaultRate : spec.request().rate_per_s(), "/s",
          spec.request().reset_attempts() ? ", reset_attempts" : "",
          spec.request().dry_run() ? ", dry run" : "", ")");
  return operations_.Run(
      v1::OPERATION_KIND_REDRIVE, spec.request().request_id(),
      [run](v1::OperationProgress& progress) { run->Progress(progress); },
      [run](engine::Cancellation& cancel, v1::Operation& result) {
        return run->Run(cancel, result);
      },
      spec.operation_id());
}

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
    const std::string id = group.group.substr(RedriveGroupPrefix(options_.group_id).size());
    // Started or resumed here already (its consumer may not have joined yet).
    if (operations_.Get(id).ok()) continue;
    absl::StatusOr<std::vector<kafka::CommittedOffset>> offsets =
        admin.GroupOffsets(group.group, options_.dead_letter_topic, partitions, kScanTimeout);
    if (!offsets.ok()) return offsets.status();
    std::optional<v1::RedriveSpec> spec;
    std::map<int32_t, int64_t> starts;
    std::map<int32_t, int64_t> ends;
    std::map<int32_t, v1::RedriveCheckpoint> carried;
    for (const kafka::CommittedOffset& o : *offsets) {
      std::optional<v1::RedriveSpec> s = ParseSpec(o.metadata);
      if (o.offset < 0 || !s.has_value()) continue;
      spec = s;
      starts[o.partition] = o.offset;
      ends[o.partition] = s->end_offset();
      carried[o.partition] = s->checkpoint();
    }
    if (!spec.has_value() || spec->dead_letter_topic() != options_.dead_letter_topic ||
        spec->operation_id() != id) {
      continue;
    }
    absl::StatusOr<v1::Operation> op =
        Launch(*spec, starts, ends, carried, /*resumed=*/true, "resumed: its group had no member");
    if (!op.ok() && !absl::IsAlreadyExists(op.status())) {
      LogWarning("dead-letter tools: cannot resume redrive ", id, ": ", op.status().ToString());
    }
  }
  return absl::OkStatus();
}

}  // namespace retryd::control
