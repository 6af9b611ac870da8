// A worker: one thread, one Kafka consumer, and the record handling of one
// role.
//
//  * Primary: consumes the input topics in group `group_id`, runs each record
//    through the processor once, and hands it to exactly one outcome: output
//    (or done), the retry topic, or the dead-letter topic. In in-order mode a
//    failed record is instead retried in place, its partition paused.
//  * Retry: consumes the retry topic in group `<group_id>.retry`, holds each
//    record until its due time (a bounded look-ahead per partition), then
//    processes it again and re-enqueues it, or dead-letters it.
//
// In key order, a thread keeps one record per key in progress (a lane): the
// records of the key read after it wait in the lane until it is done. A
// primary sends the records of a parked key (see KeyParking) to the retry
// topic unprocessed; it parks a key when it sends one of its records there.
// A retry thread retries a keyed record in place (it holds it again rather
// than re-sending it, so the retry topic keeps each key's records in input
// order) and releases the key once its outcome is acknowledged.
//
// With an asynchronous processor a worker keeps up to max_concurrent_calls()
// calls in flight: in order, at most one per partition; in key order, at
// most one per key; otherwise any. The
// outcomes come back through the WorkerMailbox and are handled on the worker's
// thread, which the consumer's Wake() brings out of its poll.
//
// An input offset is committed only below the lowest record whose outcome is
// not yet durable (see CompletionTracker). Nothing here blocks while holding
// a lock; the consumer is used only by the worker's own thread.
//
// Thread-safety: Start(), RequestStop() and Join() are for the owner (the
// Engine); stats() may be read and Post() called from any thread.
#ifndef RETRYD_SERVER_ENGINE_WORKER_WORKER_H_
#define RETRYD_SERVER_ENGINE_WORKER_WORKER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/debug_check.h"
#include "server/common/log_throttle.h"
#include "server/engine/api/options.h"
#include "server/engine/api/processor.h"
#include "server/engine/handoff/completion_tracker.h"
#include "server/engine/handoff/done_above.h"
#include "server/engine/handoff/hand_offs.h"
#include "server/engine/handoff/record_buffers.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/held/byte_charge.h"
#include "server/engine/held/in_flight.h"
#include "server/engine/ordering/in_order_queue.h"
#include "server/engine/ordering/in_place_retry.h"
#include "server/engine/ordering/key_lanes.h"
#include "server/engine/ordering/key_parking.h"
#include "server/engine/stats/thread_stats.h"
#include "server/engine/steering/downstream_gate.h"
#include "server/engine/worker/backoff.h"
#include "server/engine/worker/calls.h"
#include "server/engine/worker/due_scheduler.h"
#include "server/engine/worker/held_records.h"
#include "server/engine/worker/partitions.h"
#include "server/engine/worker/rebalance_checkpoint.h"
#include "server/engine/worker/worker_context.h"
#include "server/kafka/consumer.h"
#include "server/kafka/producer.h"
#include "server/model/record.h"

namespace retryd::engine {

class Worker : public kafka::ConsumerListener {
 public:
  // A retry thread reads the topic of retry tier `tier` (an index into
  // RetryOptions::tiers, normalized); a primary ignores it.
  Worker(int id, ThreadRole role, const WorkerContext& context, int tier = 0);
  ~Worker() override;  // Requires Join() to have returned if Start() succeeded.

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Creates the consumer (subscribing to the role's topics) and starts the
  // thread. The thread reports progress through stats().
  absl::Status Start();

  // Asks the thread to stop; returns at once. Graceful: finish in-flight
  // hand-offs until `deadline` (at most shutdown_timeout_ms away), commit,
  // leave the group. Not graceful: leave the group without waiting or
  // committing more. The last commit and the group leave get a few seconds
  // past `deadline` (kStopGrace) at most; what is not done by then is
  // logged and abandoned, to be processed again.
  void RequestStop(bool graceful, absl::Time deadline = absl::InfiniteFuture());

  // Waits for the thread to exit.
  void Join();

  // Before the engine changes the retry group's membership (a rebalance on
  // purpose): asks a retry thread to hand its held records back to the
  // retry topic, wait for its hand-offs, commit, and then process nothing
  // and keep its partitions paused (polling on, so it takes part in the
  // rebalance) until the engine releases it. Then the offsets it committed
  // stay true even if the group refuses commits during the rebalance (the
  // mock cluster does; Kafka takes them while a rebalance is prepared), and
  // the next owner of a partition repeats nothing. The hand-backs and the
  // commit end by `deadline`. Returns at once; any thread.
  void RequestCheckpoint(absl::Time deadline);
  // Waits until the requested checkpoint is done (true) or `deadline`.
  bool AwaitCheckpoint(absl::Time deadline);
  // Waits until the thread, checkpointed, has been through a rebalance:
  // given up what it had and been assigned anew (true), or `deadline`.
  bool AwaitRebalanced(absl::Time deadline);
  // Ends the checkpoint: the thread processes again. Any thread.
  void ReleaseCheckpoint();

  // Hands `request` to the worker's thread, which answers it at the top of
  // its loop (woken from its poll at once); a worker that has stopped
  // answers UNAVAILABLE at once. Any thread, while the worker exists.
  void Post(std::shared_ptr<WorkerRequest> request);

  int id() const { return id_; }
  ThreadRole role() const { return role_; }
  int tier() const { return tier_; }  // -1 for a primary.
  // Shared so readers may keep it after the worker is gone.
  std::shared_ptr<const ThreadStats> stats() const { return mailbox_; }

  // kafka::ConsumerListener; called on the worker's thread.
  void OnAssigned(const std::vector<TopicPartition>& partitions) override;
  void OnRevoked(const std::vector<TopicPartition>& partitions, bool lost) override;
  void OnCommitFailed(const kafka::CommitOffsets& offsets) override;

 private:
  using Mailbox = WorkerMailbox;
  // How far past its stop deadline a worker may go to commit what its
  // hand-offs completed (kStopGrace / 2) and then leave its group.
  static constexpr absl::Duration kStopGrace = absl::Seconds(2);

  void Run();
  // The loop's work between two polls: requests, calls ended, re-sends,
  // records due, commits (every `commit_interval`), pauses. False once the
  // thread's hand-offs are broken (it stops).
  bool Housekeep(absl::Duration commit_interval);
  // How long the next poll may wait for records.
  absl::Duration PollWait() const;
  // The thread's state after a poll that took `polled` records.
  void NoteState(int polled);
  // After the loop: closes the consumer (leaving the group, committing what
  // is done), ends the calls, and reports the thread stopped or `failed`.
  void Shutdown(bool failed);
  // Answers the requests posted since the last time (see Post); `serving`
  // false: the thread stops, each is answered UNAVAILABLE.
  void ServeRequests(bool serving);
  // An operator's DeadLetterRecord: dead-letters the held record the
  // request names, answering once its hand-off is acknowledged.
  void ServeDeadLetter(const std::shared_ptr<WorkerRequest>& request);
  // Takes the records the consumer has ready, waiting up to `wait` for the
  // first: up to kMaxBatch of them, stopping early once one calls for the
  // loop's housekeeping (a pause, a call slot, a stop). Returns how many it
  // took.
  absl::StatusOr<int> PollBatch(absl::Duration wait);
  // `record`, read from `tp`.
  void HandleConsumed(const TopicPartition& tp, Record&& record);
  // A primary's `record`, read from `tp` at `read_ms`, its bytes `charge`d.
  void HandleInput(const TopicPartition& tp, Record&& record, int64_t read_ms, ByteCharge charge);
  // A retry thread's `record`, read from `tp`; `done_before`: the previous
  // owner completed it.
  void HandleRetryRecord(const TopicPartition& tp,
                         const std::shared_ptr<CompletionTracker>& tracker, Record&& record,
                         int64_t read_ms, bool done_before, ByteCharge charge);
  // Runs `held` through the processor (the caller checked CanCall()), or
  // defers it while the downstream is down.
  void Attempt(HeldRecord&& held);
  // Whether a call for a record of `tp` may start now.
  bool CanCall(const TopicPartition& tp) const;
  bool AtCallLimit() const { return calls_.at_limit(); }
  // Key order: if a record of `held`'s key is in progress on this thread,
  // queues `held` behind it; else if a primary's key is parked, sends it to
  // the retry topic behind the parked records (Follow). Returns true then,
  // having taken `held`. Otherwise `held` becomes its key's record in
  // progress and may go on (false).
  bool TakenByItsKey(HeldRecord& held);
  // Sends `held` unprocessed to the retry topic behind its parked key.
  void Follow(HeldRecord held);
  // `held`, its key's record in progress, is done here: the next record of
  // its key may go on (DrainLanes).
  void EndOfLane(const HeldRecord& held);
  // Starts the next record of each lane whose record in progress ended,
  // until `deadline` or the call limit; returns whether it started any.
  bool DrainLanes(absl::Time deadline);
  bool KeyOrder() const;
  // Key order, a primary: learns which keys of the partitions it was
  // assigned are parked, from the retry topic (KeyParking::Replace). Until
  // it knows, their records wait.
  void LearnParkedKeys();
  // Key order, a primary: releases the keys whose parked records another
  // process's retry threads completed (KeyParking::ReleaseCommitted).
  void SweepParkedKeys();
  // Whether a retry thread may send `held` back to the retry topic (after
  // a failure, or handing it back): not a keyed record in key order, or
  // while key order is coming on, since the keys parked are read from
  // where the retry topic holds them. When it may, `*counted` counts a
  // keyed record in keyed_sends_back (the hand-off carries it).
  bool MaySendBack(const HeldRecord& held, ByteCharge* counted) const;
  // Key order switched on, a retry thread: the keyed records it holds form
  // lanes, each key's lowest input offset first, as if read in key order.
  void AdoptLanes();
  // Hands `held` to the outcome of its call.
  void Conclude(HeldRecord&& held, Outcome outcome, absl::Time started, bool probe);
  // Holds `held` (no attempt used up) until the downstream may take it.
  void Defer(HeldRecord held, absl::Time now);
  // Concludes the calls that ended.
  void TakeFinishedCalls();
  // Waits (taking finished calls) until no call of `tps` is in flight or
  // `deadline`; then cancels those left, if `cancel_rest`: only for
  // partitions given up, whose records the next owner reads again. Null
  // `tps`: every call.
  void AwaitCalls(const std::vector<TopicPartition>* tps, absl::Time deadline,
                  bool cancel_rest = true);
  void RecordEndToEnd(const HeldRecord& held, absl::Time now);
  // Moves `held`'s key, value and headers into its output record.
  void OnSuccess(HeldRecord& held, Outcome& outcome);
  void OnRetriableFailure(HeldRecord held, std::string reason);
  void DeadLetter(const HeldRecord& held, std::string reason,
                  std::shared_ptr<WorkerRequest> requested_by = nullptr);
  void DeadLetterMalformed(const Record& record, const std::shared_ptr<CompletionTracker>& tracker,
                           const absl::Status& why);
  // Now, by this thread: what a dead-letter record says of its making.
  DeadLetterStamp Stamp() const;
  // Gives `hand_off` to Kafka (HandOffs::Emit).
  void Emit(HandOff&& hand_off);
  // Processes held records that are due, and in-order records queued behind
  // a held record that completed, until `deadline`.
  void ProcessDue(absl::Time deadline);
  // `held` as a hand-off of `kind` to the retry topic (RetryHandOff).
  HandOff ToRetryTopic(HeldRecord held, HandOffKind kind) const;
  // In order: holds `held` until its due time, its state in the commits.
  void HoldInPlace(HeldRecord held);
  // If `held` is the record the committed metadata of its partition
  // describes, takes its attempt, first failure and due time from there.
  bool RestoreInPlaceRetry(HeldRecord& held);
  // Returns the held retry records of `partitions` to the retry topic and
  // waits (until `deadline`) for every hand-off of those partitions.
  void HandBack(const std::vector<TopicPartition>& partitions, absl::Time deadline);
  // Serves a checkpoint requested, ends one released (or kept too long).
  void ServeCheckpoint();
  void EndQuiesce(const char* why);
  // Runs queued records of the partitions in queue_ that are ready until one is held
  // again or `deadline` passes; returns whether it ran any.
  bool DrainWaiting(absl::Time deadline);
  // Brings a due time later than the longest backoff forward to it.
  void ClampDue(HeldRecord& held, int64_t now_ms);
  // True once a hand-off failed beyond recovery (or recovering from a fatal
  // producer error did): the thread then stops without waiting for its
  // hand-offs, and commits nothing past the record whose outcome was lost.
  bool HandOffsBroken();
  // The producer failed for good (a fatal error): rewinds to the last
  // commit (RewindToCommit) and moves to the producer that replaces it
  // (ProducerSlot). If none can be made, after a few tries a second apart,
  // or the slot gives up, the thread fails.
  void RecoverProducer();
  // Drops everything the thread holds or has in flight (calls cancelled,
  // held records, hand-offs, whose trackers are abandoned) and reads each
  // partition again from its commit point, which it commits first: every
  // outcome below it is acknowledged, and none above it is counted on. The
  // partitions stay assigned. Returns how many it rewound; an error if the
  // consumer could not be moved back (the thread must not go on then).
  absl::StatusOr<size_t> RewindToCommit();
  // In order: resumes partitions whose failed hand-offs are acknowledged.
  void ReleaseRecovered();
  // At the back-pressure limit, waits a little for acknowledgements before
  // ReconcilePauses() resorts to pausing (which drops what was fetched).
  void WaitForAcks();
  void ReconcilePauses();
  // Whether the thread holds more than max_held_bytes (then it pauses every
  // partition), with hysteresis: once over, it stays so until it holds less
  // than 3/4 of the budget. Never a deadlock: a thread pauses only once
  // over, what it holds then finishes without more input, and a record
  // larger than the whole budget is read like any other and lets the
  // partitions resume once done. Counts budget_pauses on each crossing.
  bool OverBudget();
  // Whether Lookahead() records of `tp` are held, or (a fixed-delay tier)
  // one due more than read_ahead_ms_ from now: it is paused then.
  bool LookaheadFull(const TopicPartition& tp) const;
  // False when no partition can be LookaheadFull: all of them together hold
  // fewer than Lookahead() records (a fixed-delay tier: none). Not counted
  // in order (RecordsAhead counts more there): true.
  bool AnyLookaheadMayBeFull() const;
  // Records held per partition before it pauses: retry.lookahead.
  int Lookahead() const;
  // Commits, asynchronously, the partitions whose commit point moved.
  void Commit();
  // Commits `offsets` and waits for the answer until `deadline`.
  absl::Status CommitNow(const kafka::CommitOffsets& offsets, absl::Time deadline);
  void NoteCommitted(const kafka::CommitOffsets& offsets);
  void UpdateGauges();
  bool InOrder() const;
  // Records of `tp` held until due or waiting behind a held record of their
  // partition.
  int64_t ScheduledOrWaiting(const TopicPartition& tp) const;
  // Every record of `tp` held in memory: ScheduledOrWaiting() plus those waiting
  // behind their key (their trackers entries never complete while they are
  // held).
  int64_t HeldInMemory(const TopicPartition& tp) const;
  // What a record of `tp` read now would wait behind: ScheduledOrWaiting()
  // plus, in order, the calls in flight and the failed hand-offs of `tp` not
  // yet acknowledged (later records queue behind those too, so a re-sent
  // record never lands after the ones that followed it).
  int64_t RecordsAhead(const TopicPartition& tp) const;
  // Waits until only held records are pending on every partition in `tps`,
  // re-sending failed hand-offs meanwhile, until `deadline`.
  void AwaitHandOffs(const std::vector<TopicPartition>& tps, absl::Time deadline);

  const int id_;
  const ThreadRole role_;
  const int tier_;              // RetryOptions::tiers index of a retry thread; -1 for a primary.
  const std::string group_id_;  // Of its consumer: the group, or the retry group.
  const WorkerContext context_;
  const std::shared_ptr<Mailbox> mailbox_;
  // Used by the worker's thread only; its delivery reports touch mailbox_.
  HandOffs hand_offs_;
  // Used by the worker's thread only; its processor callbacks touch mailbox_.
  Calls calls_;

  std::atomic<bool> stop_requested_{false};
  RebalanceCheckpoint checkpoint_;  // Thread-safe.
  std::atomic<bool> graceful_{true};
  // Unix ns; no deadline until RequestStop() sets one.
  std::atomic<int64_t> stop_deadline_ns_{std::numeric_limits<int64_t>::max()};
  std::thread thread_;

  // Everything below belongs to the worker's thread (and to Start() before
  // the thread exists): no lock.
  // The worker's thread, once Run() begins: its methods check it in debug
  // builds.
  ThreadOwner thread_owner_;
  std::unique_ptr<kafka::Consumer> consumer_;
  // The buffers of records whose hand-offs are done (HandOffs::FreeDone),
  // for the records read next; and the record Poll() reads into.
  RecordBuffers buffers_;
  Record read_;
  Backoff backoff_;
  // A fixed-delay tier's thread: how far ahead of their due time it reads
  // records (TierReadAheadMs); its scheduler_ keeps each partition's records
  // in offset order. -1 for the others.
  const int64_t read_ahead_ms_;
  DueScheduler scheduler_;
  // Each assigned partition's state, and the records that wait for one.
  Partitions partitions_;
  // partitions_'s: records waiting for their partition, and in order the
  // record retried in place per partition.
  InOrderQueue& queue_ = partitions_.queue();
  // partitions_'s: key order's lane per key with a record in progress here.
  KeyLanes& lanes_ = partitions_.lanes();
  // Every record held above, seen as one (ListInFlight, DeadLetterRecord).
  HeldRecords held_records_{id_, role_, calls_, scheduler_, queue_, lanes_};
  LogThrottle clamp_log_{absl::Seconds(1)};
  // Between a checkpoint and the rebalance it prepares (see
  // RequestCheckpoint).
  bool quiesced_ = false;
  bool revoked_while_quiesced_ = false;
  absl::Time quiesced_since_;
  absl::Time next_learn_;
  // A retry thread: key order was on at its last loop.
  bool key_order_seen_ = false;
  absl::Time next_sweep_;
  LogThrottle learn_log_{absl::Seconds(10)};
  bool backpressure_ = false;
  bool over_budget_ = false;  // See OverBudget().
  absl::Time next_commit_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_WORKER_H_
