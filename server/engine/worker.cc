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

void Worker::RequestStop(bool graceful) {
  graceful_.store(graceful, std::memory_order_relaxed);
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

int64_t Worker::HeldRecords(const TopicPartition& tp) const {
  int64_t n = static_cast<int64_t>(scheduler_.CountFor(tp));
  if (auto it = waiting_.find(tp); it != waiting_.end()) n += static_cast<int64_t>(it->second.size());
  return n;
}

int64_t Worker::HeldCount(const TopicPartition& tp) const {
  int64_t n = HeldRecords(tp);
  if (InOrder()) {
    if (auto it = trackers_.find(tp); it != trackers_.end()) n += sink_->FailedHandOffs(it->second);
  }
  return n;
}

void Worker::Run() {
  SetThreadName(absl::StrCat(ThreadRoleName(role_), "-", id_));
  const absl::Duration commit_interval = absl::Milliseconds(context_.options->commit_interval_ms);
  next_commit_ = absl::Now() + commit_interval;
  bool failed = false;
  while (!stop_requested_.load(std::memory_order_acquire)) {
    if (HandOffsBroken()) {
      failed = true;
      break;
    }
    DrainRedo(/*force=*/false);
    ReleaseRecovered();
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
  // graceful) and commits before the group gets them back.
  if (absl::Status s = consumer_->Close(); !s.ok()) {
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

namespace {

// The smallest dead-letter record tried when a fitted one is refused too:
// below any broker's limit, room for the retryd headers, the key and a
// glimpse of the value.
constexpr size_t kMinimalDeadLetterBytes = 16 * 1024;

RetryMetadata OriginOf(const HeldRecord& held) {
  RetryMetadata m;
  m.attempt = held.attempt;
  m.first_failure_ms = held.first_failure_ms;
  m.original_topic = held.record.topic;
  m.original_partition = held.record.partition;
  m.original_offset = held.record.offset;
  m.original_timestamp_ms = held.record.timestamp_ms;
  m.error = held.last_error;
  return m;
}

}  // namespace

const char* Worker::EmissionName(Emission kind) {
  switch (kind) {
    case Emission::kOutput: return "output";
    case Emission::kRetry: return "retry";
    case Emission::kDeadLetter: return "dead-letter";
  }
  return "unknown";
}

void Worker::OnSuccess(const HeldRecord& held) {
  const std::shared_ptr<CompletionTracker>& tracker = trackers_.at(held.source);
  const std::string& output_topic = context_.options->output_topic;
  if (output_topic.empty()) {
    tracker->Complete(held.source_offset);
    return;
  }
  HandOff h;
  h.record.topic = output_topic;
  h.record.key = held.record.key;
  h.record.value = held.record.value;
  h.record.headers = held.record.headers;
  SetHeader(h.record.headers, kOriginalTopicHeader, held.record.topic);
  SetHeader(h.record.headers, kOriginalPartitionHeader, absl::StrCat(held.record.partition));
  SetHeader(h.record.headers, kOriginalOffsetHeader, absl::StrCat(held.record.offset));
  SetHeader(h.record.headers, kAttemptHeader, absl::StrCat(held.attempt));
  h.kind = Emission::kOutput;
  h.tracker = tracker;
  h.offset = held.source_offset;
  h.origin = OriginOf(held);
  Emit(std::move(h));
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
  HandOff h;
  h.origin = OriginOf(held);
  h.origin.due_ms = held.due_ms;
  h.record.topic = retry.topic;
  h.record.key = std::move(held.record.key);
  h.record.value = std::move(held.record.value);
  h.record.headers = WithRetryHeaders(held.record.headers, h.origin);
  h.kind = Emission::kRetry;
  h.tracker = trackers_.at(held.source);
  h.offset = held.source_offset;
  Emit(std::move(h));
}

void Worker::DeadLetter(const HeldRecord& held, std::string reason) {
  HandOff h;
  h.origin = OriginOf(held);
  h.origin.due_ms = NowMs();
  if (h.origin.first_failure_ms == 0) h.origin.first_failure_ms = h.origin.due_ms;
  h.origin.error = std::move(reason);
  h.record.topic = context_.options->dead_letter_topic;
  h.record.key = held.record.key;
  h.record.value = held.record.value;
  h.record.headers = WithRetryHeaders(held.record.headers, h.origin);
  h.kind = Emission::kDeadLetter;
  h.tracker = trackers_.at(held.source);
  h.offset = held.source_offset;
  Emit(std::move(h));
}

void Worker::DeadLetterMalformed(const Record& record,
                                 const std::shared_ptr<CompletionTracker>& tracker,
                                 const absl::Status& why) {
  const std::string error = absl::StrCat("malformed retry record ", record.topic, "/",
                                         record.partition, "@", record.offset, ": ", why.message());
  LogWarning("thread ", id_, ": ", error, "; dead-lettering it");
  sink_->SetLastError(error);
  HandOff h;
  h.record.topic = context_.options->dead_letter_topic;
  h.record.key = record.key;
  h.record.value = record.value;
  h.record.headers = record.headers;  // Kept as found, for whoever investigates.
  SetHeader(h.record.headers, kErrorHeader, TruncateUtf8(error, kMaxErrorBytes));
  h.kind = Emission::kDeadLetter;
  h.tracker = tracker;
  h.offset = record.offset;
  // Its own retry headers cannot be trusted: it is described by where it was read.
  h.origin.due_ms = NowMs();
  h.origin.first_failure_ms = h.origin.due_ms;
  h.origin.original_topic = record.topic;
  h.origin.original_partition = record.partition;
  h.origin.original_offset = record.offset;
  h.origin.original_timestamp_ms = record.timestamp_ms;
  h.origin.error = error;
  Emit(std::move(h));
}

void Worker::Emit(HandOff hand_off) {
  sink_->in_flight.fetch_add(1, std::memory_order_relaxed);
  hand_off.in_order = InOrder();
  auto shared = std::make_shared<HandOff>(std::move(hand_off));
  std::shared_ptr<Sink> sink = sink_;
  absl::Status status =
      context_.producer->Produce(shared->record, [sink, shared](absl::Status delivery) mutable {
        if (delivery.ok()) {
          OnHandOffDelivered(sink, *shared);
        } else {
          OnHandOffFailed(sink, std::move(*shared), delivery);
        }
      });
  if (!status.ok()) OnHandOffFailed(sink_, std::move(*shared), status);
}

void Worker::OnHandOffDelivered(const std::shared_ptr<Sink>& sink, HandOff& hand_off) {
  {
    absl::MutexLock lock(&sink->redo_mu);
    auto it = sink->failed_hand_offs.find(hand_off.tracker);
    // In order, an earlier record of the partition waits to be sent again:
    // this one got in ahead of it. It is sent again after it, so the output
    // reads as a replay from the failed record on, as after a restart,
    // rather than with the failed record moved behind later ones.
    if (hand_off.in_order && it != sink->failed_hand_offs.end() && !it->second.empty() &&
        *it->second.begin() < hand_off.offset && !hand_off.tracker->abandoned()) {
      if (!hand_off.failed_before) {
        hand_off.failed_before = true;
        it->second.insert(hand_off.offset);
      }
      sink->redo.push_back({std::move(hand_off), absl::Now(), {}});
      return;
    }
    sink->ForgetFailedHandOff(hand_off);
  }
  hand_off.tracker->Complete(hand_off.offset);
  if (hand_off.kind == Emission::kRetry) {
    sink->sent_to_retry.fetch_add(1, std::memory_order_relaxed);
  }
  if (hand_off.kind == Emission::kDeadLetter) {
    sink->dead_lettered.fetch_add(1, std::memory_order_relaxed);
  }
  sink->HandOffDone();
}

void Worker::OnHandOffFailed(const std::shared_ptr<Sink>& sink, HandOff hand_off,
                             const absl::Status& status) {
  const Emission kind = hand_off.kind;
  const std::string topic = hand_off.record.topic;
  // Purged at shutdown, or the partition moved: the next owner reads the
  // source record again, so there is nothing to re-send.
  const bool fatal = absl::IsInternal(status);
  if (!fatal && (hand_off.tracker->abandoned() || absl::IsCancelled(status))) {
    {
      absl::MutexLock lock(&sink->redo_mu);
      sink->ForgetFailedHandOff(hand_off);
    }
    sink->HandOffDone();
    return;
  }
  // The producer is unusable, or the topic is gone or forbidden (after
  // librdkafka's own retries): no record can get through, so waiting would
  // only hide it. The thread fails; its partitions go to another member
  // from the last committed offset, which is below this record.
  if (fatal || absl::IsNotFound(status) || absl::IsPermissionDenied(status) ||
      (absl::IsInvalidArgument(status) && hand_off.fit >= 2)) {
    const std::string reason =
        absl::StrCat(EmissionName(kind), " hand-off of ", hand_off.origin.original_topic, "/",
                     hand_off.origin.original_partition, "@", hand_off.origin.original_offset,
                     " to ", topic, " failed for good: ", status.message());
    if (!sink->has_failed()) LogError("thread ", sink->id(), ": ", reason, "; the thread fails");
    sink->Fail(reason);
    sink->HandOffDone();
    return;
  }
  const absl::Time now = absl::Now();
  Redo redo;
  redo.not_before = now + kRedoDelay;
  if (absl::IsInvalidArgument(status)) {
    redo.refused = std::string(status.message());
    redo.not_before = now;  // Nothing to wait for: the record changes.
  }
  if (!sink->has_failed()) sink->SetLastError(std::string(status.message()));
  size_t waiting = 0;
  {
    absl::MutexLock lock(&sink->redo_mu);
    if (!hand_off.failed_before) {
      hand_off.failed_before = true;
      sink->failed_hand_offs[hand_off.tracker].insert(hand_off.offset);
    }
    redo.hand_off = std::move(hand_off);
    sink->redo.push_back(std::move(redo));
    waiting = sink->redo.size();
  }
  // A refused record is logged when it is replaced (DrainRedo).
  if (int64_t held_back = 0;
      !absl::IsInvalidArgument(status) && sink->redo_log.Allow(now, &held_back)) {
    LogWarning("thread ", sink->id(), ": ", EmissionName(kind), " hand-off to ", topic,
               " failed (", status.message(), "); sending it again (", waiting,
               " waiting to be sent again)", LogThrottle::HeldBackNote(held_back));
  }
}

Worker::HandOff Worker::FittedDeadLetter(HandOff hand_off, const std::string& why) const {
  const size_t refused_size = RecordWireSize(hand_off.record);
  if (hand_off.unfitted == nullptr) {
    // The first refusal: the record to fit is the dead-letter record the
    // source deserves, with the refusal added to why it got there.
    RetryMetadata meta = hand_off.origin;
    // A retry record carries the attempt to make next; the DLQ, those made.
    if (hand_off.kind == Emission::kRetry) meta.attempt -= 1;
    meta.due_ms = NowMs();
    if (meta.first_failure_ms == 0) meta.first_failure_ms = meta.due_ms;
    const std::string refused = absl::StrCat(EmissionName(hand_off.kind),
                                             " record refused by Kafka (", why, ")");
    meta.error = meta.error.empty() ? refused : absl::StrCat(meta.error, "; ", refused);
    auto unfitted = std::make_shared<OutgoingRecord>();
    unfitted->topic = context_.options->dead_letter_topic;
    unfitted->key = std::move(hand_off.record.key);
    unfitted->value = std::move(hand_off.record.value);
    unfitted->headers = WithRetryHeaders(hand_off.record.headers, meta);
    hand_off.unfitted = std::move(unfitted);
  }
  hand_off.fit += 1;
  hand_off.record = FitDeadLetter(*hand_off.unfitted,
                                  static_cast<size_t>(context_.producer->max_message_bytes()));
  // Under the client's limit already, yet refused (the broker's limit is
  // lower): only the smallest form can help.
  if (hand_off.fit < 2 && RecordWireSize(hand_off.record) >= refused_size) hand_off.fit = 2;
  if (hand_off.fit >= 2) {
    hand_off.record = FitDeadLetter(*hand_off.unfitted, kMinimalDeadLetterBytes);
  }
  hand_off.kind = Emission::kDeadLetter;
  return hand_off;
}

void Worker::DrainRedo(bool force) {
  std::vector<Redo> ready;
  {
    absl::MutexLock lock(&sink_->redo_mu);
    const absl::Time now = absl::Now();
    // In order, once one of a partition's hand-offs is due, all of that
    // partition's go, in offset order: a replay must follow the re-send of
    // the record it overtook.
    std::set<CompletionTracker*> due_in_order;
    for (const Redo& redo : sink_->redo) {
      if (redo.hand_off.in_order && (force || redo.not_before <= now)) {
        due_in_order.insert(redo.hand_off.tracker.get());
      }
    }
    for (auto it = sink_->redo.begin(); it != sink_->redo.end();) {
      if (force || it->not_before <= now || due_in_order.contains(it->hand_off.tracker.get())) {
        ready.push_back(std::move(*it));
        it = sink_->redo.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::stable_sort(ready.begin(), ready.end(), [](const Redo& a, const Redo& b) {
    return std::make_pair(a.hand_off.tracker.get(), a.hand_off.offset) <
           std::make_pair(b.hand_off.tracker.get(), b.hand_off.offset);
  });
  for (Redo& redo : ready) {
    sink_->HandOffDone();
    HandOff& h = redo.hand_off;
    if (h.tracker->abandoned()) {
      absl::MutexLock lock(&sink_->redo_mu);
      sink_->ForgetFailedHandOff(h);
      continue;
    }
    if (!redo.refused.empty()) {
      LogWarning("thread ", id_, ": ", h.origin.original_topic, "/", h.origin.original_partition,
                 "@", h.origin.original_offset, ": Kafka refused its ", EmissionName(h.kind),
                 " record (", redo.refused, "); dead-lettering it cut to fit");
      Emit(FittedDeadLetter(std::move(h), redo.refused));
      continue;
    }
    Emit(std::move(h));
  }
}

bool Worker::HandOffsBroken() {
  if (absl::Status fatal = context_.producer->FatalError(); !fatal.ok() && !sink_->has_failed()) {
    LogError("thread ", id_, ": ", fatal.message(), "; the thread fails");
    sink_->Fail(std::string(fatal.message()));
  }
  if (!sink_->has_failed()) return false;
  // Waiting for hand-offs at the revoke would wait for the one that failed.
  graceful_.store(false, std::memory_order_relaxed);
  return true;
}

void Worker::ReleaseRecovered() {
  if (waiting_.empty()) return;
  std::vector<TopicPartition> ready;
  for (const auto& [tp, queue] : waiting_) {
    if (scheduler_.CountFor(tp) > 0) continue;
    auto it = trackers_.find(tp);
    if (it != trackers_.end() && sink_->FailedHandOffs(it->second) == 0) ready.push_back(tp);
  }
  for (const TopicPartition& tp : ready) DrainWaiting(tp);
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
    const int64_t held = HeldRecords(tp);
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
  if (!lost && graceful_.load(std::memory_order_relaxed)) {
    AwaitHandOffs(partitions,
                  absl::Now() + absl::Milliseconds(context_.options->shutdown_timeout_ms));
  }
  if (!lost) {
    kafka::CommitOffsets offsets;
    for (const TopicPartition& tp : partitions) {
      auto it = trackers_.find(tp);
      if (it == trackers_.end()) continue;
      const int64_t offset = it->second->CommitOffset();
      if (offset >= 0) offsets.push_back({tp, offset});
    }
    if (absl::Status s = consumer_->Commit(offsets, /*async=*/false); !s.ok()) {
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
