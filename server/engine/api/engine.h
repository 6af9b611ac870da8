// The engine: primary threads, retry threads and the producer they share.
//
// Typical use:
//   auto engine = Engine::Create(options, std::move(processor));
//   (*engine)->Start();
//   ...
//   (*engine)->Stop();  // graceful: finish in-flight work, commit, leave
//
// Thread-safety: thread-safe. Methods may be called from any thread; the
// control methods serialise on an internal mutex that is never held across a
// Kafka call or a thread join.
#ifndef RETRYD_SERVER_ENGINE_API_ENGINE_H_
#define RETRYD_SERVER_ENGINE_API_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/api/cancellation.h"
#include "server/engine/api/options.h"
#include "server/engine/api/processor.h"
#include "server/engine/api/scaling_event.h"
#include "server/engine/downstream_gate.h"
#include "server/engine/handoff/producer_slot.h"
#include "server/engine/held/in_flight.h"
#include "server/engine/ordering/key_parking.h"
#include "server/engine/stats/counters.h"
#include "server/engine/stats/latest_measurement.h"
#include "server/engine/stats/thread_stats.h"
#include "server/engine/worker/worker_context.h"
#include "server/kafka/producer.h"
#include "server/kafka/topics.h"

namespace retryd::engine {

class Autoscaler;
class Worker;
struct ThreadPlan;

// Sums over every thread the engine ran, stopped ones included.
struct EngineTotals : Counters {
  int64_t consumed = 0;  // Records the primary threads processed (first attempts).
  int64_t in_flight = 0;
  // Retry records not yet done: the retry group's committed lag on the retry
  // topic, as last measured (MeasureRetryBacklog); before any measurement,
  // the retry threads' own lag plus the records they hold.
  int64_t retry_backlog = 0;
};

enum class EngineState {
  kCreated,  // Not started.
  kRunning,
  // Input paused while a switch of the ordering mode reads the retry
  // backlog: to in order, which checks or empties it (SetInOrder(true), or
  // Start() with in order configured), or to key order, which finds the keys
  // parked there (SetOrderingMode(KEY)).
  kDraining,
  kStopping,
  kStopped,
};
const char* EngineStateName(EngineState state);

struct SetOrderingResult {
  Ordering ordering = Ordering::kUnordered;  // The mode now.
  std::vector<int> stopped_thread_ids;       // Retry threads a drain stopped.
  int64_t drained_records = 0;               // Retry backlog a drain emptied.
  std::vector<int> started_thread_ids;       // Retry threads the switch out of in order started.
  int64_t parked_keys = 0;                   // Keys a switch to key order found parked.

  bool in_order() const { return ordering == Ordering::kInOrder; }
};

// One change of the retry threads (Engine::ChangeRetryThreads).
struct RetryThreadChange {
  enum class Kind {
    kStart,      // `count` more (>= 1).
    kStopCount,  // The `count` (>= 1) most recently started; all if fewer run.
    kStopIds,    // The retry threads `ids`.
    // Desired state: as many started or stopped (most recently started
    // first) as make `count` run. Refused while retry.autoscale is on.
    kSetCount,
  };
  Kind kind = Kind::kStart;
  int count = 0;
  std::vector<int> ids;
  bool graceful = true;  // A stop finishes in-flight hand-offs and commits first.
  // The retry tier (index into options().retry.tiers) whose threads kStart,
  // kStopCount and kSetCount count, start and stop; kStopIds stops threads
  // of any tier. retry.max_threads and min_threads apply per tier.
  int tier = 0;
};

// What one change did.
struct RetryThreadChangeResult {
  std::vector<int> started;  // Ids of the retry threads it started.
  std::vector<int> stopped;  // Ids of those it stopped.
  // Every retry thread once its batch was applied, in the order started.
  std::vector<int> running;
};

// What ListInFlight found.
// One retry topic partition's backlog (Engine::PartitionBacklogs).
struct PartitionBacklog {
  int tier = 0;  // Index in options().retry.tiers.
  int32_t partition = 0;
  int64_t backlog = 0;
};

struct InFlightList {
  std::vector<InFlightRecord> records;  // The oldest, oldest first.
  int64_t total = 0;                    // Held by the threads that answered.
  // Threads that did not answer by the deadline (busy in a long call, say):
  // their records are not in the list.
  std::vector<int> unanswered_thread_ids;
};

class Engine {
 public:
  // Checks `options` and connects the producer; starts no thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(EngineOptions options,
                                                        std::unique_ptr<Processor> processor);
  ~Engine();  // Stop()s.

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts `primary_threads` primary and `retry.threads` retry threads.
  // With in order configured, input stays paused (state DRAINING) until the
  // retry backlog an earlier run left is known to be empty, emptied first by
  // a temporary retry thread if need be; that happens in the background.
  // With key order, each primary learns the keys parked in the retry topic
  // before it processes the partitions it is assigned.
  absl::Status Start();

  // Graceful stop, bounded by one deadline shutdown_timeout_ms away (plus a
  // little for the last commits and the group leave): every thread finishes
  // its hand-offs, commits and leaves its group, then the producer flushes.
  // What cannot be done in time (a broker unreachable) is logged and left to
  // be processed again. Idempotent; blocks until done.
  void Stop();

  // The processor's downstream as the engine sees it (always up for a
  // processor that never reports it unavailable).
  DownstreamGate::Snapshot downstream() const { return gate_.snapshot(); }

  // Control operations (the changes of the retry threads below, SetInOrder,
  // SetOrderingMode) hold the engine's control slot one at a time; a call
  // waits for the one before it, up to its deadline (DEADLINE_EXCEEDED,
  // reason CONTROL_BUSY, nothing changed).
  //
  // Changes of the retry threads coalesce: those that arrive while another
  // control operation runs are applied together when it ends, as one change
  // of the retry group's membership (one rebalance, where the broker folds
  // the joins and leaves into one). Each is checked in arrival order against
  // what the ones before it left; a refused one changes nothing and does not
  // hold up the others. Errors carry a reason (server/common/error_reason.h):
  // IN_ORDER_ACTIVE, MAX_THREADS_REACHED, MIN_THREADS_REACHED,
  // THREAD_NOT_FOUND, AUTOSCALE_ACTIVE, DRAIN_RUNNING (a switch of the
  // ordering mode holds the slot), ENGINE_NOT_RUNNING, CONTROL_BUSY,
  // INVALID_FIELD; none of them applied anything.
  //
  // A change returns once the threads it stopped have stopped and those it
  // started have joined the retry group, or when `deadline` passes: then
  // with what it applied, threads perhaps still starting or stopping.
  absl::StatusOr<RetryThreadChangeResult> ChangeRetryThreads(
      RetryThreadChange change, absl::Time deadline = absl::InfiniteFuture())
      ABSL_LOCKS_EXCLUDED(mu_);

  // ChangeRetryThreads(kStart): `count` more retry threads of tier `tier`;
  // their ids.
  absl::StatusOr<std::vector<int>> StartRetryThreads(int count,
                                                     absl::Time deadline = absl::InfiniteFuture(),
                                                     int tier = 0);

  // ChangeRetryThreads(kStopCount): the `count` most recently started
  // retry threads of tier `tier` (all of them if fewer run); their ids.
  absl::StatusOr<std::vector<int>> StopRetryThreads(int count, bool graceful,
                                                    absl::Time deadline = absl::InfiniteFuture(),
                                                    int tier = 0);

  // ChangeRetryThreads(kStopIds): the retry threads `ids`; NOT_FOUND
  // (naming them) if any is not a running retry thread, and then none.
  absl::StatusOr<std::vector<int>> StopRetryThreadsById(
      const std::vector<int>& ids, bool graceful, absl::Time deadline = absl::InfiniteFuture());

  // The in-order toggle (see control.proto SetInOrder).
  //
  // true: input pauses while the retry backlog is measured. Retry threads
  // running or a backlog left in the retry topic: FAILED_PRECONDITION
  // saying what to do, unless `drain_retries`: wait (a temporary retry
  // thread started if none runs) until the backlog is empty, stop the retry
  // threads, switch. A backlog that cannot be measured (Kafka unreachable)
  // is never taken for empty: UNAVAILABLE without `drain_retries`, else the
  // drain keeps measuring. Input resumes in every case.
  //
  // If `deadline` passes (DEADLINE_EXCEEDED) or `cancel` is cancelled
  // (CANCELLED) before the retry threads are being stopped, the engine is
  // left as it was: input resumed, a temporary retry thread stopped,
  // in-order off. A cancellation is seen at once, not at the next check.
  //
  // false: the configured ordering if it is not in order, else unordered.
  // Failures go to the retry topic again, so unless retry threads run
  // already, `retry.threads` of them start (one if in order is configured,
  // which forces retry.threads to 0); their ids are returned.
  absl::StatusOr<SetOrderingResult> SetInOrder(bool in_order, bool drain_retries,
                                               absl::Time deadline = absl::InfiniteFuture(),
                                               Cancellation* cancel = nullptr);

  // Switches to `ordering`. To kInOrder: as SetInOrder(true, drain_retries).
  // Out of kInOrder: as SetInOrder(false), into `ordering`. To kKey: input
  // pauses until every primary is quiet (no record half-way, no hand-off
  // unacknowledged), the retry topic is read from the retry group's
  // committed offsets to find the keys parked there, then input resumes in
  // key order; if the retry topic cannot be read by `deadline`,
  // DEADLINE_EXCEEDED (or UNAVAILABLE) and nothing changed. From kKey to
  // kUnordered: at once; parked keys are forgotten (their records in the
  // retry topic are retried as usual). INVALID_ARGUMENT for drain_retries
  // with any mode but kInOrder.
  absl::StatusOr<SetOrderingResult> SetOrderingMode(Ordering ordering, bool drain_retries,
                                                    absl::Time deadline = absl::InfiniteFuture(),
                                                    Cancellation* cancel = nullptr);

  Ordering ordering() const { return ordering_.load(std::memory_order_relaxed); }
  bool in_order() const { return ordering() == Ordering::kInOrder; }
  // The keys parked now (key order); all zero in the other modes.
  KeyParking::Summary ParkedKeys() const { return parking_.summary(); }
  // The `limit` oldest records the running threads hold (in a processor
  // call, waiting for their due time, waiting behind a held record,
  // deferred), oldest first. Asks every thread (Worker::Post) and waits for
  // the answers until `deadline`, or until `cancel` is cancelled. Read-only;
  // takes no control slot.
  InFlightList ListInFlight(size_t limit, absl::Time deadline, Cancellation* cancel = nullptr) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Dead-letters the held record at `record` (original coordinates) now,
  // whatever its attempts: it goes to the dead-letter topic with a
  // retryd-error saying an operator did it, and its partition moves on.
  // Returns the id of the thread that held it once the dead-letter topic
  // acknowledged it. NOT_FOUND if no thread holds it; FAILED_PRECONDITION
  // if it is in a processor call right now (try again) or the engine is not
  // running; DEADLINE_EXCEEDED if the answer did not come in time, CANCELLED
  // if `cancel` was cancelled first (either way it may still move, if a
  // thread had taken it up: ListInFlight tells).
  absl::StatusOr<int> DeadLetterRecord(const RecordCoordinates& record, absl::Time deadline,
                                       Cancellation* cancel = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  EngineState state() const;
  const EngineOptions& options() const { return options_; }

  // Asks the cluster for its broker list; OK if a broker answered within
  // `timeout` (kafka::ClusterProbe: one broker that hangs is not the
  // cluster). Blocks; takes no engine lock.
  absl::Status ProbeKafka(absl::Duration timeout) const;

  // Measures the retry backlog (records on the retry topic whose outcome the
  // retry group has not committed) and keeps it for Totals(). Blocks up to
  // `timeout`; takes no engine lock. Called periodically by whoever reports
  // it (the control server's prober), and by a drain; of measurements that
  // overlap, the one begun last is kept.
  absl::StatusOr<int64_t> MeasureRetryBacklog(absl::Duration timeout);
  // As MeasureRetryBacklog, each tier's backlog apart (in the order of
  // options().retry.tiers); keeps them for TierBacklogs().
  absl::StatusOr<std::vector<int64_t>> MeasureTierBacklogs(absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(tier_backlog_mu_);
  // Each tier's retry backlog as last measured; before any measurement,
  // what its running retry threads know of (their lag plus what they hold).
  // `running` is Threads().
  std::vector<int64_t> TierBacklogs(const std::vector<std::shared_ptr<const ThreadStats>>& running)
      const ABSL_LOCKS_EXCLUDED(tier_backlog_mu_);
  // Each retry topic partition's backlog as last measured by
  // MeasureTierBacklogs (or MeasureRetryBacklog), by tier, then partition;
  // empty before the first measurement.
  std::vector<PartitionBacklog> PartitionBacklogs() const ABSL_LOCKS_EXCLUDED(tier_backlog_mu_);

  // Stats of the threads that run now, by id.
  std::vector<std::shared_ptr<const ThreadStats>> Threads() const;
  // Stats of threads stopped within `window` (at most two minutes), by id.
  std::vector<std::shared_ptr<const ThreadStats>> RecentlyStopped(absl::Duration window) const;
  EngineTotals Totals() const;
  // OK while no running thread has FAILED; otherwise UNAVAILABLE naming the
  // first failed thread and why (its last error).
  absl::Status ThreadFailure() const;
  // Whether every running thread's loop turns: UNAVAILABLE naming the first
  // thread whose loop has not turned for options().liveness_stall_ms (one
  // stuck in a call, or FAILED: it turns no more), else OK. A restart is
  // what helps then. Reads each thread's last turn without asking the
  // thread; cheap, any thread.
  absl::Status Liveness() const;
  // Whether the engine does its work, Kafka's reachability aside (the
  // caller probes that): OK while RUNNING or DRAINING, no thread FAILED, no
  // thread still on a producer that failed for good (ProducerSlot),
  // every primary thread has joined its group and, if retry threads run,
  // one of them has joined the retry group (a thread started later that is
  // still joining does not count against it); UNAVAILABLE saying what is
  // missing otherwise. Any thread.
  absl::Status Readiness() const;
  // Producers made to replace one that failed for good (a fatal error).
  int64_t producer_replacements() const { return producers_.replacements(); }
  // TEST ONLY (retryd's --testonly_producer_fatal_error_signal): raises a
  // fatal error on the producer in use, as a broken idempotent sequence
  // would, through librdkafka's own test hook (Producer::RaiseFatalErrorForTest).
  absl::Status RaiseProducerFatalErrorForTest() const;
  // EngineTotals::retry_backlog alone, without summing every counter.
  // `running` is Threads(), which a caller reads once for both.
  int64_t RetryBacklog(const std::vector<std::shared_ptr<const ThreadStats>>& running) const;
  // The autoscaler's recent starts and stops, oldest first; none while
  // retry.autoscale is off.
  std::vector<ScalingEvent> ScalingEvents() const;

 private:
  Engine(EngineOptions options, std::unique_ptr<Processor> processor,
         std::unique_ptr<kafka::Producer> producer,
         std::unique_ptr<kafka::GroupLagProbe> retry_lag);

  // Starts a thread with a new id, or with `id` (reserved from next_id_);
  // a retry thread of tier `tier`.
  absl::StatusOr<std::unique_ptr<Worker>> StartWorker(ThreadRole role, int id = 0, int tier = 0);
  // Posts a request `make` makes to every running thread; returns them by
  // thread id.
  template <typename Make>
  std::vector<std::pair<int, std::shared_ptr<WorkerRequest>>> PostToWorkers(Make make) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Stops `workers` together; a graceful stop ends by `deadline` (see Stop).
  static void StopWorkers(std::vector<std::unique_ptr<Worker>>& workers, bool graceful,
                          absl::Time deadline);
  // Before the retry group's membership changes on purpose: each of
  // `workers` hands back what it holds, commits, and waits for the
  // rebalance (Worker::RequestCheckpoint), so the rebalance repeats nothing.
  // Waits until `deadline` (at most shutdown_timeout_ms) for them.
  void CheckpointRetryThreads(const std::vector<Worker*>& workers, absl::Time deadline);
  // After the change: waits (until `deadline`) for each of `workers` to have
  // been through the rebalance, then lets them process again.
  static void ReleaseRetryThreads(const std::vector<Worker*>& workers, absl::Time deadline);
  // The consumers' session.timeout.ms: how long one rebalance may take.
  int64_t SessionTimeoutMs() const;
  void Retire(std::vector<std::unique_ptr<Worker>>& workers) ABSL_LOCKS_EXCLUDED(mu_);

  // Control operations run one at a time. Each holds the control slot for
  // its whole run: BeginControl waits (up to `deadline`) until no other
  // holds it and hands it over as a ControlSlot, which frees it when
  // destroyed, on every path. The work in between runs without mu_ held.
  // A cancelled `cancel` ends the wait too (CANCELLED).
  class ControlSlot {
   public:
    ControlSlot(ControlSlot&& other) noexcept : engine_(std::exchange(other.engine_, nullptr)) {}
    ControlSlot& operator=(ControlSlot&&) = delete;
    ~ControlSlot();

   private:
    friend class Engine;
    // REQUIRES: engine->control_busy_ was set for this slot.
    explicit ControlSlot(Engine* engine) : engine_(engine) {}
    Engine* engine_;  // Null once moved from.
  };
  absl::StatusOr<ControlSlot> BeginControl(absl::Time deadline,
                                           const Cancellation* cancel = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // FAILED_PRECONDITION, reason DRAIN_RUNNING: a switch of the ordering mode
  // holds the control slot.
  static absl::Status DrainRunningError();
  // Marks the control slot taken and hands it over.
  // REQUIRES: mu_ held, the slot free or just taken by a BeginControl.
  ControlSlot TakeControlLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Only ~ControlSlot calls it.
  void EndControl() ABSL_LOCKS_EXCLUDED(mu_);
  // In debug builds, aborts unless the control slot is held (by `control`,
  // if given): the check behind each "REQUIRES: ... control ... held".
  void AssertControlHeld(const ControlSlot* control) const ABSL_LOCKS_EXCLUDED(mu_);
  // REQUIRES: mu_ held.
  absl::Status CheckRunning() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every primary has paused its partitions (so none is halfway through a
  // record) and has no hand-off in flight: the retry topic cannot grow.
  bool PrimariesQuiet() const ABSL_LOCKS_EXCLUDED(mu_);
  int RetryThreadCount() const ABSL_LOCKS_EXCLUDED(mu_);
  // When a graceful stop starting now must have ended.
  absl::Time StopDeadline() const {
    return absl::Now() + absl::Milliseconds(options_.shutdown_timeout_ms);
  }
  // A change of the retry threads waiting in pending_changes_ (see
  // ChangeRetryThreads); guarded by mu_ once queued.
  struct PendingChange;
  // What a batch decided, and the workers it starts and stops.
  struct ChangeBatch;
  // What the queued changes would do to the running retry threads, decided
  // in turn (PlanThreadChanges); takes nothing.
  // REQUIRES: mu_ held, the control slot held by the caller.
  ThreadPlan PlanChangesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The parts of RunChangeBatch, in order (see engine_threads.cc).
  std::vector<Worker*> ThreadsToCheckpoint() ABSL_LOCKS_EXCLUDED(mu_);
  void TakeChangesLocked(ChangeBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartBatchThreads(ChangeBatch* batch) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<Worker*> RetireBatchThreads(ChangeBatch* batch,
                                          const std::vector<Worker*>& checkpointed)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The leader's part of ChangeRetryThreads: applies every queued change,
  // then waits (until `deadline`) for the threads started to join and the
  // others to be through the rebalance.
  // REQUIRES: `control` held.
  void RunChangeBatch(const ControlSlot& control, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Pauses input, measures the retry backlog and, if it is empty (or `drain`
  // has emptied it), stops the retry threads and switches in-order on; see
  // SetInOrder.
  // REQUIRES: `control` held.
  absl::StatusOr<SetOrderingResult> SwitchToInOrder(const ControlSlot& control, absl::Time deadline,
                                                    bool drain, const Cancellation* cancel)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The end of SwitchToInOrder, the retry backlog (`drained` records at the
  // start) empty: stops the retry threads and switches in-order on.
  // REQUIRES: the control slot held, the engine DRAINING.
  SetOrderingResult FinishSwitchToInOrder(int64_t drained) ABSL_LOCKS_EXCLUDED(mu_);
  // The part both switches of ordering share. The engine is DRAINING and
  // its input paused; whenever the primaries are quiet, `quiet` looks at the
  // engine and says whether the switch may go ahead (true) or must end (an
  // error). A Stop(), the caller's cancellation, an error from `quiet` or the
  // deadline (whose error `late` writes) roll the switch back
  // (AbandonSwitch) and return an error. On success the input stays paused:
  // the caller switches and calls EndSwitch(). `mode` names the mode in
  // messages; `*temporaries` are the retry threads a rollback stops.
  // REQUIRES: the control slot held.
  absl::Status PauseInputUntil(absl::string_view mode, absl::Time deadline,
                               const Cancellation* cancel, const std::vector<int>* temporaries,
                               absl::FunctionRef<absl::StatusOr<bool>()> quiet,
                               absl::FunctionRef<absl::Status()> late) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a PauseInputUntil that succeeded: ordering `to`, input resumed,
  // state RUNNING again.
  void EndSwitch(Ordering to) ABSL_LOCKS_EXCLUDED(mu_);
  // Rolls a switch back: input resumed, `temporaries` (retry threads it
  // started) stopped, state RUNNING again.
  // REQUIRES: the control slot held (by the switch it rolls back).
  void AbandonSwitch(const std::vector<int>& temporaries) ABSL_LOCKS_EXCLUDED(mu_);
  // The retry tiers (indexes) no running retry thread reads.
  std::vector<int> TiersWithoutThreads() const ABSL_LOCKS_EXCLUDED(mu_);
  // Starts retry threads as SetInOrder(false) says, then switches to `to`.
  // REQUIRES: `control` held.
  absl::StatusOr<std::vector<int>> SwitchOutOfInOrder(const ControlSlot& control, Ordering to)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Pauses input until the primaries are quiet, finds the parked keys in
  // the retry topic and switches to key order; returns how many keys are
  // parked. Keeps reading until `deadline` if the retry topic cannot be
  // read. See SetOrderingMode.
  // REQUIRES: `control` held.
  absl::StatusOr<int64_t> SwitchToKeyOrder(const ControlSlot& control, absl::Time deadline,
                                           const Cancellation* cancel) ABSL_LOCKS_EXCLUDED(mu_);
  // The records of the retry topic not yet committed by the retry group
  // that park their key. Blocks up to `timeout`; takes no engine lock.
  absl::StatusOr<std::vector<ParkedRecord>> ReadParkedRecords(absl::Duration timeout) const;
  // Start()'s background check of the backlog when in order is configured;
  // frees `control`, which Start() took for it, when done.
  void StartInOrder(ControlSlot control) ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes waits on mu_ whose condition reads `cancel` when it is cancelled.
  Cancellation::Subscription WakeOnCancel(Cancellation* cancel) ABSL_LOCKS_EXCLUDED(mu_);

  const EngineOptions options_;
  const std::unique_ptr<Processor> processor_;
  // The producer the threads share, and its replacement after a fatal error.
  ProducerSlot producers_;
  const std::unique_ptr<kafka::GroupLagProbe> retry_lag_;
  // ProbeKafka's client, made on its first call; the lock guards only the
  // pointer, never held across the probe itself.
  mutable absl::Mutex cluster_probe_mu_;
  mutable std::unique_ptr<kafka::ClusterProbe> cluster_probe_ ABSL_GUARDED_BY(cluster_probe_mu_);
  LatestMeasurement measured_retry_backlog_;
  // The last kept MeasureTierBacklogs: the ticket it was measured under
  // (the same sequence as measured_retry_backlog_'s) and each tier's value.
  mutable absl::Mutex tier_backlog_mu_;
  LatestMeasurement::Ticket tier_backlog_ticket_ ABSL_GUARDED_BY(tier_backlog_mu_) = 0;
  std::vector<int64_t> tier_backlog_ ABSL_GUARDED_BY(tier_backlog_mu_);
  std::vector<PartitionBacklog> partition_backlog_ ABSL_GUARDED_BY(tier_backlog_mu_);
  std::atomic<Ordering> ordering_;
  std::atomic<bool> input_paused_{false};
  DownstreamGate gate_;
  KeyParking parking_;
  // See WorkerContext: set while SwitchToKeyOrder runs; the retry threads'
  // keyed records on their way back to the retry topic.
  std::atomic<bool> key_order_coming_{false};
  const std::shared_ptr<std::atomic<int64_t>> keyed_sends_back_ =
      std::make_shared<std::atomic<int64_t>>(0);
  const WorkerContext context_;

  mutable absl::Mutex mu_;  // Guards the fields below.
  EngineState state_ ABSL_GUARDED_BY(mu_) = EngineState::kCreated;
  // The control slot is taken (see ControlSlot).
  bool control_busy_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Changes of the retry threads waiting for the control slot, oldest first.
  std::vector<std::shared_ptr<PendingChange>> pending_changes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Worker>> primaries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Worker>> retries_ ABSL_GUARDED_BY(mu_);
  // Threads stopped recently, kept for RecentlyStopped(); older ones are
  // folded into retired_totals_, so a long run keeps no per-thread state.
  struct Retired {
    std::shared_ptr<const ThreadStats> stats;
    absl::Time stopped_at;
  };
  std::vector<Retired> retired_ ABSL_GUARDED_BY(mu_);
  EngineTotals retired_totals_ ABSL_GUARDED_BY(mu_);

  // Runs StartInOrder(); started by Start(), joined by Stop().
  std::thread start_in_order_thread_ ABSL_GUARDED_BY(mu_);

  // What the autoscaler sees of the engine (engine.cc), and the autoscaler:
  // null while retry.autoscale is off. Started by Start(), stopped by Stop()
  // before the workers; last, so that it goes first.
  class Scaling;
  const std::unique_ptr<Scaling> scaling_;
  const std::unique_ptr<Autoscaler> autoscaler_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_ENGINE_H_
