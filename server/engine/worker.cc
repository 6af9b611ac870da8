#include "server/engine/worker.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/handoff/done_above.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/ordering/in_place_retry.h"

namespace retryd {
namespace {

constexpr absl::Duration kMaxPollWait = absl::Milliseconds(200);
// At most this many records are taken from the consumer per loop turn (see
// PollBatch), within kMaxRound.
constexpr int kMaxBatch = 500;
constexpr absl::Duration kRedoDelay = absl::Seconds(1);
// How long an assignment may wait for the group's committed metadata.
constexpr absl::Duration kCommittedTimeout = absl::Seconds(10);
// The most ranges of complete records above a commit that it carries
// (EncodeDoneAbove also keeps to kMaxDoneMetadataBytes).
constexpr size_t kMaxDoneRanges = 128;
// A quiesced retry thread resumes on its own after this long, should the
// rebalance it was quiesced for never come.
constexpr absl::Duration kMaxQuiesce = absl::Seconds(60);
// How long one round may process held records before the thread polls
// again (heartbeats and max.poll.interval.ms depend on it). A round may
// overrun by one processor call.
constexpr absl::Duration kMaxRound = absl::Milliseconds(200);
// How far past its stop deadline a worker may go to commit what its
// hand-offs completed (kStopGrace / 2) and then leave its group.
constexpr absl::Duration kStopGrace = absl::Seconds(2);
// Key order: how long a primary may wait, at an assignment, to learn the
// keys parked in the retry topic, and how often it tries again after a
// failure; how often it looks for keys released by another process.
constexpr absl::Duration kLearnTimeout = absl::Seconds(10);
constexpr absl::Duration kLearnRetry = absl::Seconds(1);
constexpr absl::Duration kSweepInterval = absl::Seconds(2);
constexpr absl::Duration kSweepTimeout = absl::Milliseconds(500);

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

Worker::Worker(int id, ThreadRole role, const WorkerContext& context)
    : id_(id),
      role_(role),
      context_(context),
      mailbox_(std::make_shared<Mailbox>(id, role, context.options->max_in_flight / 2 + 1,
                                         context.parking)),
      hand_offs_(*context.options, *context.producer, mailbox_),
      backoff_(context.options->retry.backoff, BackoffSeed(*context.options, id)),
      max_calls_(context.processor->asynchronous()
                     ? std::max(1, context.processor->max_concurrent_calls())
                     : 1) {}

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
    mailbox_->SetState(ThreadState::kFailed);
    mailbox_->SetLastError(consumer.status().ToString());
    return consumer.status();
  }
  consumer_ = *std::move(consumer);
  {
    absl::MutexLock lock(&mailbox_->call_mu);
    mailbox_->wake = consumer_.get();
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void Worker::RequestStop(bool graceful, absl::Time deadline) {
  graceful_.store(graceful, std::memory_order_relaxed);
  stop_deadline_ns_.store(absl::ToUnixNanos(deadline), std::memory_order_relaxed);
  stop_requested_.store(true, std::memory_order_release);
  // Wakes a WaitForAcks in progress, which re-checks stop_requested_.
  absl::MutexLock lock(&mailbox_->flight_mu);
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

bool Worker::InOrder() const {
  return role_ == ThreadRole::kPrimary &&
         context_.ordering->load(std::memory_order_relaxed) == Ordering::kInOrder;
}

bool Worker::KeyOrder() const {
  return context_.ordering->load(std::memory_order_relaxed) == Ordering::kKey;
}

int64_t Worker::QueuedRecords(const TopicPartition& tp) const {
  int64_t n = static_cast<int64_t>(scheduler_.CountFor(tp));
  if (auto it = waiting_.find(tp); it != waiting_.end())
    n += static_cast<int64_t>(it->second.size());
  return n;
}

int64_t Worker::HeldRecords(const TopicPartition& tp) const {
  int64_t n = QueuedRecords(tp);
  if (auto it = lane_held_.find(tp); it != lane_held_.end()) n += it->second;
  return n;
}

int64_t Worker::HeldCount(const TopicPartition& tp) const {
  int64_t n = QueuedRecords(tp);
  if (InOrder()) {
    if (auto it = trackers_.find(tp); it != trackers_.end())
      n += mailbox_->FailedHandOffs(it->second);
    if (auto it = calling_.find(tp); it != calling_.end()) n += it->second;
  }
  return n;
}

bool Worker::CanCall(const TopicPartition& tp) const {
  return !AtCallLimit() && !(InOrder() && calling_.contains(tp));
}

void Worker::Run() {
  SetThreadName(absl::StrCat(ThreadRoleName(role_), "-", id_));
  const absl::Duration commit_interval = absl::Milliseconds(context_.options->commit_interval_ms);
  next_commit_ = absl::Now() + commit_interval;
  bool failed = false;
  while (!stop_requested_.load(std::memory_order_acquire)) {
    ServeCheckpoint();
    TakeFinishedCalls();
    ServeRequests(/*serving=*/true);
    if (HandOffsBroken()) {
      failed = true;
      break;
    }
    hand_offs_.DrainRedo(/*force=*/false, InOrder());
    hand_offs_.FreeDone();
    if (role_ == ThreadRole::kPrimary && KeyOrder()) {
      if (!keys_unknown_.empty() && absl::Now() >= next_learn_) LearnParkedKeys();
      if (absl::Now() >= next_sweep_) SweepParkedKeys();
    }
    if (role_ == ThreadRole::kRetry) {
      if (KeyOrder() && !key_order_seen_) AdoptLanes();
      key_order_seen_ = KeyOrder();
    }
    ReleaseRecovered();
    WaitForAcks();
    if (!quiesced_) ProcessDue(absl::Now() + kMaxRound);
    if (absl::Now() >= next_commit_) {
      Commit();
      UpdateGauges();
      next_commit_ = absl::Now() + commit_interval;
    }
    ReconcilePauses();

    // A due record shortens the wait only if it can start: at the call
    // limit it waits for a call to end, whose outcome wakes the poll (see
    // Attempt); polling at once instead would spin, starving those calls.
    absl::Duration wait = kMaxPollWait;
    if (std::optional<int64_t> due = scheduler_.NextDueMs(); due && !quiesced_ && !AtCallLimit()) {
      wait = std::clamp(absl::Milliseconds(*due - NowMs()), absl::ZeroDuration(), kMaxPollWait);
    }
    // Cut short by the round's deadline: the lanes go on at once.
    if (!lanes_ready_.empty() && !quiesced_ && !AtCallLimit()) wait = absl::ZeroDuration();
    absl::StatusOr<int> polled = PollBatch(wait);
    mailbox_->counters.Add(&Counters::polls);
    if (!polled.ok()) {
      LogError("thread ", id_, " stops: ", polled.status().message());
      mailbox_->SetLastError(std::string(polled.status().message()));
      failed = true;
      break;
    }
    if (*polled > 0) {
      mailbox_->SetState(ThreadState::kRunning);
    } else if (!mailbox_->joined.HasBeenNotified()) {
      // Still joining the group: stays STARTING.
    } else if (context_.gate->down(role_)) {
      // Its partitions paused while records wait for a probe; open while
      // none does, so that one comes to be the probe.
      mailbox_->SetState(ThreadState::kWaitingDownstream);
    } else if (scheduler_.size() > 0) {
      mailbox_->SetState(ThreadState::kWaitingBackoff);
    } else if (!paused_.empty() && paused_.size() == trackers_.size()) {
      mailbox_->SetState(ThreadState::kPaused);
    } else {
      mailbox_->SetState(ThreadState::kIdle);
    }
  }
  mailbox_->SetState(ThreadState::kStopping);
  {
    // Close() gives up the queue that Wake() signals; OnRevoked waits for
    // calls on call_mu itself.
    absl::MutexLock lock(&mailbox_->call_mu);
    mailbox_->wake = nullptr;
  }
  ServeRequests(/*serving=*/false);
  // Close() revokes every partition: OnRevoked waits for the hand-offs (when
  // graceful) and commits before the group gets them back. Bounded: with the
  // broker unreachable, leaving the group would block for a long time.
  const absl::Time stop_deadline =
      std::min(absl::Now() + absl::Milliseconds(context_.options->shutdown_timeout_ms),
               absl::FromUnixNanos(stop_deadline_ns_.load(std::memory_order_relaxed)));
  if (absl::Status s = consumer_->Close(stop_deadline + kStopGrace); !s.ok()) {
    LogWarning("thread ", id_, ": ", s.message());
  }
  // No call may outlive the worker (the processor may go right after).
  AwaitCalls(nullptr, absl::Now());
  AwaitCalls(nullptr, absl::Now() + kStopGrace);
  if (!calls_.empty()) {
    LogWarning("thread ", id_, ": ", calls_.size(), " processor calls did not end when cancelled");
  }
  UpdateGauges();
  mailbox_->SetState(failed ? ThreadState::kFailed : ThreadState::kStopped);
  if (!mailbox_->joined.HasBeenNotified()) mailbox_->joined.Notify();
}

absl::StatusOr<int> Worker::PollBatch(absl::Duration wait) {
  absl::StatusOr<std::optional<Record>> polled = consumer_->Poll(wait);
  if (!polled.ok()) return polled.status();
  if (!polled->has_value()) return 0;
  int taken = 0;
  const absl::Time deadline = absl::Now() + kMaxRound;
  while (true) {
    const TopicPartition tp = (*polled)->tp();
    HandleConsumed(tp, std::move(**polled));
    ++taken;
    // Back to the loop's housekeeping as soon as it has something to do
    // that a record can bring about: a pause (back-pressure, a partition's
    // look-ahead full, a drain, a checkpoint, the downstream down), a call
    // slot to free, a stop.
    if (taken >= kMaxBatch || stop_requested_.load(std::memory_order_relaxed) || quiesced_ ||
        AtCallLimit() || LookaheadFull(tp) || OverBudget() ||
        mailbox_->in_flight.load(std::memory_order_relaxed) >= context_.options->max_in_flight ||
        absl::Now() >= deadline) {
      break;
    }
    polled = consumer_->Poll(absl::ZeroDuration());
    if (!polled.ok()) return polled.status();
    if (!polled->has_value()) break;
  }
  return taken;
}

void Worker::HandleConsumed(const TopicPartition& tp, Record record) {
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
  const int64_t read_ms = NowMs();
  // Completed by the previous owner, above its commit: not processed again.
  const bool done_before = DoneBefore(tp, record.offset);
  if (role_ == ThreadRole::kPrimary && done_before) {
    tracker->Complete(record.offset);
    return;
  }
  ByteCharge charge = hand_offs_.Charge(RecordBytes(record));
  if (role_ == ThreadRole::kPrimary) {
    // In order it waits behind the held record of its partition; in any
    // mode behind those already waiting for a call slot. Not behind a
    // record the downstream refused: that one waits alone (in key order,
    // with the records of its key behind it in its lane).
    const bool behind = InOrder() ? HeldCount(tp) > 0 : waiting_.contains(tp);
    if (behind || !CanCall(tp) || keys_unknown_.contains(tp)) {
      waiting_[tp].push_back({std::move(record), read_ms, std::move(charge)});
      return;
    }
    HeldRecord held;
    held.charge = std::move(charge);
    held.source = tp;
    held.source_offset = record.offset;
    held.read_ms = read_ms;
    held.attempt = 1;
    held.record = std::move(record);
    if (RestoreInPlaceRetry(held) && InOrder()) {
      const int64_t now = NowMs();
      ClampDue(held, now);
      if (held.due_ms > now) {
        HoldInPlace(std::move(held));
        return;
      }
    }
    if (!TakenByItsKey(held)) Attempt(std::move(held));
    return;
  }
  absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(record.headers);
  if (!meta.ok()) {
    if (done_before) {
      tracker->Complete(record.offset);
    } else {
      DeadLetterMalformed(record, tracker, meta.status());
    }
    return;
  }
  HeldRecord held;
  held.charge = std::move(charge);
  held.source = tp;
  held.source_offset = record.offset;
  held.read_ms = read_ms;
  held.attempt = meta->attempt;
  held.first_failure_ms = meta->first_failure_ms;
  held.due_ms = meta->due_ms;
  held.last_error = std::move(meta->error);
  held.refused_last_attempt = DownstreamGate::IsRefusalReason(held.last_error);
  held.record.topic = std::move(meta->original_topic);
  held.record.partition = meta->original_partition;
  held.record.offset = meta->original_offset;
  held.record.timestamp_ms = meta->original_timestamp_ms;
  held.record.key = std::move(record.key);
  held.record.value = std::move(record.value);
  held.record.headers = StripRetrydHeaders(record.headers);
  if (done_before) {
    // Its outcome is durable: its key is released as it was then.
    if (held.record.key.has_value()) {
      context_.parking->Release(KeyOf(held.record), held.record.offset);
    }
    tracker->Complete(held.source_offset);
    return;
  }
  const int64_t now = NowMs();
  ClampDue(held, now);
  if (TakenByItsKey(held)) return;
  // Quiesced for a rebalance: read, but processed only after it.
  if (held.due_ms <= now && !quiesced_ && !AtCallLimit()) {
    Attempt(std::move(held));
  } else {
    scheduler_.Add(std::move(held));
    mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
  }
}

void Worker::ClampDue(HeldRecord& held, int64_t now_ms) {
  // No record waits longer than the longest backoff from when it is read: a
  // due time further out (a foreign writer, a skewed clock, a lowered
  // backoff.max_ms since it was written) would pin the partition's commit.
  const int64_t latest = now_ms + context_.options->retry.backoff.max_ms;
  if (held.due_ms <= latest) return;
  const int64_t was = held.due_ms;
  held.due_ms = latest;
  mailbox_->counters.Add(&Counters::due_clamped);
  if (int64_t held_back = 0; clamp_log_.Allow(absl::Now(), &held_back)) {
    LogWarning("thread ", id_, ": ", held.source.topic, "/", held.source.partition, "@",
               held.source_offset, " was due at ", was, " ms, more than retry.backoff.max_ms (",
               context_.options->retry.backoff.max_ms, ") from now; it is due at ", latest,
               " instead", LogThrottle::HeldBackNote(held_back));
  }
}

void Worker::RecordEndToEnd(const HeldRecord& held, absl::Time now) {
  if (held.record.timestamp_ms < 0) return;
  mailbox_->end_to_end_latency.Record(now - absl::FromUnixMillis(held.record.timestamp_ms));
}

void Worker::Attempt(HeldRecord held) {
  const absl::Time now = absl::Now();
  held.waiting = ByteCharge();  // No longer waiting: the gate counts the others.
  // The record's identity (a hash of its topic) only matters while the
  // role is down: not computed for every record while it is up.
  const DownstreamGate::Admission admission =
      !context_.gate->down(role_)
          ? DownstreamGate::Admission::kCall
          : context_.gate->Admit(role_,
                                 DownstreamGate::RecordId(held.record.topic, held.record.partition,
                                                          held.record.offset),
                                 now);
  if (admission == DownstreamGate::Admission::kWait) {
    Defer(std::move(held), now);
    return;
  }
  const bool probe = admission == DownstreamGate::Admission::kProbe;
  mailbox_->counters.Add(&Counters::processed);
  if (!context_.processor->asynchronous()) {
    Outcome outcome = context_.processor->Process(held.record, held.attempt);
    Conclude(std::move(held), std::move(outcome), now, probe);
    return;
  }
  const int64_t id = next_call_id_++;
  Call& call = calls_[id];
  call.tracker = trackers_.at(held.source);
  call.cancel = std::make_shared<Cancellation>();
  call.started = now;
  call.probe = probe;
  call.held = std::move(held);
  ++calling_[call.held.source];
  mailbox_->calls_in_flight.store(static_cast<int64_t>(calls_.size()), std::memory_order_relaxed);
  std::shared_ptr<Mailbox> sink = mailbox_;
  context_.processor->Start(call.held.record, {call.held.attempt, call.held.first_failure_ms},
                            call.cancel, [sink, id](Outcome outcome) {
                              absl::MutexLock lock(&sink->call_mu);
                              sink->finished_calls.emplace_back(id, std::move(outcome));
                              if (sink->wake != nullptr) sink->wake->Wake();
                            });
}

void Worker::TakeFinishedCalls() {
  std::vector<std::pair<int64_t, Outcome>> finished;
  {
    absl::MutexLock lock(&mailbox_->call_mu);
    finished.swap(mailbox_->finished_calls);
  }
  for (auto& [id, outcome] : finished) {
    auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    Call call = std::move(it->second);
    calls_.erase(it);
    const TopicPartition tp = call.held.source;
    if (auto c = calling_.find(tp); c != calling_.end() && --c->second <= 0) calling_.erase(c);
    // Cancelled by retryd (a stop, a revoke): the record is read again by
    // whoever owns its partition next, and uses up no attempt.
    if (call.cancel->cancelled() || call.tracker->abandoned()) {
      if (call.probe) context_.gate->OnProbeAbandoned(role_);
      continue;
    }
    Conclude(std::move(call.held), std::move(outcome), call.started, call.probe);
    if (waiting_.contains(tp)) ready_.insert(tp);
  }
  mailbox_->calls_in_flight.store(static_cast<int64_t>(calls_.size()), std::memory_order_relaxed);
}

bool Worker::CallsInFlight(const std::vector<TopicPartition>* tps) const {
  if (tps == nullptr) return !calls_.empty();
  return std::any_of(tps->begin(), tps->end(),
                     [this](const TopicPartition& tp) { return calling_.contains(tp); });
}

void Worker::AwaitCalls(const std::vector<TopicPartition>* tps, absl::Time deadline,
                        bool cancel_rest) {
  Mailbox* sink = mailbox_.get();
  auto finished = [sink]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink->call_mu) {
    return !sink->finished_calls.empty();
  };
  while (CallsInFlight(tps) && absl::Now() < deadline) {
    {
      absl::MutexLock lock(&mailbox_->call_mu);
      mailbox_->call_mu.AwaitWithDeadline(absl::Condition(&finished), deadline);
    }
    TakeFinishedCalls();
  }
  if (!cancel_rest) return;
  for (auto& [id, call] : calls_) {
    if (tps == nullptr || std::find(tps->begin(), tps->end(), call.held.source) != tps->end()) {
      call.cancel->Cancel();
    }
  }
}

void Worker::Defer(HeldRecord held, absl::Time now) {
  held.due_ms = absl::ToUnixMillis(context_.gate->RetryAt(role_, now));
  held.deferred = true;
  held.waiting = context_.gate->CountWaiting(role_);
  if (InOrder()) {
    HoldInPlace(std::move(held));
    return;
  }
  scheduler_.Add(std::move(held));
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
}

void Worker::Conclude(HeldRecord held, Outcome outcome, absl::Time started, bool probe) {
  const absl::Time finished = absl::Now();  // One clock read for both latencies.
  mailbox_->processing_latency.Record(finished - started);
  DownstreamGate& gate = *context_.gate;
  if (outcome.kind == Outcome::Kind::kUnavailable) {
    if (held.refused_at_answers < 0) held.refused_at_answers = gate.answers();
    DownstreamGate::Verdict verdict = gate.Refused(
        role_,
        {.id =
             DownstreamGate::RecordId(held.record.topic, held.record.partition, held.record.offset),
         .refused_before = held.refused_before && held.refused_epoch == gate.outage_epoch(),
         .refused_last_attempt = held.refused_last_attempt,
         .answers_since = gate.answers() - held.refused_at_answers},
        probe, outcome.reason, finished);
    if (verdict.mark && !(held.refused_before && held.refused_epoch == verdict.epoch)) {
      held.refused_before = true;
      held.refused_epoch = verdict.epoch;
    }
    if (!verdict.own) {
      mailbox_->counters.Add(&Counters::unavailable);
      mailbox_->SetLastError(outcome.reason);
      Defer(std::move(held), finished);
      return;
    }
    // The record's own failure after all (a failed attempt), judged as the
    // processor's table says.
    outcome.kind = outcome.fallback;
    outcome.reason = std::move(verdict.reason);
  } else {
    gate.OnAnswered(role_, probe, finished);
  }
  switch (outcome.kind) {
    case Outcome::Kind::kOk:
      mailbox_->counters.Add(&Counters::succeeded);
      RecordEndToEnd(held, finished);
      OnSuccess(held, outcome);
      return;
    case Outcome::Kind::kPermanent:
    case Outcome::Kind::kUnavailable:  // As a fallback it means nothing: permanent.
      mailbox_->counters.Add(&Counters::failed_attempts);
      mailbox_->SetLastError(outcome.reason);
      RecordEndToEnd(held, finished);
      DeadLetter(held, absl::StrCat("permanent failure: ", outcome.reason));
      return;
    case Outcome::Kind::kRetriable:
      mailbox_->counters.Add(&Counters::failed_attempts);
      mailbox_->SetLastError(outcome.reason);
      OnRetriableFailure(std::move(held), std::move(outcome.reason));
      return;
  }
}

void Worker::OnSuccess(HeldRecord& held, Outcome& outcome) {
  const std::shared_ptr<CompletionTracker>& tracker = trackers_.at(held.source);
  const std::string& output_topic = context_.options->output_topic;
  EndOfLane(held);
  if (output_topic.empty()) {
    if (std::optional<ParkedRecord> parked = ParkedRecordOf(role_, held)) {
      context_.parking->Release(parked->key, parked->offset);
    }
    tracker->Complete(held.source_offset);
    return;
  }
  HandOff h = OutputHandOff(role_, held, outcome, output_topic);
  h.tracker = tracker;
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
  held.deferred = false;
  // Each attempt judges its refusals anew.
  held.refused_before = false;
  held.refused_at_answers = -1;
  held.refused_last_attempt = DownstreamGate::IsRefusalReason(held.last_error);
  if (InOrder()) {
    HoldInPlace(std::move(held));
    return;
  }
  ByteCharge sent_back;
  if (role_ == ThreadRole::kRetry && !MaySendBack(held, &sent_back)) {
    // In place, so the retry topic keeps the key's records in input order;
    // the records of its key wait behind it in its lane.
    scheduler_.Add(std::move(held));
    mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
    return;
  }
  std::optional<ParkedRecord> parks;
  if (held.laned && KeyOrder()) {
    // Parked before the lane moves on, so the records waiting behind it
    // follow it.
    parks = ParkedRecord{KeyOf(held.record), held.record.offset, absl::Now()};
    context_.parking->Park(parks->key, parks->offset, parks->since);
  }
  EndOfLane(held);
  HandOff h = ToRetryTopic(std::move(held), HandOffKind::kRetry);
  h.parks = std::move(parks);
  h.sent_back = std::move(sent_back);
  Emit(std::move(h));
}

bool Worker::MaySendBack(const HeldRecord& held, ByteCharge* counted) const {
  if (held.laned) return false;
  if (role_ != ThreadRole::kRetry || !held.record.key.has_value()) return true;
  // Counted before the flag is read, the engine reads the count after it
  // sets the flag: either this thread sees the flag, or the engine sees
  // the count and waits for the record to be acknowledged.
  ByteCharge count(context_.keyed_sends_back, 1);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (KeyOrder() || context_.key_order_coming->load(std::memory_order_relaxed)) return false;
  *counted = std::move(count);
  return true;
}

bool Worker::TakenByItsKey(HeldRecord& held) {
  if (!KeyOrder() || !held.record.key.has_value()) return false;
  PartitionKey key = KeyOf(held.record);
  if (auto it = lanes_.find(key); it != lanes_.end()) {
    ++lane_held_[held.source];
    it->second.waiting.push_back(std::move(held));
    return true;
  }
  if (role_ == ThreadRole::kPrimary && context_.parking->FollowIfParked(key, held.record.offset)) {
    Follow(std::move(held));
    return true;
  }
  lanes_.emplace(std::move(key), KeyLane{held.source, {}});
  held.laned = true;
  return false;
}

void Worker::Follow(HeldRecord held) {
  // Not yet attempted: the retry thread makes its first attempt, after the
  // records of its key before it.
  held.due_ms = NowMs();
  held.last_error = "follows an earlier record of its key (key order)";
  const ParkedRecord parks{KeyOf(held.record), held.record.offset, absl::Now()};
  HandOff h = ToRetryTopic(std::move(held), HandOffKind::kFollow);
  h.parks = parks;
  Emit(std::move(h));
}

void Worker::EndOfLane(const HeldRecord& held) {
  if (!held.laned) return;
  auto it = lanes_.find(KeyOf(held.record));
  if (it == lanes_.end()) return;
  if (it->second.waiting.empty()) {
    lanes_.erase(it);
  } else {
    lanes_ready_.insert(it->first);
  }
}

bool Worker::DrainLanes(absl::Time deadline) {
  bool progressed = false;
  for (auto key_it = lanes_ready_.begin();
       key_it != lanes_ready_.end() && !AtCallLimit() && absl::Now() < deadline;) {
    auto lane = lanes_.find(*key_it);
    key_it = lanes_ready_.erase(key_it);
    // Its next record is the key's record in progress, unless (a primary's)
    // its key was parked meanwhile: then it and all behind it follow.
    while (lane != lanes_.end() && !lane->second.waiting.empty()) {
      HeldRecord next = std::move(lane->second.waiting.front());
      lane->second.waiting.pop_front();
      if (int64_t& n = lane_held_[next.source]; --n <= 0) lane_held_.erase(next.source);
      progressed = true;
      if (role_ == ThreadRole::kPrimary &&
          context_.parking->FollowIfParked(lane->first, next.record.offset)) {
        Follow(std::move(next));
        continue;
      }
      next.laned = true;
      const int64_t now = NowMs();
      if (role_ == ThreadRole::kRetry) ClampDue(next, now);
      if (next.due_ms <= now) {
        Attempt(std::move(next));
      } else {
        scheduler_.Add(std::move(next));
      }
      lane = lanes_.end();  // In progress again: done with it here.
    }
    if (lane != lanes_.end()) lanes_.erase(lane);
  }
  return progressed;
}

HandOff Worker::ToRetryTopic(HeldRecord held, HandOffKind kind) const {
  const TopicPartition source = held.source;
  HandOff h = RetryHandOff(std::move(held), kind, context_.options->retry.topic);
  h.tracker = trackers_.at(source);
  return h;
}

void Worker::HoldInPlace(HeldRecord held) {
  // Retried in place: records behind it wait until it completes, and its
  // state rides along with every commit (see ordering/in_place_retry.h).
  in_place_[held.source] = {held.source_offset, held.attempt, held.first_failure_ms, held.due_ms};
  scheduler_.Add(std::move(held));
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
}

bool Worker::RestoreInPlaceRetry(HeldRecord& held) {
  auto it = restored_.find(held.source);
  if (it == restored_.end()) return false;
  // Only the first record read after the assignment can be the one the
  // metadata describes.
  const InPlaceRetry state = it->second;
  restored_.erase(it);
  if (state.offset != held.source_offset) return false;
  held.attempt = state.attempt;
  held.first_failure_ms = state.first_failure_ms;
  held.due_ms = state.due_ms;
  LogInfo("thread ", id_, ": ", held.source.topic, "/", held.source.partition, "@",
          held.source_offset, " resumes at attempt ", held.attempt, " (from committed metadata)");
  return true;
}

bool Worker::DoneBefore(const TopicPartition& tp, int64_t offset) {
  auto it = done_before_.find(tp);
  if (it == done_before_.end()) return false;
  std::vector<std::pair<int64_t, int64_t>>& ranges = it->second;
  // Ranges in increasing order, records too: those passed are used up.
  auto passed = std::find_if(ranges.begin(), ranges.end(),
                             [offset](const auto& range) { return range.second >= offset; });
  ranges.erase(ranges.begin(), passed);
  const bool done = !ranges.empty() && ranges.front().first <= offset;
  if (ranges.empty()) done_before_.erase(it);
  return done;
}

void Worker::LearnParkedKeys() {
  const std::vector<TopicPartition> unknown(keys_unknown_.begin(), keys_unknown_.end());
  absl::StatusOr<std::vector<ParkedRecord>> parked = context_.read_parked(kLearnTimeout);
  if (!parked.ok()) {
    next_learn_ = absl::Now() + kLearnRetry;
    if (int64_t held_back = 0; learn_log_.Allow(absl::Now(), &held_back)) {
      LogWarning("thread ", id_, ": key order: the parked keys of ", unknown.size(),
                 " partitions are not known (", parked.status().message(), "); their records wait",
                 LogThrottle::HeldBackNote(held_back));
    }
    return;
  }
  context_.parking->Replace(unknown, *parked);
  keys_unknown_.clear();
  // Records that arrived meanwhile wait in waiting_: they go on now.
  for (const TopicPartition& tp : unknown) {
    if (waiting_.contains(tp)) ready_.insert(tp);
  }
  LogInfo("thread ", id_, ": key order: learned the parked keys of ", unknown.size(),
          " partitions (", context_.parking->summary().keys, " keys parked in all)");
}

void Worker::AdoptLanes() {
  // A call in flight is its key's record in progress.
  for (auto& [id, call] : calls_) {
    HeldRecord& held = call.held;
    if (!held.record.key.has_value() || held.laned) continue;
    PartitionKey key = KeyOf(held.record);
    if (lanes_.try_emplace(std::move(key), KeyLane{held.source, {}}).second) held.laned = true;
  }
  std::vector<HeldRecord> held;
  for (const auto& [tp, tracker] : trackers_) {
    for (HeldRecord& h : scheduler_.TakePartition(tp)) held.push_back(std::move(h));
  }
  std::stable_sort(held.begin(), held.end(), [](const HeldRecord& a, const HeldRecord& b) {
    return a.record.offset < b.record.offset;
  });
  for (HeldRecord& h : held) {
    if (h.laned || !TakenByItsKey(h)) scheduler_.Add(std::move(h));
  }
}

void Worker::SweepParkedKeys() {
  next_sweep_ = absl::Now() + kSweepInterval;
  absl::StatusOr<std::map<int32_t, int64_t>> committed = context_.retry_committed(kSweepTimeout);
  // Not reached: the keys stay parked a little longer, which orders no
  // record wrongly.
  if (!committed.ok()) return;
  context_.parking->ReleaseCommitted(*committed);
}

void Worker::DeadLetter(const HeldRecord& held, std::string reason,
                        std::shared_ptr<WorkerRequest> requested_by) {
  EndOfLane(held);
  HandOff h = DeadLetterHandOff(role_, held, std::move(reason), context_.options->dead_letter_topic,
                                NowMs());
  h.tracker = trackers_.at(held.source);
  h.requested_by = std::move(requested_by);
  Emit(std::move(h));
}

void Worker::DeadLetterMalformed(const Record& record,
                                 const std::shared_ptr<CompletionTracker>& tracker,
                                 const absl::Status& why) {
  const std::string error = absl::StrCat("malformed retry record ", record.topic, "/",
                                         record.partition, "@", record.offset, ": ", why.message());
  LogWarning("thread ", id_, ": ", error, "; dead-lettering it");
  mailbox_->SetLastError(error);
  HandOff h =
      MalformedDeadLetterHandOff(record, error, context_.options->dead_letter_topic, NowMs());
  h.tracker = tracker;
  Emit(std::move(h));
}

void Worker::Emit(HandOff hand_off) { hand_offs_.Emit(std::move(hand_off), InOrder()); }

bool Worker::HandOffsBroken() {
  if (!hand_offs_.Broken()) return false;
  // Waiting for hand-offs at the revoke would wait for the one that failed.
  graceful_.store(false, std::memory_order_relaxed);
  return true;
}

void Worker::ReleaseRecovered() {
  if (waiting_.empty() || AtCallLimit()) return;
  std::vector<TopicPartition> ready;
  for (const auto& [tp, queue] : waiting_) {
    if ((InOrder() && scheduler_.CountFor(tp) > 0) || !CanCall(tp) || keys_unknown_.contains(tp))
      continue;
    auto it = trackers_.find(tp);
    if (it != trackers_.end() && mailbox_->FailedHandOffs(it->second) == 0) ready.push_back(tp);
  }
  ready_.insert(ready.begin(), ready.end());
}

void Worker::ProcessDue(absl::Time deadline) {
  // One record at a time, so a slow processor cannot keep the thread from
  // polling (and from its group) for longer than one call past `deadline`.
  bool progressed = true;
  while (progressed && absl::Now() < deadline && !AtCallLimit()) {
    progressed = false;
    std::vector<HeldRecord> due = scheduler_.PopDue(NowMs(), 1);
    if (!due.empty()) {
      const TopicPartition tp = due.front().source;
      in_place_.erase(tp);
      Attempt(std::move(due.front()));
      if (waiting_.contains(tp)) ready_.insert(tp);
      progressed = true;
    }
    progressed = DrainWaiting(deadline) || progressed;
    progressed = DrainLanes(deadline) || progressed;
  }
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
}

bool Worker::DrainWaiting(absl::Time deadline) {
  bool progressed = false;
  for (auto tp_it = ready_.begin(); tp_it != ready_.end() && absl::Now() < deadline;) {
    const TopicPartition& tp = *tp_it;
    auto it = waiting_.find(tp);
    // In order, a record held in place (scheduler_) holds its partition:
    // asked again after each record, which may be held in place itself.
    auto held_in_place = [&] { return InOrder() && scheduler_.CountFor(tp) > 0; };
    while (it != waiting_.end() && !it->second.empty() && !held_in_place() && CanCall(tp) &&
           absl::Now() < deadline) {
      std::deque<Waiting>& queue = it->second;
      HeldRecord held;
      held.source = tp;
      held.source_offset = queue.front().record.offset;
      held.read_ms = queue.front().read_ms;
      held.record = std::move(queue.front().record);
      held.charge = std::move(queue.front().charge);
      queue.pop_front();
      if (!TakenByItsKey(held)) Attempt(std::move(held));
      progressed = true;
    }
    if (it != waiting_.end() && it->second.empty()) {
      waiting_.erase(it);
      it = waiting_.end();
    }
    // Done with `tp` unless the deadline or the call limit cut its queue
    // short; its call's end brings it back.
    if (it == waiting_.end() || (InOrder() && scheduler_.CountFor(tp) > 0) ||
        (InOrder() && calling_.contains(tp))) {
      tp_it = ready_.erase(tp_it);
    } else {
      ++tp_it;
    }
  }
  return progressed;
}

void Worker::WaitForAcks() {
  constexpr absl::Duration kMaxWait = absl::Milliseconds(500);
  if (mailbox_->in_flight.load(std::memory_order_relaxed) < context_.options->max_in_flight) return;
  mailbox_->counters.Add(&Counters::backpressure_waits);
  const Mailbox* sink = mailbox_.get();
  const std::atomic<bool>* stop = &stop_requested_;
  auto relieved = [sink, stop] {
    return sink->in_flight.load(std::memory_order_relaxed) < sink->resume_below ||
           stop->load(std::memory_order_relaxed);
  };
  absl::MutexLock lock(&mailbox_->flight_mu);
  mailbox_->flight_mu.AwaitWithTimeout(absl::Condition(&relieved), kMaxWait);
}

bool Worker::LookaheadFull(const TopicPartition& tp) const {
  int64_t held =
      role_ == ThreadRole::kPrimary ? HeldCount(tp) : static_cast<int64_t>(scheduler_.CountFor(tp));
  if (auto it = lane_held_.find(tp); it != lane_held_.end()) held += it->second;
  return held >= context_.options->retry.lookahead;
}

void Worker::ReconcilePauses() {
  const int64_t in_flight = mailbox_->in_flight.load(std::memory_order_relaxed);
  if (in_flight >= context_.options->max_in_flight) {
    backpressure_ = true;
  } else if (in_flight < mailbox_->resume_below) {
    backpressure_ = false;
  }
  std::vector<TopicPartition> pause, resume;
  const bool input_paused =
      role_ == ThreadRole::kPrimary && context_.input_paused->load(std::memory_order_relaxed);
  const bool all = backpressure_ || input_paused || quiesced_ ||
                   context_.gate->IntakePaused(role_, absl::Now()) || OverBudget();
  for (const auto& [tp, tracker] : trackers_) {
    // In order, records behind a held one wait in `waiting_` rather than
    // pausing at once: a pause drops what was fetched and costs a fetch
    // round trip, far more than a short backoff. Both roles stop fetching
    // once `lookahead` records of a partition are held.
    const bool is = paused_.contains(tp);
    const bool want = all || keys_unknown_.contains(tp) || LookaheadFull(tp);
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

bool Worker::OverBudget() {
  const int64_t budget = context_.options->max_held_bytes;
  if (budget <= 0) return false;
  const int64_t held = mailbox_->held_bytes.load(std::memory_order_relaxed);
  if (!over_budget_ && held > budget) {
    over_budget_ = true;
    mailbox_->counters.Add(&Counters::budget_pauses);
  } else if (over_budget_ && held < budget / 4 * 3) {
    over_budget_ = false;
  }
  return over_budget_;
}

kafka::CommitOffsets Worker::CommitPoints(const std::vector<TopicPartition>& partitions) const {
  kafka::CommitOffsets points;
  for (const TopicPartition& tp : partitions) {
    auto it = trackers_.find(tp);
    if (it == trackers_.end()) continue;
    const int64_t offset = it->second->CommitOffset();
    if (offset < 0) continue;
    std::string metadata;
    if (auto held = in_place_.find(tp); held != in_place_.end() && held->second.offset == offset) {
      metadata = EncodeInPlaceRetry(held->second);
    } else {
      metadata = EncodeDoneAbove(offset, it->second->DoneAbove(kMaxDoneRanges));
    }
    points.push_back({tp, offset, std::move(metadata)});
  }
  return points;
}

std::vector<TopicPartition> Worker::Assigned() const {
  std::vector<TopicPartition> all;
  for (const auto& [tp, tracker] : trackers_) all.push_back(tp);
  return all;
}

absl::Status Worker::CommitNow(const kafka::CommitOffsets& offsets, absl::Time deadline) {
  if (offsets.empty()) return absl::OkStatus();
  if (absl::Status s = consumer_->CommitWithin(offsets, deadline); !s.ok()) return s;
  NoteCommitted(offsets);
  return absl::OkStatus();
}

void Worker::NoteCommitted(const kafka::CommitOffsets& offsets) {
  for (const kafka::PartitionOffset& o : offsets) committed_[o.tp] = o;
  mailbox_->counters.Add(&Counters::commits);
}

void Worker::Commit() {
  kafka::CommitOffsets offsets;
  for (kafka::PartitionOffset& point : CommitPoints(Assigned())) {
    // The metadata must be sent again with every commit, so a change of it
    // alone is worth one.
    const kafka::PartitionOffset& last = committed_[point.tp];
    if (point.offset > last.offset || point.metadata != last.metadata) {
      offsets.push_back(std::move(point));
    }
  }
  if (offsets.empty()) return;
  if (absl::Status s = consumer_->Commit(offsets, /*async=*/true); !s.ok()) {
    LogWarning("thread ", id_, ": ", s.message());
    return;
  }
  NoteCommitted(offsets);
}

void Worker::OnCommitFailed(const kafka::CommitOffsets& offsets) {
  for (const kafka::PartitionOffset& o : offsets) {
    // Forget it was committed, unless a later commit already went out.
    if (auto it = committed_.find(o.tp); it != committed_.end() && it->second.offset == o.offset) {
      it->second.offset = -1;
    }
  }
}

void Worker::UpdateGauges() {
  // Where each partition's reading began, as far as this thread knows: the
  // offset committed (by it, or before its assignment for a primary).
  kafka::CommitOffsets assigned;
  int64_t waiting = 0;
  for (const auto& [tp, tracker] : trackers_) {
    auto committed = committed_.find(tp);
    assigned.push_back({tp, committed != committed_.end() ? committed->second.offset : -1, ""});
  }
  for (const auto& [tp, queue] : waiting_) waiting += static_cast<int64_t>(queue.size());
  mailbox_->lag.store(consumer_->Lag(assigned), std::memory_order_relaxed);
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()) + waiting,
                            std::memory_order_relaxed);
  int64_t parked = 0;
  for (const auto& [tp, n] : lane_held_) parked += n;
  mailbox_->parked.store(parked, std::memory_order_relaxed);
}

void Worker::OnAssigned(const std::vector<TopicPartition>& partitions) {
  for (const TopicPartition& tp : partitions) {
    trackers_[tp] = std::make_shared<CompletionTracker>();
    committed_[tp] = {tp, -1, ""};
  }
  if (!partitions.empty()) {
    // A record retried in place by the previous owner resumes where it was;
    // the records it completed above its commit are not processed again.
    absl::StatusOr<kafka::CommitOffsets> committed =
        consumer_->Committed(partitions, kCommittedTimeout);
    if (!committed.ok()) {
      LogWarning("thread ", id_, ": ", committed.status().message(),
                 "; records retried in place start again at attempt 1, and records complete "
                 "above the committed offsets are processed again");
    } else {
      for (const kafka::PartitionOffset& c : *committed) {
        if (auto done = DecodeDoneAbove(c.metadata, c.offset); !done.empty()) {
          done_before_[c.tp] = std::move(done);
        }
        if (role_ != ThreadRole::kPrimary) continue;
        std::optional<InPlaceRetry> state = DecodeInPlaceRetry(c.metadata);
        if (state && state->offset == c.offset) restored_[c.tp] = *state;
        committed_[c.tp] = c;
      }
    }
  }
  if (role_ == ThreadRole::kPrimary && KeyOrder() && !partitions.empty()) {
    keys_unknown_.insert(partitions.begin(), partitions.end());
    LearnParkedKeys();
  }
  // Still quiesced: the engine releases the thread once every member it
  // waits for has joined, which may take more than one rebalance.
  if (quiesced_ && revoked_while_quiesced_) NoteRebalanced();
  LogInfo("thread ", id_, ": assigned ", partitions.size(), " partitions, now ", trackers_.size());
  mailbox_->SetPartitions(Assigned());
  mailbox_->rebalancing.store(false, std::memory_order_relaxed);
  mailbox_->assignment_changed_ms.store(NowMs(), std::memory_order_relaxed);
  if (!mailbox_->joined.HasBeenNotified()) {
    mailbox_->SetState(ThreadState::kRunning);
    mailbox_->joined.Notify();
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
      hand_offs_.DrainRedo(/*force=*/true, InOrder());
    }
  }
}

void Worker::OnRevoked(const std::vector<TopicPartition>& partitions, bool lost) {
  LogInfo("thread ", id_, ": ", lost ? "lost " : "revoked ", partitions.size(), " partitions");
  const bool graceful = graceful_.load(std::memory_order_relaxed);
  absl::Time deadline = absl::Now() + absl::Milliseconds(context_.options->shutdown_timeout_ms);
  if (stop_requested_.load(std::memory_order_acquire)) {
    const int64_t stop_ns = stop_deadline_ns_.load(std::memory_order_relaxed);
    deadline = std::min(deadline, absl::FromUnixNanos(stop_ns));
  }
  // Calls of these partitions end first: graceful, they finish (their
  // outcomes handed off) until the deadline; otherwise, or after it, they
  // are cancelled and the next owner processes their records again.
  AwaitCalls(&partitions, graceful && !lost ? deadline : absl::Now());
  if (!lost) {
    if (graceful && role_ == ThreadRole::kRetry && scheduler_.size() > 0) {
      // An unannounced rebalance (another instance came or went): hand the
      // held records back if the group still takes commits, else leave them
      // where they are, rather than leave two live copies behind.
      if (absl::Status s = CommitNow(CommitPoints(partitions), deadline); s.ok()) {
        HandBack(partitions, deadline);
      } else {
        LogWarning("thread ", id_, ": the group refuses commits (", s.message(),
                   "); held retry records stay where they are and are read again");
      }
    } else if (graceful) {
      AwaitHandOffs(partitions, deadline);
    }
    // Bounded like the rest of a stop, yet given a moment even when the
    // hand-offs used up the deadline.
    const absl::Time commit_deadline = std::max(deadline, absl::Now() + kStopGrace / 2);
    if (absl::Status s = CommitNow(CommitPoints(partitions), commit_deadline); !s.ok()) {
      LogWarning("thread ", id_, ": commit at revoke: ", s.message());
    }
  }
  if (quiesced_) revoked_while_quiesced_ = true;
  // librdkafka keeps an application's pause across unassign and assign: a
  // partition given up paused would come back paused, with nobody knowing.
  std::vector<TopicPartition> resume;
  for (const TopicPartition& tp : partitions) {
    if (paused_.erase(tp) > 0) resume.push_back(tp);
  }
  if (!resume.empty()) {
    if (absl::Status s = consumer_->Resume(resume); !s.ok()) {
      LogWarning("thread ", id_, ": resume at revoke: ", s.message());
    }
  }
  // Their keys' lanes go too: the next owner reads their records again.
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    if (std::find(partitions.begin(), partitions.end(), it->second.source) != partitions.end()) {
      lanes_ready_.erase(it->first);
      it = lanes_.erase(it);
    } else {
      ++it;
    }
  }
  for (const TopicPartition& tp : partitions) {
    scheduler_.DropPartition(tp);
    lane_held_.erase(tp);
    keys_unknown_.erase(tp);
    waiting_.erase(tp);
    ready_.erase(tp);
    in_place_.erase(tp);
    restored_.erase(tp);
    done_before_.erase(tp);
    committed_.erase(tp);
    if (auto it = trackers_.find(tp); it != trackers_.end()) {
      it->second->Abandon();
      trackers_.erase(it);
    }
  }
  mailbox_->SetPartitions(Assigned());
  // An assignment follows, in both rebalance protocols.
  mailbox_->rebalancing.store(true, std::memory_order_relaxed);
  mailbox_->assignment_changed_ms.store(NowMs(), std::memory_order_relaxed);
  UpdateGauges();
}

void Worker::HandBack(const std::vector<TopicPartition>& partitions, absl::Time deadline) {
  size_t handed_back = 0;
  for (const TopicPartition& tp : partitions) {
    if (!trackers_.contains(tp)) continue;
    for (HeldRecord& held : scheduler_.TakePartition(tp)) {
      ByteCharge sent_back;
      if (!MaySendBack(held, &sent_back)) {
        // Key order: handed back, it would land behind later records of its
        // key. It stays, and so does the commit below it: the next owner
        // reads it, and its key's records after it, again in order.
        scheduler_.Add(std::move(held));
        continue;
      }
      // Unchanged, due when it was due, to the same partition (so a key's
      // records stay in one partition), behind everything read so far.
      HandOff h = ToRetryTopic(std::move(held), HandOffKind::kHandBack);
      h.record.partition = tp.partition;
      h.sent_back = std::move(sent_back);
      Emit(std::move(h));
      ++handed_back;
    }
  }
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
  AwaitHandOffs(partitions, deadline);
  if (handed_back > 0) {
    LogInfo("thread ", id_, ": handed ", handed_back, " held records back to the retry topic");
  }
}

void Worker::RequestCheckpoint(absl::Time deadline) {
  absl::MutexLock lock(&checkpoint_mu_);
  checkpoint_ = Checkpoint::kRequested;
  checkpoint_deadline_ = deadline;
}

bool Worker::AwaitCheckpoint(absl::Time deadline) {
  absl::MutexLock lock(&checkpoint_mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_) {
    return checkpoint_ != Checkpoint::kRequested;
  };
  return checkpoint_mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

bool Worker::AwaitRebalanced(absl::Time deadline) {
  absl::MutexLock lock(&checkpoint_mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_) {
    return checkpoint_ != Checkpoint::kRequested && checkpoint_ != Checkpoint::kQuiesced;
  };
  return checkpoint_mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

void Worker::ReleaseCheckpoint() {
  absl::MutexLock lock(&checkpoint_mu_);
  checkpoint_ = Checkpoint::kReleased;
}

void Worker::ServeCheckpoint() {
  Checkpoint checkpoint;
  absl::Time deadline;
  {
    absl::MutexLock lock(&checkpoint_mu_);
    checkpoint = checkpoint_;
    deadline = checkpoint_deadline_;
    if (checkpoint == Checkpoint::kReleased) checkpoint_ = Checkpoint::kNone;
  }
  if (checkpoint == Checkpoint::kReleased && quiesced_) EndQuiesce("the group change is over");
  if (quiesced_ && absl::Now() - quiesced_since_ > kMaxQuiesce) {
    EndQuiesce("nobody released it");
  }
  if (checkpoint != Checkpoint::kRequested) return;
  const std::vector<TopicPartition> all = Assigned();
  quiesced_ = true;
  // With nothing assigned (still joining, or no partition to spare), the
  // next assignment is the end of the rebalance: no revoke comes first.
  revoked_while_quiesced_ = all.empty();
  quiesced_since_ = absl::Now();
  // Calls in flight end first, so that the commit below stays true. Those
  // still out at the deadline go on (the partitions stay assigned until the
  // rebalance, and cancelled calls would leave records that nobody
  // finishes); they complete behind the commit, at least once as ever.
  AwaitCalls(nullptr, deadline, /*cancel_rest=*/false);
  const absl::Time commit_deadline = std::max(deadline, absl::Now() + kStopGrace / 2);
  // Hand held records back only while the group takes commits: a hand-back
  // whose originals stay uncommitted would leave two live copies.
  if (absl::Status s = CommitNow(CommitPoints(all), commit_deadline); !s.ok()) {
    LogWarning("thread ", id_, ": commit before the rebalance: ", s.message(),
               "; held records stay where they are");
  } else {
    HandBack(all, deadline);
    if (absl::Status s = CommitNow(CommitPoints(all), commit_deadline); !s.ok()) {
      LogWarning("thread ", id_, ": commit before the rebalance: ", s.message());
    }
  }
  ReconcilePauses();
  absl::MutexLock lock(&checkpoint_mu_);
  if (checkpoint_ == Checkpoint::kRequested) checkpoint_ = Checkpoint::kQuiesced;
}

void Worker::NoteRebalanced() {
  absl::MutexLock lock(&checkpoint_mu_);
  if (checkpoint_ == Checkpoint::kQuiesced) checkpoint_ = Checkpoint::kRebalanced;
}

void Worker::EndQuiesce(const char* why) {
  quiesced_ = false;
  revoked_while_quiesced_ = false;
  LogInfo("thread ", id_, ": resumes: ", why);
}

}  // namespace retryd
