// RedriveRun's live run (not a dry run): reads its range in its group,
// produces what matches at its rate, commits its position with its counts.
#include <algorithm>
#include <vector>

#include "server/common/logging.h"
#include "server/dlq/dead_letters.h"
#include "server/dlq/redrive_run.h"
#include "server/dlq/tool_limits.h"
#include "server/kafka/group_tools.h"
#include "server/kafka/producer.h"

namespace retryd::dlq {

struct RedriveRun::Live {
  std::unique_ptr<kafka::Producer> producer;
  std::unique_ptr<kafka::GroupConsumer> consumer;
  std::map<int32_t, int64_t> positions;  // Next offset, for partitions read since the last commit.
  std::map<int32_t, bool> done;
  absl::Mutex error_mu;
  absl::Status produce_error ABSL_GUARDED_BY(error_mu);  // The first delivery failure.
  std::set<std::string> targets;                         // Those a record was sent to.
  absl::Time last_commit = absl::Now();
  bool assigned = false;
  int ended = 0;  // Partitions done; ended_seen of them looked at.
  int ended_seen = 0;
  absl::Time last_look = absl::InfinitePast();
};

absl::Status RedriveRun::RunLive(engine::Cancellation& cancel) {
  engine::Cancellation::Subscription wake = cancel.OnCancel([this] {
    absl::MutexLock lock(&pace_mu_);  // Wakes AwaitSend to look again.
  });
  Live live;
  if (absl::Status s = OpenLive(live); !s.ok()) return s;
  absl::Status status;
  bool finished = false;
  while (!cancel.cancelled()) {
    if (std::optional<absl::Status> stop = Step(cancel, live); stop.has_value()) {
      status = *stop;
      break;
    }
    const absl::Time now = absl::Now();
    Sample(now);
    const bool all_done = AllDone(live, now);
    if (now - live.last_commit >= options_.commit_interval ||
        (all_done && !live.positions.empty())) {
      if (status = Commit(live); !status.ok()) break;
    }
    // Partitions another member holds are its own to finish.
    if (all_done && AllCommitted(live)) {
      finished = true;
      break;
    }
  }
  // Whatever ended the loop, what was produced is flushed and committed,
  // so a cancel returns with the target's count final.
  if (absl::Status s = Commit(live); status.ok() && !s.ok()) status = s;
  CloseLive(live, status, finished);
  return status;
}

absl::Status RedriveRun::OpenLive(Live& live) {
  kafka::ProducerOptions producer_options;
  producer_options.bootstrap_servers = options_.bootstrap_servers;
  producer_options.properties = options_.kafka_properties;
  producer_options.client_id = "retryd-redrive";
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer =
      kafka::Producer::Create(producer_options);
  if (!producer.ok()) return producer.status();
  live.producer = *std::move(producer);
  absl::StatusOr<std::unique_ptr<kafka::GroupConsumer>> consumer =
      kafka::GroupConsumer::Create(options_.bootstrap_servers, options_.kafka_properties, group_,
                                   spec_.dead_letter_topic, "retryd-redrive");
  if (!consumer.ok()) return consumer.status();
  live.consumer = *std::move(consumer);
  return absl::OkStatus();
}

absl::Status RedriveRun::Commit(Live& live) {
  if (absl::Status s = live.producer->Flush(kFlushTimeout); !s.ok()) return s;
  {
    absl::MutexLock lock(&live.error_mu);
    if (!live.produce_error.ok()) return live.produce_error;
  }
  // Each partition's counts go with its position: all of its records
  // before it are counted, and, flushed, acknowledged.
  std::vector<kafka::CommittedOffset> offsets;
  for (const auto& [p, next] : live.positions) offsets.push_back({p, next, Metadata(p)});
  if (absl::Status s = live.consumer->Commit(offsets); !s.ok()) return s;
  live.positions.clear();
  live.last_commit = absl::Now();
  return absl::OkStatus();
}

void RedriveRun::EndPartition(Live& live, int32_t p) {
  auto end = ends_.find(p);
  const int64_t at = end == ends_.end() ? -1 : end->second;
  if (!live.done[p]) {
    live.done[p] = true;
    ++live.ended;
    if (at >= 0) {
      live.positions[p] = std::max(live.positions.count(p) ? live.positions[p] : 0, at);
    }
    live.consumer->Pause(p);
  }
}

std::optional<absl::Status> RedriveRun::Step(engine::Cancellation& cancel, Live& live) {
  absl::StatusOr<kafka::GroupConsumer::Event> event = live.consumer->Poll(absl::Milliseconds(100));
  if (!event.ok()) return event.status();
  if (event->record.has_value()) {
    const Record& record = *event->record;
    const int32_t p = record.partition;
    auto end = ends_.find(p);
    if (end == ends_.end() || record.offset >= end->second) {
      EndPartition(live, p);
    } else if (!live.done[p]) {
      CountScanned(p);
      if (std::optional<absl::Status> stop = Redrive(cancel, live, record); stop.has_value()) {
        return stop;
      }
      live.positions[p] = record.offset + 1;
      if (record.offset + 1 >= end->second) EndPartition(live, p);
    }
  } else if (event->eof_partition.has_value()) {
    const int32_t p = *event->eof_partition;
    auto end = ends_.find(p);
    if (end == ends_.end() || event->eof_offset >= end->second) EndPartition(live, p);
  }
  return std::nullopt;
}

std::optional<absl::Status> RedriveRun::Redrive(engine::Cancellation& cancel, Live& live,
                                                const Record& record) {
  const int32_t p = record.partition;
  const DeadLetter dead = DecodeDeadLetter(record, 0);
  if (!Matches(spec_.request.filter, dead) || Count(dead)) return std::nullopt;
  OutgoingRecord out = RedriveRecord(
      record, dead,
      {spec_.request.target_topic, spec_.request.reset_attempts, options_.retry_topic},
      spec_.dead_letter_topic, absl::ToUnixMillis(absl::Now()));
  if (live.targets.insert(out.topic).second) FirstTo(out.topic, *live.producer);
  if (!AwaitSend(cancel)) return absl::OkStatus();
  int64_t again = 0;
  if (auto it = sent_before_.find({p, record.offset}); it != sent_before_.end()) {
    again = it->second;
    sent_before_.erase(it);
  }
  absl::Status produced = live.producer->Produce(out, [this, p, again, &live](absl::Status s) {
    Delivered(p, again, s);
    if (s.ok()) return;
    absl::MutexLock lock(&live.error_mu);
    if (live.produce_error.ok()) live.produce_error = s;
  });
  if (!produced.ok()) return produced;
  return std::nullopt;
}

bool RedriveRun::AllDone(Live& live, absl::Time now) {
  if (live.ended == live.ended_seen && now - live.last_look < absl::Milliseconds(200)) {
    return false;
  }
  live.ended_seen = live.ended;
  live.last_look = now;
  const std::vector<int32_t> assignment = live.consumer->Assignment();
  live.assigned = live.assigned || !assignment.empty();
  return live.assigned &&
         std::all_of(assignment.begin(), assignment.end(), [&](int32_t p) { return live.done[p]; });
}

bool RedriveRun::AllCommitted(Live& live) {
  std::vector<int32_t> all;
  for (const auto& [p, end] : ends_) all.push_back(p);
  absl::StatusOr<std::map<int32_t, int64_t>> committed =
      live.consumer->Committed(all, kKafkaTimeout);
  return committed.ok() && std::all_of(ends_.begin(), ends_.end(), [&](const auto& e) {
           auto c = committed->find(e.first);
           return e.second <= 0 || (c != committed->end() && c->second >= e.second);
         });
}

void RedriveRun::CloseLive(Live& live, const absl::Status& status, bool finished) {
  live.producer->Close(kFlushTimeout);
  live.consumer->Close();
  const bool keep_group = !finished && status.ok() && stopping_->load();
  if (keep_group) return;
  absl::StatusOr<std::unique_ptr<kafka::GroupAdmin>> admin =
      kafka::GroupAdmin::Create(options_.bootstrap_servers, options_.kafka_properties);
  absl::Status deleted = admin.ok() ? (*admin)->DeleteGroup(group_, kKafkaTimeout) : admin.status();
  if (!deleted.ok()) {
    LogWarning("redrive ", spec_.operation_id, ": could not delete its group ", group_, ": ",
               deleted.ToString(),
               "; the next start resumes it (it finds nothing left) and deletes it");
  }
}

}  // namespace retryd::dlq
