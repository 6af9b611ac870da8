#include "server/engine/worker/worker.h"

#include <algorithm>
#include <map>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/steering/retry_tiers.h"

namespace retryd::engine {
namespace {

constexpr absl::Duration kMaxPollWait = absl::Milliseconds(200);
// At most this many records are taken from the consumer per loop turn (see
// PollBatch), within kMaxRound.
constexpr int kMaxBatch = 500;
// How long one round may process held records before the thread polls
// again (heartbeats and max.poll.interval.ms depend on it). A round may
// overrun by one processor call.
constexpr absl::Duration kMaxRound = absl::Milliseconds(200);

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

uint64_t BackoffSeed(const EngineOptions& options, int id) {
  if (options.retry.seed != 0) return options.retry.seed * 1000003u + static_cast<uint64_t>(id);
  return std::random_device{}();
}

kafka::ConsumerOptions ConsumerOptionsFor(const EngineOptions& options, int id, ThreadRole role,
                                          int tier) {
  kafka::ConsumerOptions c;
  c.bootstrap_servers = options.bootstrap_servers;
  c.properties = options.kafka_properties;
  if (role == ThreadRole::kPrimary) {
    c.group_id = options.group_id;
    c.topics = options.input_topics;
  } else {
    // Every tier's threads in one group, each subscribed to its tier's
    // topic: the assignor gives a topic's partitions to its subscribers.
    c.group_id = absl::StrCat(options.group_id, ".retry");
    c.topics = {options.retry.tiers[tier].topic};
  }
  c.client_id = absl::StrCat("retryd-", ThreadRoleName(role), "-", id);
  return c;
}

}  // namespace

Worker::Worker(int id, ThreadRole role, const WorkerContext& context, int tier)
    : id_(id),
      role_(role),
      tier_(role == ThreadRole::kRetry ? tier : -1),
      group_id_(ConsumerOptionsFor(*context.options, id, role, tier).group_id),
      context_(context),
      mailbox_(std::make_shared<Mailbox>(id, role, context.options->max_in_flight / 2 + 1,
                                         context.parking)),
      hand_offs_(*context.options, context.producers->Current(), mailbox_),
      calls_(*context.processor, mailbox_,
             context.processor->asynchronous()
                 ? std::max(1, context.processor->max_concurrent_calls())
                 : 1),
      backoff_(context.options->retry.backoff, BackoffSeed(*context.options, id)),
      read_ahead_ms_(
          role == ThreadRole::kRetry ? TierReadAheadMs(context.options->retry.tiers[tier]) : -1),
      scheduler_(/*fifo_per_partition=*/read_ahead_ms_ >= 0) {
  mailbox_->set_tier(tier_);
}

Worker::~Worker() {
  if (thread_.joinable()) {
    RequestStop(/*graceful=*/false);
    thread_.join();
  }
}

absl::Status Worker::Start() {
  absl::StatusOr<std::unique_ptr<kafka::Consumer>> consumer =
      kafka::Consumer::Create(ConsumerOptionsFor(*context_.options, id_, role_, tier_), this);
  mailbox_->SetGroup(group_id_, std::string());
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

int64_t Worker::ScheduledOrWaiting(const TopicPartition& tp) const {
  int64_t n = static_cast<int64_t>(scheduler_.CountFor(tp));
  n += queue_.WaitingFor(tp);
  return n;
}

int64_t Worker::HeldInMemory(const TopicPartition& tp) const {
  int64_t n = ScheduledOrWaiting(tp);
  n += lanes_.WaitingFrom(tp);
  return n;
}

int64_t Worker::RecordsAhead(const TopicPartition& tp) const {
  int64_t n = ScheduledOrWaiting(tp);
  if (InOrder()) {
    if (auto tracker = partitions_.Tracker(tp); tracker != nullptr)
      n += mailbox_->FailedHandOffs(tracker);
    n += calls_.For(tp);
  }
  return n;
}

bool Worker::CanCall(const TopicPartition& tp) const {
  return !AtCallLimit() && !(InOrder() && calls_.For(tp) > 0);
}

void Worker::Run() {
  thread_owner_.Bind();
  SetThreadName(absl::StrCat(ThreadRoleName(role_), "-", id_));
  SetThreadComponent("engine");
  const absl::Duration commit_interval = absl::Milliseconds(context_.options->commit_interval_ms);
  next_commit_ = absl::Now() + commit_interval;
  bool failed = false;
  while (!stop_requested_.load(std::memory_order_acquire)) {
    mailbox_->NoteLoopTurn();
    if (!Housekeep(commit_interval)) {
      failed = true;
      break;
    }
    absl::StatusOr<int> polled = PollBatch(PollWait());
    mailbox_->counters.Add(&Counters::polls);
    if (!polled.ok()) {
      LogError("thread ", id_, " stops: ", polled.status().message());
      mailbox_->SetLastError(std::string(polled.status().message()));
      failed = true;
      break;
    }
    NoteState(*polled);
  }
  Shutdown(failed);
}

bool Worker::Housekeep(absl::Duration commit_interval) {
  ServeCheckpoint();
  TakeFinishedCalls();
  ServeRequests(/*serving=*/true);
  if (hand_offs_.ProducerFailed()) RecoverProducer();
  if (HandOffsBroken()) return false;
  hand_offs_.DrainRedo(/*force=*/false, InOrder());
  hand_offs_.FreeDone(buffers_);
  if (role_ == ThreadRole::kPrimary && KeyOrder()) {
    if (absl::Now() >= next_learn_ && partitions_.any_keys_unknown()) LearnParkedKeys();
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
  return true;
}

absl::Duration Worker::PollWait() const {
  // A due record shortens the wait only if it can start: at the call limit
  // it waits for a call to end, whose outcome wakes the poll (see Attempt);
  // polling at once instead would spin, starving those calls.
  absl::Duration wait = kMaxPollWait;
  if (std::optional<int64_t> due = scheduler_.NextDueMs(); due && !quiesced_ && !AtCallLimit()) {
    wait = std::clamp(absl::Milliseconds(*due - NowMs()), absl::ZeroDuration(), kMaxPollWait);
  }
  // Cut short by the round's deadline: the lanes go on at once.
  if (lanes_.any_ready() && !quiesced_ && !AtCallLimit()) wait = absl::ZeroDuration();
  return wait;
}

void Worker::NoteState(int polled) {
  if (polled > 0) {
    mailbox_->SetState(ThreadState::kRunning);
  } else if (!mailbox_->joined.HasBeenNotified()) {
    // Still joining the group: stays STARTING.
  } else if (context_.gate->down(role_)) {
    // Its partitions paused while records wait for a probe; open while none
    // does, so that one comes to be the probe.
    mailbox_->SetState(ThreadState::kWaitingDownstream);
  } else if (scheduler_.size() > 0) {
    mailbox_->SetState(ThreadState::kWaitingBackoff);
  } else if (partitions_.all_paused()) {
    mailbox_->SetState(ThreadState::kPaused);
  } else {
    mailbox_->SetState(ThreadState::kIdle);
  }
}

void Worker::Shutdown(bool failed) {
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
  // Each record is read into buffers of records already done with, where
  // there are some (RecordBuffers).
  buffers_.Prepare(read_);
  absl::StatusOr<bool> polled = consumer_->Poll(wait, read_);
  if (!polled.ok()) return polled.status();
  if (!*polled) return 0;
  int taken = 0;
  const absl::Time deadline = absl::Now() + kMaxRound;
  // Records come in runs of one partition: its name is copied once a run.
  TopicPartition tp;
  while (true) {
    if (read_.partition != tp.partition || read_.topic != tp.topic) tp = read_.tp();
    HandleConsumed(tp, std::move(read_));
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
    // Out of buffers: the hand-offs acknowledged while this batch (or the
    // wait before it) went on have some.
    if (buffers_.buffers() == 0 || hand_offs_.spare() == 0) hand_offs_.FreeDone(buffers_);
    buffers_.Prepare(read_);
    polled = consumer_->Poll(absl::ZeroDuration(), read_);
    if (!polled.ok()) return polled.status();
    if (!*polled) break;
  }
  return taken;
}

void Worker::HandleConsumed(const TopicPartition& tp, Record&& record) {
  thread_owner_.Check("a worker handles records on its own thread");
  const std::shared_ptr<CompletionTracker> tracker = partitions_.Tracker(tp);
  if (tracker == nullptr) {
    // Not ours (a record fetched before a revoke): the owner reads it again.
    return;
  }
  if (!tracker->Begin(record.offset)) {
    LogWarning("thread ", id_, ": ignoring ", tp.topic, "/", tp.partition, "@", record.offset,
               ", at or below an offset already taken");
    return;
  }
  const int64_t read_ms = NowMs();
  // Completed by the previous owner, above its commit: not processed again.
  const bool done_before = partitions_.DoneBefore(tp, record.offset);
  if (role_ == ThreadRole::kPrimary && done_before) {
    tracker->Complete(record.offset);
    return;
  }
  ByteCharge charge = hand_offs_.Charge(RecordBytes(record));
  if (role_ == ThreadRole::kPrimary) {
    HandleInput(tp, std::move(record), read_ms, std::move(charge));
  } else {
    HandleRetryRecord(tp, tracker, std::move(record), read_ms, done_before, std::move(charge));
  }
}

void Worker::HandleInput(const TopicPartition& tp, Record&& record, int64_t read_ms,
                         ByteCharge charge) {
  // In order it waits behind the held record of its partition; in any mode
  // behind those already waiting for a call slot. Not behind a record the
  // downstream refused: that one waits alone (in key order, with the records
  // of its key behind it in its lane).
  const bool behind = InOrder() ? RecordsAhead(tp) > 0 : queue_.HasWaiting(tp);
  if (behind || !CanCall(tp) || partitions_.keys_unknown(tp)) {
    queue_.Wait(tp, {std::move(record), read_ms, std::move(charge)});
    return;
  }
  HeldRecord held = ReadFrom(tp, record.offset, read_ms, std::move(charge));
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
}

void Worker::HandleRetryRecord(const TopicPartition& tp,
                               const std::shared_ptr<CompletionTracker>& tracker, Record&& record,
                               int64_t read_ms, bool done_before, ByteCharge charge) {
  absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(record.headers);
  if (!meta.ok()) {
    if (done_before) {
      tracker->Complete(record.offset);
    } else {
      DeadLetterMalformed(record, tracker, meta.status());
    }
    return;
  }
  HeldRecord held = ReadFrom(tp, record.offset, read_ms, std::move(charge));
  held.attempt = meta->attempt;
  held.first_failure_ms = meta->first_failure_ms;
  held.due_ms = meta->due_ms;
  held.last_error = std::move(meta->error);
  held.last_error_reason = std::move(meta->error_reason);
  held.first_error = std::move(meta->first_error);
  held.refused_last_attempt = DownstreamGate::IsRefusalReason(held.last_error);
  held.record.topic = std::move(meta->original_topic);
  held.record.partition = meta->original_partition;
  held.record.offset = meta->original_offset;
  held.record.timestamp_ms = meta->original_timestamp_ms;
  held.record.timestamp_type = meta->original_timestamp_type;
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
  // Quiesced for a rebalance: read, but processed only after it. In a
  // fixed-delay tier, not before a record of its partition read earlier.
  const bool behind = read_ahead_ms_ >= 0 && scheduler_.CountFor(tp) > 0;
  if (held.due_ms <= now && !quiesced_ && !AtCallLimit() && !behind) {
    Attempt(std::move(held));
  } else {
    scheduler_.Add(std::move(held));
    mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
  }
}

void Worker::ClampDue(HeldRecord& held, int64_t now_ms) {
  // No record waits longer than its tier's longest delay (the backoff's
  // max_ms, or the tier's delay_ms) from when it is read: a due time further
  // out (a foreign writer, a skewed clock, a delay lowered since it was
  // written) would pin the partition's commit.
  const RetryOptions& retry = context_.options->retry;
  const int64_t longest = TierMaxDelayMs(retry, retry.tiers[std::max(tier_, 0)]);
  const int64_t latest = now_ms + longest;
  if (held.due_ms <= latest) return;
  const int64_t was = held.due_ms;
  held.due_ms = latest;
  mailbox_->counters.Add(&Counters::due_clamped);
  if (int64_t held_back = 0; clamp_log_.Allow(absl::Now(), &held_back)) {
    LogWarning("thread ", id_, ": ", held.source.topic, "/", held.source.partition, "@",
               held.source_offset, " was due at ", was, " ms, more than the tier's longest delay (",
               longest, " ms) from now; it is due at ", latest, " instead",
               LogThrottle::HeldBackNote(held_back));
  }
}

void Worker::RecordEndToEnd(const HeldRecord& held, absl::Time now) {
  if (held.record.timestamp_ms < 0) return;
  mailbox_->end_to_end_latency.Record(now - absl::FromUnixMillis(held.record.timestamp_ms));
}

void Worker::Attempt(HeldRecord&& held) {
  thread_owner_.Check("a worker attempts records on its own thread");
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
  std::shared_ptr<CompletionTracker> tracker = partitions_.Tracker(held.source);
  calls_.Start(std::move(held), std::move(tracker), now, probe);
}

void Worker::TakeFinishedCalls() {
  thread_owner_.Check("a worker concludes its calls on its own thread");
  calls_.TakeFinished([this](Calls::Call call, Outcome outcome) {
    // Cancelled by retryd (a stop, a revoke): the record is read again by
    // whoever owns its partition next, and uses up no attempt.
    if (call.cancel->cancelled() || call.tracker->abandoned()) {
      if (call.probe) context_.gate->OnProbeAbandoned(role_);
      return;
    }
    const TopicPartition tp = call.held.source;
    Conclude(std::move(call.held), std::move(outcome), call.started, call.probe);
    queue_.MarkReady(tp);
  });
}

void Worker::AwaitCalls(const std::vector<TopicPartition>* tps, absl::Time deadline,
                        bool cancel_rest) {
  while (calls_.InFlight(tps) && absl::Now() < deadline) {
    calls_.AwaitFinished(deadline);
    TakeFinishedCalls();
  }
  if (cancel_rest) calls_.Cancel(tps);
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

void Worker::Conclude(HeldRecord&& held, Outcome outcome, absl::Time started, bool probe) {
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
      held.last_error_reason = std::move(outcome.error_reason);
      DeadLetter(held, absl::StrCat("permanent failure: ", outcome.reason));
      return;
    case Outcome::Kind::kRetriable:
      mailbox_->counters.Add(&Counters::failed_attempts);
      mailbox_->SetLastError(outcome.reason);
      held.last_error_reason = std::move(outcome.error_reason);
      OnRetriableFailure(std::move(held), std::move(outcome.reason));
      return;
  }
}

void Worker::OnSuccess(HeldRecord& held, Outcome& outcome) {
  const std::shared_ptr<CompletionTracker> tracker = partitions_.Tracker(held.source);
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
  if (held.first_failure_ms == 0) {
    held.first_failure_ms = now;
    held.first_error = reason;
  }
  // The next attempt's tier says how long it waits: its fixed delay, or
  // the backoff (the single-topic form).
  const RetryTier& next = retry.tiers[TierOfAttempt(retry.tiers, held.attempt + 1)];
  held.due_ms = now + (next.delay_ms > 0 ? next.delay_ms : backoff_.DelayMs(held.attempt));
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

HandOff Worker::ToRetryTopic(HeldRecord held, HandOffKind kind) const {
  const TopicPartition source = held.source;
  // To the topic of the tier that makes the record's next attempt.
  const std::vector<RetryTier>& tiers = context_.options->retry.tiers;
  const std::string& topic = tiers[TierOfAttempt(tiers, held.attempt)].topic;
  HandOff h = RetryHandOff(std::move(held), kind, topic);
  h.tracker = partitions_.Tracker(source);
  return h;
}

void Worker::HoldInPlace(HeldRecord held) {
  // Retried in place: records behind it wait until it completes, and its
  // state rides along with every commit (see ordering/in_place_retry.h).
  queue_.HoldInPlace(held.source,
                     {held.source_offset, held.attempt, held.first_failure_ms, held.due_ms});
  scheduler_.Add(std::move(held));
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
}

bool Worker::RestoreInPlaceRetry(HeldRecord& held) {
  if (!queue_.Restore(held)) return false;
  LogInfo("thread ", id_, ": ", held.source.topic, "/", held.source.partition, "@",
          held.source_offset, " resumes at attempt ", held.attempt, " (from committed metadata)");
  return true;
}

void Worker::DeadLetter(const HeldRecord& held, std::string reason,
                        std::shared_ptr<WorkerRequest> requested_by) {
  EndOfLane(held);
  HandOff h = DeadLetterHandOff(role_, held, std::move(reason), context_.options->dead_letter_topic,
                                Stamp());
  h.tracker = partitions_.Tracker(held.source);
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
      MalformedDeadLetterHandOff(record, error, context_.options->dead_letter_topic, Stamp());
  h.tracker = tracker;
  Emit(std::move(h));
}

DeadLetterStamp Worker::Stamp() const {
  return {NowMs(), DeadLetteredBy(context_.options->instance_name, id_)};
}

void Worker::Emit(HandOff&& hand_off) { hand_offs_.Emit(std::move(hand_off), InOrder()); }

bool Worker::HandOffsBroken() {
  if (!hand_offs_.Broken()) return false;
  // Waiting for hand-offs at the revoke would wait for the one that failed.
  graceful_.store(false, std::memory_order_relaxed);
  return true;
}

void Worker::ReleaseRecovered() {
  if (queue_.empty() || AtCallLimit()) return;
  for (const TopicPartition& tp : queue_.Partitions()) {
    if ((InOrder() && scheduler_.CountFor(tp) > 0) || !CanCall(tp) || partitions_.keys_unknown(tp))
      continue;
    auto tracker = partitions_.Tracker(tp);
    if (tracker != nullptr && mailbox_->FailedHandOffs(tracker) == 0) queue_.MarkReady(tp);
  }
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
      queue_.EndInPlace(tp);
      Attempt(std::move(due.front()));
      queue_.MarkReady(tp);
      progressed = true;
    }
    progressed = DrainWaiting(deadline) || progressed;
    progressed = DrainLanes(deadline) || progressed;
  }
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
}

bool Worker::DrainWaiting(absl::Time deadline) {
  // In order, a record held in place (scheduler_) holds its partition:
  // asked again after each record, which may be held in place itself.
  auto held_in_place = [this](const TopicPartition& tp) {
    return InOrder() && scheduler_.CountFor(tp) > 0;
  };
  return queue_.DrainReady(
      deadline, [&](const TopicPartition& tp) { return !held_in_place(tp) && CanCall(tp); },
      // Done with `tp` unless the deadline or the call limit cut its queue
      // short; its call's end brings it back.
      [&](const TopicPartition& tp) {
        return held_in_place(tp) || (InOrder() && calls_.For(tp) > 0);
      },
      [this](HeldRecord held) {
        if (!TakenByItsKey(held)) Attempt(std::move(held));
      });
}

absl::Status Worker::CommitNow(const kafka::CommitOffsets& offsets, absl::Time deadline) {
  if (offsets.empty()) return absl::OkStatus();
  if (absl::Status s = consumer_->CommitWithin(offsets, deadline); !s.ok()) return s;
  NoteCommitted(offsets);
  return absl::OkStatus();
}

void Worker::NoteCommitted(const kafka::CommitOffsets& offsets) {
  partitions_.NoteCommitted(offsets);
  mailbox_->counters.Add(&Counters::commits);
}

void Worker::Commit() {
  thread_owner_.Check("a worker commits on its own thread");
  kafka::CommitOffsets offsets = partitions_.Moved();
  if (offsets.empty()) return;
  if (absl::Status s = consumer_->Commit(offsets, /*async=*/true); !s.ok()) {
    LogWarning("thread ", id_, ": ", s.message());
    return;
  }
  NoteCommitted(offsets);
}

void Worker::OnCommitFailed(const kafka::CommitOffsets& offsets) {
  partitions_.OnCommitFailed(offsets);
}

void Worker::UpdateGauges() {
  // Where each partition's reading began, as far as this thread knows: the
  // offset committed (by it, or before its assignment for a primary).
  std::map<std::string, int64_t> by_topic;
  mailbox_->lag.store(consumer_->Lag(partitions_.LastCommitted(), &by_topic),
                      std::memory_order_relaxed);
  mailbox_->SetTopicLag(std::move(by_topic));
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()) + queue_.waiting(),
                            std::memory_order_relaxed);
  mailbox_->parked.store(lanes_.waiting(), std::memory_order_relaxed);
  if (read_ahead_ms_ >= 0) {
    // Each partition's next record is its earliest held (FIFO).
    const int64_t now = NowMs();
    absl::flat_hash_map<TopicPartition, int64_t> next_due;
    scheduler_.ForEach([&next_due](const HeldRecord& held) {
      auto [it, added] = next_due.try_emplace(held.source, held.due_ms);
      if (!added) it->second = std::min(it->second, held.due_ms);
    });
    int64_t waiting = 0;
    for (const auto& [tp, due] : next_due) waiting += due > now ? 1 : 0;
    mailbox_->waiting_partitions.store(waiting, std::memory_order_relaxed);
  }
}

}  // namespace retryd::engine
