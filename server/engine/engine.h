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
#ifndef RETRYD_SERVER_ENGINE_ENGINE_H_
#define RETRYD_SERVER_ENGINE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/options.h"
#include "server/engine/processor.h"
#include "server/engine/thread_stats.h"
#include "server/engine/worker.h"
#include "server/kafka/producer.h"
#include "server/kafka/topics.h"

namespace retryd {

// Sums over every thread the engine ran, stopped ones included.
struct EngineTotals {
  int64_t consumed = 0;         // Records the primary threads processed (first attempts).
  int64_t processed = 0;        // Processor calls, all threads.
  int64_t succeeded = 0;
  int64_t failed_attempts = 0;
  int64_t sent_to_retry = 0;
  int64_t dead_lettered = 0;
  int64_t in_flight = 0;
  // Retry records not yet done: the retry group's committed lag on the retry
  // topic, as last measured (MeasureRetryBacklog); before any measurement,
  // the retry threads' own lag plus the records they hold.
  int64_t retry_backlog = 0;
};

enum class EngineState {
  kCreated,   // Not started.
  kRunning,
  kDraining,  // SetInOrder(true, drain_retries) in progress: input paused.
  kStopping,
  kStopped,
};
const char* EngineStateName(EngineState state);

struct SetInOrderResult {
  bool in_order = false;
  std::vector<int> stopped_thread_ids;  // Retry threads a drain stopped.
  int64_t drained_records = 0;          // Retry backlog a drain emptied.
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
  absl::Status Start();

  // Graceful stop: primaries first (they feed the retry topic), then retry
  // threads, each finishing its hand-offs and committing; then the producer
  // flushes. Idempotent; blocks until done.
  void Stop();

  // Control operations (StartRetryThreads, StopRetryThreads*, SetInOrder)
  // run one at a time; a call waits for the one before it, up to its
  // deadline (DEADLINE_EXCEEDED).

  // Starts `count` more retry threads; returns their ids once each has
  // joined the retry group, or when `deadline` passes (then the ids started,
  // some perhaps still STARTING). FAILED_PRECONDITION while in order or not
  // running; INVALID_ARGUMENT if count < 1 or the total would pass
  // retry.max_threads (the message names the cap).
  absl::StatusOr<std::vector<int>> StartRetryThreads(
      int count, absl::Time deadline = absl::InfiniteFuture());

  // Stops the `count` most recently started retry threads (all of them if
  // fewer run); returns their ids. INVALID_ARGUMENT if count < 1.
  absl::StatusOr<std::vector<int>> StopRetryThreads(
      int count, bool graceful, absl::Time deadline = absl::InfiniteFuture());

  // Stops the retry threads `ids`; NOT_FOUND (naming them) if any is not a
  // running retry thread, and then stops none.
  absl::StatusOr<std::vector<int>> StopRetryThreadsById(
      const std::vector<int>& ids, bool graceful, absl::Time deadline = absl::InfiniteFuture());

  // The in-order toggle (see control.proto SetInOrder). true while retry
  // threads run: FAILED_PRECONDITION saying what to do, unless
  // `drain_retries`: pause input, wait until the retry backlog is empty,
  // stop the retry threads, switch, resume input. If `deadline` passes
  // first: DEADLINE_EXCEEDED, input resumed, nothing else changed.
  absl::StatusOr<SetInOrderResult> SetInOrder(bool in_order, bool drain_retries,
                                              absl::Time deadline = absl::InfiniteFuture());

  bool in_order() const { return in_order_.load(std::memory_order_relaxed); }
  EngineState state() const;
  const EngineOptions& options() const { return options_; }

  // Asks the cluster for its broker list; OK if it answered within
  // `timeout`. Blocks; takes no engine lock.
  absl::Status ProbeKafka(absl::Duration timeout) const;

  // Measures the retry backlog (records on the retry topic whose outcome the
  // retry group has not committed) and keeps it for Totals(). Blocks up to
  // `timeout`; takes no engine lock. Called periodically by whoever reports
  // it (the control server's prober).
  absl::StatusOr<int64_t> MeasureRetryBacklog(absl::Duration timeout);

  // Stats of the threads that run now, by id.
  std::vector<std::shared_ptr<const ThreadStats>> Threads() const;
  // Stats of threads stopped within `window` (at most two minutes), by id.
  std::vector<std::shared_ptr<const ThreadStats>> RecentlyStopped(absl::Duration window) const;
  EngineTotals Totals() const;
  // OK while no running thread has FAILED; otherwise UNAVAILABLE naming the
  // first failed thread and why (its last error).
  absl::Status ThreadFailure() const;
  // EngineTotals::retry_backlog alone, without summing every counter.
  int64_t RetryBacklog() const;

 private:
  Engine(EngineOptions options, std::unique_ptr<Processor> processor,
         std::unique_ptr<kafka::Producer> producer,
         std::unique_ptr<kafka::GroupLagProbe> retry_lag);

  absl::StatusOr<std::unique_ptr<Worker>> StartWorker(ThreadRole role);
  static void StopWorkers(std::vector<std::unique_ptr<Worker>>& workers, bool graceful);
  void Retire(std::vector<std::unique_ptr<Worker>>& workers) ABSL_LOCKS_EXCLUDED(mu_);

  // Control operations run one at a time: Begin waits (up to `deadline`)
  // until none is in progress and marks one; End clears the mark. The work
  // between them runs without mu_ held.
  absl::Status BeginControl(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void EndControl() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CheckRunning() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<int>> StopRetryThreadsLocked(std::vector<int> ids, bool graceful);
  absl::StatusOr<SetInOrderResult> DrainAndSetInOrder(absl::Time deadline);

  const EngineOptions options_;
  const std::unique_ptr<Processor> processor_;
  const std::unique_ptr<kafka::Producer> producer_;
  const std::unique_ptr<kafka::GroupLagProbe> retry_lag_;
  std::atomic<int64_t> measured_retry_backlog_{-1};  // -1: never measured.
  std::atomic<bool> in_order_;
  std::atomic<bool> input_paused_{false};
  const WorkerContext context_;

  mutable absl::Mutex mu_;  // Guards the fields below.
  EngineState state_ ABSL_GUARDED_BY(mu_) = EngineState::kCreated;
  bool control_busy_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
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
};

}  // namespace retryd

#endif  // RETRYD_SERVER_ENGINE_ENGINE_H_
