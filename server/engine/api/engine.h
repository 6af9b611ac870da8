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

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/engine/api/cancellation.h"
#include "server/engine/api/counters.h"
#include "server/engine/api/downstream.h"
#include "server/engine/api/in_flight.h"
#include "server/engine/api/options.h"
#include "server/engine/api/parked_keys.h"
#include "server/engine/api/processor.h"
#include "server/engine/api/scaling_event.h"
#include "server/engine/api/thread_role.h"

namespace retryd::engine {

// A thread's live stats (stats/thread_stats.h, retryd_engine_stats): callers
// that read them include that header.
class ThreadStats;

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
  DownstreamSnapshot downstream() const;

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
      RetryThreadChange change, absl::Time deadline = absl::InfiniteFuture());

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

  Ordering ordering() const;
  bool in_order() const;
  // The keys parked now (key order); all zero in the other modes.
  ParkedKeysSummary ParkedKeys() const;
  // The `limit` oldest records the running threads hold (in a processor
  // call, waiting for their due time, waiting behind a held record,
  // deferred), oldest first. Asks every thread (Worker::Post) and waits for
  // the answers until `deadline`, or until `cancel` is cancelled. Read-only;
  // takes no control slot.
  InFlightList ListInFlight(size_t limit, absl::Time deadline,
                            Cancellation* cancel = nullptr) const;

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
                                       Cancellation* cancel = nullptr);

  EngineState state() const;
  const EngineOptions& options() const;

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
  absl::StatusOr<std::vector<int64_t>> MeasureTierBacklogs(absl::Duration timeout);
  // Each tier's retry backlog as last measured; before any measurement,
  // what its running retry threads know of (their lag plus what they hold).
  // `running` is Threads().
  std::vector<int64_t> TierBacklogs(
      const std::vector<std::shared_ptr<const ThreadStats>>& running) const;
  // Each retry topic partition's backlog as last measured by
  // MeasureTierBacklogs (or MeasureRetryBacklog), by tier, then partition;
  // empty before the first measurement.
  std::vector<PartitionBacklog> PartitionBacklogs() const;

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
  int64_t producer_replacements() const;
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
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);

  const std::unique_ptr<Impl> impl_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_ENGINE_H_
