#include "server/engine/worker.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/retry_headers.h"

namespace retryd {
namespace {

constexpr absl::Duration kMaxPollWait = absl::Milliseconds(200);
constexpr absl::Duration kRedoDelay = absl::Seconds(1);
constexpr size_t kMaxDuePerRound = 256;
// How far past its stop deadline a worker may go to commit what its
// hand-offs completed (kStopGrace / 2) and then leave its group.
constexpr absl::Duration kStopGrace = absl::Seconds(2);

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

uint64_t BackoffSeed(const EngineOptions& options, int id) {
  if (options.retry.seed != 0) return options.retry.seed * 1000003u + static_cast<uint64_t>(id);
  return std::random_device{}();
}

kafka::ConsumerOptions ConsumerOptionsFor(const EngineOptions& options, int id, ThreadRole role) {
  kafka::ConsumerOptions c;
  c.bootstrap_servers = options.bootstrap_servers;
  c.properties = options.kafka_properties;
  if (role == ThreadRole::kPrimary) {
    c.group_id = options.group_id;
    c.topics = options.input_topics;
  } else {
    c.group_id = absl::StrCat(options.group_id, ".retry");
    c.topics = {options.retry.topic};
  }
  c.client_id = absl::StrCat("retryd-", ThreadRoleName(role), "-", id);
  return c;
}

}  // namespace

const char* ThreadRoleName(ThreadRole role) {
  return role == ThreadRole::kPrimary ? "primary" : "retry";
}

const char* ThreadStateName(ThreadState state) {
  switch (state) {
    case ThreadState::kStarting: return "STARTING";
    case ThreadState::kRunning: return "RUNNING";
    case ThreadState::kIdle: return "IDLE";
    case ThreadState::kWaitingBackoff: return "WAITING_BACKOFF";
    case ThreadState::kPaused: return "PAUSED";
    case ThreadState::kStopping: return "STOPPING";
    case ThreadState::kStopped: return "STOPPED";
    case ThreadState::kFailed: return "FAILED";
  }
  return "UNKNOWN";
}

Worker::Worker(int id, ThreadRole role, const WorkerContext& context)
    : id_(id),
      role_(role),
      context_(context),
      sink_(std::make_shared<Sink>(id, role, context.options->max_in_flight / 2 + 1)),
      backoff_(context.options->retry.backoff, BackoffSeed(*context.options, id)) {}

Worker::~Worker() {
  if (thread_.joinable()) {
    RequestStop(/*graceful=*/false);
    thread_.join();
  }
}

absl::Status Worker::Start() {
  absl::StatusOr<std::unique_ptr<kafka::Consumer>> consumer =
      kafka::Consumer::Create(ConsumerOptionsFor(*context_.options, id_, role_), this);
  if (!consumer.ok()) {
    sink_->SetState(ThreadState::kFailed);
    sink_->SetLastError(consumer.status().ToString());
    return consumer.status();
  }
  consumer_ = *std::move(consumer);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void Worker::RequestStop(bool graceful, absl::Time deadline) {
  graceful_.store(graceful, std::memory_order_relaxed);
  stop_deadline_ns_.store(absl::ToUnixNanos(deadline), std::memory_order_relaxed);
  stop_requested_.store(true, std::memory_order_release);
  // Wakes a WaitForAcks in progress, which re-checks stop_requested_.
  absl::MutexLock lock(&sink_->flight_mu);
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

bool Worker::InOrder() const {
  return role_ == ThreadRole::kPrimary && context_.in_order->load(std::memory_order_relaxed);
}

int64_t Worker::HeldCount(const TopicPartition& tp) const {
  int64_t n = static_cast<int64_t>(scheduler_.CountFor(tp));
  if (auto it = waiting_.find(tp); it != waiting_.end()) n += static_cast<int64_t>(it->second.size());
  return n;
}

void Worker::Run() {
  SetThreadName(absl::StrCat(ThreadRoleName(role_), "-", id_));
  const absl::Duration commit_interval = absl::Milliseconds(context_.options->commit_interval_ms);
  next_commit_ = absl::Now() + commit_interval;
  bool failed = false;
  while (!stop_requested_.load(std::memory_order_acquire)) {
    DrainRedo(/*force=*/false);
    WaitForAcks();
    ProcessDue(NowMs());
    if (absl::Now() >= next_commit_) {
      Commit(/*sync=*/false);
      UpdateGauges();
      next_commit_ = absl::Now() + commit_interval;
    }
    ReconcilePauses();

    absl::Duration wait = kMaxPollWait;
    if (std::optional<int64_t> due = scheduler_.NextDueMs()) {
      wait = std::clamp(absl::Milliseconds(*due - NowMs()), absl::ZeroDuration(), kMaxPollWait);
    }
    absl::StatusOr<std::optional<Record>> polled = consumer_->Poll(wait);
    if (!polled.ok()) {
      LogError("thread ", id_, " stops: ", polled.status().message());
      sink_->SetLastError(std::string(polled.status().message()));
      failed = true;
      break;
    }
    if (polled->has_value()) {
      sink_->SetState(ThreadState::kRunning);
      HandleConsumed(std::move(**polled));
    } else if (!sink_->joined.HasBeenNotified()) {
      // Still joining the group: stays STARTING.
    } else if (scheduler_.size() > 0) {
      sink_->SetState(ThreadState::kWaitingBackoff);
    } else if (!paused_.empty() && paused_.size() == trackers_.size()) {
      sink_->SetState(ThreadState::kPaused);
    } else {
      sink_->SetState(ThreadState::kIdle);
    }
  }
  sink_->SetState(ThreadState::kStopping);
  // Close() revokes every partition: OnRevoked waits for the hand-offs (when
  // graceful) and commits before the group gets them back. Bounded: with the
  // broker unreachable, leaving the group would block for a long time.
  const absl::Time stop_deadline =
      std::min(absl::Now() + absl::Milliseconds(context_.options->shutdown_timeout_ms),
               absl::FromUnixNanos(stop_deadline_ns_.load(std::memory_order_relaxed)));
  if (absl::Status s = consumer_->Close(stop_deadline + kStopGrace); !s.ok()) {
    LogWarning("thread ", id_, ": ", s.message());
  }
  UpdateGauges();
  sink_->SetState(failed ? ThreadState::kFailed : ThreadState::kStopped);
  if (!sink_->joined.HasBeenNotified()) sink_->joined.Notify();
}

void Worker::HandleConsumed(Record record) {
  const TopicPartition tp = record.tp();
  auto it = trackers_.find(tp);
  if (it == trackers_.end()) {
    // Not ours (a record fetched before a revoke): the owner reads it again.
    return;
  }
  const std::shared_ptr<CompletionTracker>& tracker = it->second;
  if (!tracker->Begin(record.offset)) {
    LogWarning("thread ", id_, ": ignoring ", tp.topic, "/", tp.partition, "@", record.offset,
               ", at or below an offset already taken");
    return;
  }
  if (role_ == ThreadRole::kPrimary) {
    if (HeldCount(tp) > 0) {
      // In order: it waits behind the held record of its partition.
      waiting_[tp].push_back(std::move(record));
      return;
    }
    HeldRecord held;
    held.source = tp;
    held.source_offset = record.offset;
    held.attempt = 1;
    held.record = std::move(record);
    Attempt(std::move(held));
    return;
  }
  absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(record.headers);
  if (!meta.ok()) {
    DeadLetterMalformed(record, tracker, meta.status());
    return;
  }
  HeldRecord held;
  held.source = tp;
  held.source_offset = record.offset;
  held.attempt = meta->attempt;
  held.first_failure_ms = meta->first_failure_ms;
  held.due_ms = meta->due_ms;
  held.last_error = std::move(meta->error);
  held.record.topic = std::move(meta->original_topic);
  held.record.partition = meta->original_partition;
  held.record.offset = meta->original_offset;
  held.record.timestamp_ms = meta->original_timestamp_ms;
  held.record.key = std::move(record.key);
  held.record.value = std::move(record.value);
  held.record.headers = StripRetrydHeaders(record.headers);
  if (held.due_ms <= NowMs()) {
    Attempt(std::move(held));
  } else {
    scheduler_.Add(std::move(held));
    sink_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
  }
}

void Worker::RecordEndToEnd(const HeldRecord& held, absl::Time now) {
  if (held.record.timestamp_ms < 0) return;
  sink_->end_to_end_latency.Record(now - absl::FromUnixMillis(held.record.timestamp_ms));
}

void Worker::Attempt(HeldRecord held) {
  sink_->processed.fetch_add(1, std::memory_order_relaxed);
  const absl::Time started = absl::Now();
  Outcome outcome = context_.processor->Process(held.record, held.attempt);
  const absl::Time finished = absl::Now();  // One clock read for both latencies.
  sink_->processing_latency.Record(finished - started);
  switch (outcome.kind) {
    case Outcome::Kind::kOk:
      sink_->succeeded.fetch_add(1, std::memory_order_relaxed);
      RecordEndToEnd(held, finished);
      OnSuccess(held);
      return;
    case Outcome::Kind::kPermanent:
      sink_->failed_attempts.fetch_add(1, std::memory_order_relaxed);
      sink_->SetLastError(outcome.reason);
      RecordEndToEnd(held, finished);
      DeadLetter(held, absl::StrCat("permanent failure: ", outcome.reason));
      return;
    case Outcome::Kind::kRetriable:
      sink_->failed_attempts.fetch_add(1, std::memory_order_relaxed);
      sink_->SetLastError(outcome.reason);
      OnRetriableFailure(std::move(held), std::move(outcome.reason));
      return;
  }
}

void Worker::OnSuccess(const HeldRecord& held) {
  const std::shared_ptr<CompletionTracker>& tracker = trackers_.at(held.source);
  const std::string& output_topic = context_.options->output_topic;
  if (output_topic.empty()) {
    tracker->Complete(held.source_offset);
    return;
  }
  OutgoingRecord out;
  out.topic = output_topic;
  out.key = held.record.key;
  out.value = held.record.value;
  out.headers = held.record.headers;
  SetHeader(out.headers, kOriginalTopicHeader, held.record.topic);
  SetHeader(out.headers, kOriginalPartitionHeader, absl::StrCat(held.record.partition));
  SetHeader(out.headers, kOriginalOffsetHeader, absl::StrCat(held.record.offset));
  SetHeader(out.headers, kAttemptHeader, absl::StrCat(held.attempt));
  Emit(std::move(out), Emission::kOutput, tracker, held.source_offset);
}

void Worker::OnRetriableFailure(HeldRecord held, std::string reason) {
  const RetryOptions& retry = context_.options->retry;
  if (held.attempt >= retry.max_attempts) {
    RecordEndToEnd(held, absl::Now());
    DeadLetter(held, absl::StrCat(reason, " (gave up after attempt ", held.attempt, " of ",
                                  retry.max_attempts, ")"));
    return;
  }
  const int64_t now = NowMs();
  if (held.first_failure_ms == 0) held.first_failure_ms = now;
  held.due_ms = now + backoff_.DelayMs(held.attempt);
  held.attempt += 1;
  held.last_error = std::move(reason);
  if (InOrder()) {
    // Retried in place: the partition is paused until it completes.
    scheduler_.Add(std::move(held));
    sink_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
    return;
  }
  RetryMetadata meta;
  meta.attempt = held.attempt;
  meta.due_ms = held.due_ms;
  meta.first_failure_ms = held.first_failure_ms;
  meta.original_topic = held.record.topic;
  meta.original_partition = held.record.partition;
  meta.original_offset = held.record.offset;
  meta.original_timestamp_ms = held.record.timestamp_ms;
  meta.error = held.last_error;
  OutgoingRecord out;
  out.topic = retry.topic;
  out.key = std::move(held.record.key);
  out.value = std::move(held.record.value);
  out.headers = WithRetryHeaders(held.record.headers, meta);
  Emit(std::move(out), Emission::kRetry, trackers_.at(held.source), held.source_offset);
}

void Worker::DeadLetter(const HeldRecord& held, std::string reason) {
  RetryMetadata meta;
  meta.attempt = held.attempt;
  meta.due_ms = NowMs();
  meta.first_failure_ms = held.first_failure_ms != 0 ? held.first_failure_ms : meta.due_ms;
  meta.original_topic = held.record.topic;
  meta.original_partition = held.record.partition;
  meta.original_offset = held.record.offset;
  meta.original_timestamp_ms = held.record.timestamp_ms;
  meta.error = std::move(reason);
  OutgoingRecord out;
  out.topic = context_.options->dead_letter_topic;
  out.key = held.record.key;
  out.value = held.record.value;
  out.headers = WithRetryHeaders(held.record.headers, meta);
  Emit(std::move(out), Emission::kDeadLetter, trackers_.at(held.source), held.source_offset);
}

void Worker::DeadLetterMalformed(const Record& record,
                                 const std::shared_ptr<CompletionTracker>& tracker,
                                 const absl::Status& why) {
  const std::string error = absl::StrCat("malformed retry record ", record.topic, "/",
                                         record.partition, "@", record.offset, ": ", why.message());
  LogWarning("thread ", id_, ": ", error, "; dead-lettering it");
  sink_->SetLastError(error);
  OutgoingRecord out;
  out.topic = context_.options->dead_letter_topic;
  out.key = record.key;
  out.value = record.value;
  out.headers = record.headers;  // Kept as found, for whoever investigates.
  SetHeader(out.headers, kErrorHeader, TruncateUtf8(error, kMaxErrorBytes));
  Emit(std::move(out), Emission::kDeadLetter, tracker, record.offset);
}

void Worker::Emit(OutgoingRecord record, Emission kind, std::shared_ptr<CompletionTracker> tracker,
                  int64_t offset) {
  sink_->in_flight.fetch_add(1, std::memory_order_relaxed);
  auto out = std::make_shared<OutgoingRecord>(std::move(record));
  std::shared_ptr<Sink> sink = sink_;
  auto on_failure = [sink, kind, tracker, offset, out](const absl::Status& status) {
    // Purged at shutdown, or the partition moved: the next owner reads the
    // source record again, so there is nothing to re-send.
    if (tracker->abandoned() || absl::IsCancelled(status)) {
      sink->HandOffDone();
      return;
    }
    sink->SetLastError(std::string(status.message()));
    const absl::Time now = absl::Now();
    const std::string topic = out->topic;
    size_t waiting = 0;
    {
      absl::MutexLock lock(&sink->redo_mu);
      sink->redo.push_back({std::move(*out), kind, tracker, offset, now + kRedoDelay});
      waiting = sink->redo.size();
    }
    if (int64_t held_back = 0; sink->redo_log.Allow(now, &held_back)) {
      LogWarning("thread ", sink->id(), ": hand-off to ", topic, " failed (",
                 status.message(), "); sending it again (", waiting, " waiting to be sent again)",
                 LogThrottle::HeldBackNote(held_back));
    }
  };
  absl::Status status = context_.producer->Produce(
      *out, [sink, kind, tracker, offset, on_failure](absl::Status delivery) mutable {
        if (!delivery.ok()) {
          on_failure(delivery);
          return;
        }
        tracker->Complete(offset);
        if (kind == Emission::kRetry) sink->sent_to_retry.fetch_add(1, std::memory_order_relaxed);
        if (kind == Emission::kDeadLetter) {
          sink->dead_lettered.fetch_add(1, std::memory_order_relaxed);
        }
        sink->HandOffDone();
      });
  if (!status.ok()) on_failure(status);
}

void Worker::DrainRedo(bool force) {
  std::vector<Redo> ready;
  {
    absl::MutexLock lock(&sink_->redo_mu);
    const absl::Time now = absl::Now();
    for (auto it = sink_->redo.begin(); it != sink_->redo.end();) {
      if (force || it->not_before <= now) {
        ready.push_back(std::move(*it));
        it = sink_->redo.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Redo& redo : ready) {
    sink_->HandOffDone();
    if (redo.tracker->abandoned()) continue;
    Emit(std::move(redo.record), redo.kind, std::move(redo.tracker), redo.offset);
  }
}

void Worker::ProcessDue(int64_t now_ms) {
  if (scheduler_.size() == 0) return;
  std::vector<HeldRecord> due = scheduler_.PopDue(now_ms, kMaxDuePerRound);
  for (HeldRecord& held : due) {
    const TopicPartition tp = held.source;
    Attempt(std::move(held));
    DrainWaiting(tp);
  }
  sink_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
}

void Worker::DrainWaiting(const TopicPartition& tp) {
  auto it = waiting_.find(tp);
  if (it == waiting_.end()) return;
  std::deque<Record>& queue = it->second;
  while (!queue.empty() && scheduler_.CountFor(tp) == 0) {
    HeldRecord held;
    held.source = tp;
    held.source_offset = queue.front().offset;
    held.record = std::move(queue.front());
    queue.pop_front();
    Attempt(std::move(held));
  }
  if (queue.empty()) waiting_.erase(it);
}

void Worker::WaitForAcks() {
  constexpr absl::Duration kMaxWait = absl::Milliseconds(500);
  if (sink_->in_flight.load(std::memory_order_relaxed) < context_.options->max_in_flight) return;
  const Sink* sink = sink_.get();
  const std::atomic<bool>* stop = &stop_requested_;
  auto relieved = [sink, stop] {
    return sink->in_flight.load(std::memory_order_relaxed) < sink->resume_below ||
           stop->load(std::memory_order_relaxed);
  };
  absl::MutexLock lock(&sink_->flight_mu);
  sink_->flight_mu.AwaitWithTimeout(absl::Condition(&relieved), kMaxWait);
}

void Worker::ReconcilePauses() {
  const int64_t in_flight = sink_->in_flight.load(std::memory_order_relaxed);
  if (in_flight >= context_.options->max_in_flight) {
    backpressure_ = true;
  } else if (in_flight < sink_->resume_below) {
    backpressure_ = false;
  }
  std::vector<TopicPartition> pause, resume;
  const int64_t lookahead = context_.options->retry.lookahead;
  const bool input_paused =
      role_ == ThreadRole::kPrimary && context_.input_paused->load(std::memory_order_relaxed);
  for (const auto& [tp, tracker] : trackers_) {
    // In order, records behind a held one wait in `waiting_` rather than
    // pausing at once: a pause drops what was fetched and costs a fetch
    // round trip, far more than a short backoff. Both roles stop fetching
    // once `lookahead` records of a partition are held.
    bool want = backpressure_ || input_paused;
    if (role_ == ThreadRole::kPrimary) {
      want = want || HeldCount(tp) >= lookahead;
    } else {
      want = want || static_cast<int64_t>(scheduler_.CountFor(tp)) >= lookahead;
    }
    const bool is = paused_.contains(tp);
    if (want && !is) pause.push_back(tp);
    if (!want && is) resume.push_back(tp);
  }
  if (!pause.empty()) {
    if (absl::Status s = consumer_->Pause(pause); s.ok()) {
      paused_.insert(pause.begin(), pause.end());
    } else {
      LogWarning("thread ", id_, ": ", s.message());
    }
  }
  if (!resume.empty()) {
    if (absl::Status s = consumer_->Resume(resume); s.ok()) {
      for (const TopicPartition& tp : resume) paused_.erase(tp);
    } else {
      LogWarning("thread ", id_, ": ", s.message());
    }
  }
}

void Worker::Commit(bool sync) {
  kafka::CommitOffsets offsets;
  for (const auto& [tp, tracker] : trackers_) {
    const int64_t offset = tracker->CommitOffset();
    // A synchronous commit (at revoke) repeats the last one in case an
    // asynchronous commit failed unseen.
    if (offset >= 0 && (offset > committed_[tp] || sync)) offsets.push_back({tp, offset});
  }
  if (offsets.empty()) return;
  if (absl::Status s = consumer_->Commit(offsets, /*async=*/!sync); !s.ok()) {
    LogWarning("thread ", id_, ": ", s.message());
    return;
  }
  for (const auto& [tp, offset] : offsets) committed_[tp] = offset;
  sink_->commits.fetch_add(1, std::memory_order_relaxed);
}

void Worker::OnCommitFailed(const kafka::CommitOffsets& offsets) {
  for (const auto& [tp, offset] : offsets) {
    // Forget it was committed, unless a later commit already went out.
    if (auto it = committed_.find(tp); it != committed_.end() && it->second == offset) {
      it->second = -1;
    }
  }
}

void Worker::UpdateGauges() {
  std::vector<TopicPartition> assigned;
  int64_t waiting = 0;
  for (const auto& [tp, tracker] : trackers_) assigned.push_back(tp);
  for (const auto& [tp, queue] : waiting_) waiting += static_cast<int64_t>(queue.size());
  sink_->lag.store(consumer_->Lag(assigned), std::memory_order_relaxed);
  sink_->scheduled.store(static_cast<int64_t>(scheduler_.size()) + waiting,
                         std::memory_order_relaxed);
}

void Worker::OnAssigned(const std::vector<TopicPartition>& partitions) {
  for (const TopicPartition& tp : partitions) {
    trackers_[tp] = std::make_shared<CompletionTracker>();
    committed_[tp] = -1;
  }
  std::vector<TopicPartition> all;
  for (const auto& [tp, tracker] : trackers_) all.push_back(tp);
  LogInfo("thread ", id_, ": assigned ", partitions.size(), " partitions, now ", all.size());
  sink_->SetPartitions(std::move(all));
  if (!sink_->joined.HasBeenNotified()) {
    sink_->SetState(ThreadState::kRunning);
    sink_->joined.Notify();
  }
}

void Worker::AwaitHandOffs(const std::vector<TopicPartition>& tps, absl::Time deadline) {
  for (const TopicPartition& tp : tps) {
    auto it = trackers_.find(tp);
    if (it == trackers_.end()) continue;
    // Held records were dropped but stay pending in the tracker (they are
    // not complete); everything else pending is a hand-off awaiting its ack.
    const int64_t held = HeldCount(tp);
    while (!it->second->AwaitPendingAtMost(held, std::min(deadline, absl::Now() + kRedoDelay))) {
      if (absl::Now() >= deadline) {
        LogWarning("thread ", id_, ": ", tp.topic, "/", tp.partition, ": gave up waiting for ",
                   it->second->pending() - held, " hand-offs; they will be processed again");
        break;
      }
      DrainRedo(/*force=*/true);
    }
  }
}

void Worker::OnRevoked(const std::vector<TopicPartition>& partitions, bool lost) {
  LogInfo("thread ", id_, ": ", lost ? "lost " : "revoked ", partitions.size(), " partitions");
  absl::Time deadline = absl::Now() + absl::Milliseconds(context_.options->shutdown_timeout_ms);
  if (stop_requested_.load(std::memory_order_acquire)) {
    const int64_t stop_ns = stop_deadline_ns_.load(std::memory_order_relaxed);
    deadline = std::min(deadline, absl::FromUnixNanos(stop_ns));
  }
  if (!lost && graceful_.load(std::memory_order_relaxed)) AwaitHandOffs(partitions, deadline);
  if (!lost) {
    kafka::CommitOffsets offsets;
    for (const TopicPartition& tp : partitions) {
      auto it = trackers_.find(tp);
      if (it == trackers_.end()) continue;
      const int64_t offset = it->second->CommitOffset();
      if (offset >= 0) offsets.push_back({tp, offset});
    }
    // Bounded like the rest of a stop, yet given a moment even when the
    // hand-offs used up the deadline.
    const absl::Time commit_deadline = std::max(deadline, absl::Now() + kStopGrace / 2);
    if (absl::Status s = consumer_->CommitWithin(offsets, commit_deadline); !s.ok()) {
      LogWarning("thread ", id_, ": commit at revoke: ", s.message());
    } else if (!offsets.empty()) {
      sink_->commits.fetch_add(1, std::memory_order_relaxed);
    }
  }
  for (const TopicPartition& tp : partitions) {
    scheduler_.DropPartition(tp);
    waiting_.erase(tp);
    paused_.erase(tp);
    committed_.erase(tp);
    if (auto it = trackers_.find(tp); it != trackers_.end()) {
      it->second->Abandon();
      trackers_.erase(it);
    }
  }
  std::vector<TopicPartition> all;
  for (const auto& [tp, tracker] : trackers_) all.push_back(tp);
  sink_->SetPartitions(std::move(all));
  UpdateGauges();
}

}  // namespace retryd
