// The engine's implementation behind api/engine.h (Engine holds an
// Engine::Impl and forwards every public method to it): the primary and
// retry threads, the producer they share and the control slot; the
// switches of the ordering mode are an Impl::OrderingSwitch it owns
// (ordering_switch.h). See api/engine.h for what each public
// method does; the private part is documented here.
//
// Thread-safety: as Engine (thread-safe); the fields say which lock guards
// them.
#ifndef RETRYD_SERVER_ENGINE_ENGINE_IMPL_H_
#define RETRYD_SERVER_ENGINE_ENGINE_IMPL_H_
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
#include "server/engine/api/counters.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/options.h"
#include "server/engine/api/processor.h"
#include "server/engine/api/scaling_event.h"
#include "server/engine/handoff/producer_slot.h"
#include "server/engine/held/in_flight.h"
#include "server/engine/ordering/key_parking.h"
#include "server/engine/stats/latest_measurement.h"
#include "server/engine/stats/thread_stats.h"
#include "server/engine/steering/downstream_gate.h"
#include "server/engine/worker/worker_context.h"
#include "server/kafka/producer.h"
#include "server/kafka/topics.h"

namespace retryd::engine {

class Autoscaler;
class Worker;

class Engine::Impl {
 public:
  static absl::StatusOr<std::unique_ptr<Impl>> Create(EngineOptions options,
                                                      std::unique_ptr<Processor> processor);
  ~Impl();  // Stop()s.

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  absl::Status Start();

  void Stop();

  DownstreamGate::Snapshot downstream() const { return gate_.snapshot(); }

  absl::StatusOr<RetryThreadChangeResult> ChangeRetryThreads(
      RetryThreadChange change, absl::Time deadline = absl::InfiniteFuture())
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<std::vector<int>> StartRetryThreads(int count,
                                                     absl::Time deadline = absl::InfiniteFuture(),
                                                     int tier = 0);

  absl::StatusOr<std::vector<int>> StopRetryThreads(int count, bool graceful,
                                                    absl::Time deadline = absl::InfiniteFuture(),
                                                    int tier = 0);

  absl::StatusOr<std::vector<int>> StopRetryThreadsById(
      const std::vector<int>& ids, bool graceful, absl::Time deadline = absl::InfiniteFuture());

  absl::StatusOr<SetOrderingResult> SetInOrder(bool in_order, bool drain_retries,
                                               absl::Time deadline = absl::InfiniteFuture(),
                                               Cancellation* cancel = nullptr);

  absl::StatusOr<SetOrderingResult> SetOrderingMode(Ordering ordering, bool drain_retries,
                                                    absl::Time deadline = absl::InfiniteFuture(),
                                                    Cancellation* cancel = nullptr);

  Ordering ordering() const { return ordering_.load(std::memory_order_relaxed); }
  bool in_order() const { return ordering() == Ordering::kInOrder; }
  KeyParking::Summary ParkedKeys() const { return parking_.summary(); }
  InFlightList ListInFlight(size_t limit, absl::Time deadline, Cancellation* cancel = nullptr) const
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<int> DeadLetterRecord(const RecordCoordinates& record, absl::Time deadline,
                                       Cancellation* cancel = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  EngineState state() const;
  const EngineOptions& options() const { return options_; }

  absl::Status ProbeKafka(absl::Duration timeout) const;

  absl::StatusOr<int64_t> MeasureRetryBacklog(absl::Duration timeout);
  absl::StatusOr<std::vector<int64_t>> MeasureTierBacklogs(absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(tier_backlog_mu_);
  std::vector<int64_t> TierBacklogs(const std::vector<std::shared_ptr<const ThreadStats>>& running)
      const ABSL_LOCKS_EXCLUDED(tier_backlog_mu_);
  std::vector<PartitionBacklog> PartitionBacklogs() const ABSL_LOCKS_EXCLUDED(tier_backlog_mu_);

  std::vector<std::shared_ptr<const ThreadStats>> Threads() const;
  std::vector<std::shared_ptr<const ThreadStats>> RecentlyStopped(absl::Duration window) const;
  EngineTotals Totals() const;
  absl::Status ThreadFailure() const;
  absl::Status Liveness() const;
  absl::Status Readiness() const;
  int64_t producer_replacements() const { return producers_.replacements(); }
  absl::Status RaiseProducerFatalErrorForTest() const;
  int64_t RetryBacklog(const std::vector<std::shared_ptr<const ThreadStats>>& running) const;
  std::vector<ScalingEvent> ScalingEvents() const;

 private:
  // The switches of the ordering mode: a part of the Impl working on its
  // state, under its locks (ordering_switch.h).
  class OrderingSwitch;
  // The application of the queued changes of the retry threads: a part of
  // the Impl working on retries_ and pending_changes_, under mu_
  // (retry_thread_pool.h).
  class RetryThreadPool;

  Impl(EngineOptions options, std::unique_ptr<Processor> processor,
       std::unique_ptr<kafka::Producer> producer, std::unique_ptr<kafka::GroupLagProbe> retry_lag);

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
    friend class Impl;
    // REQUIRES: impl->control_busy_ was set for this slot.
    explicit ControlSlot(Impl* engine) : engine_(engine) {}
    Impl* engine_;  // Null once moved from.
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
  int RetryThreadCount() const ABSL_LOCKS_EXCLUDED(mu_);
  // When a graceful stop starting now must have ended.
  absl::Time StopDeadline() const {
    return absl::Now() + absl::Milliseconds(options_.shutdown_timeout_ms);
  }
  // A change of the retry threads waiting in pending_changes_ (see
  // ChangeRetryThreads); guarded by mu_ once queued (retry_thread_pool.h).
  struct PendingChange;
  // The records of the retry topic not yet committed by the retry group
  // that park their key. Blocks up to `timeout`; takes no engine lock.
  absl::StatusOr<std::vector<ParkedRecord>> ReadParkedRecords(absl::Duration timeout) const;
  // The parts of Start(), in order: the producer learns the topics it
  // produces to (a failure only logged); the configured primaries and
  // retry threads start, into primaries_ and retries_ (the first that does
  // not start ends it with its error, the caller Stop()s).
  void PrepareProducedTopics();
  absl::Status StartConfiguredThreads() ABSL_LOCKS_EXCLUDED(mu_);
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
  // The switches of the ordering mode (SetInOrder, SetOrderingMode); it
  // works on the fields here and below (see ordering_switch.h).
  const std::unique_ptr<OrderingSwitch> ordering_switch_;
  // Applies the queued changes of the retry threads (ChangeRetryThreads'
  // leader runs its RunChangeBatch); works on the fields below.
  const std::unique_ptr<RetryThreadPool> retry_pool_;

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

#endif  // RETRYD_SERVER_ENGINE_ENGINE_IMPL_H_
