// Elastic retry threads (retry.autoscale): one thread that, about once a
// second, measures the retry backlog of each tier, looks at the tier's retry
// threads, and starts or stops retry threads of one tier (the next tier
// that needs it, in turn) through the engine's own control operations
// (Engine::StartRetryThreads / StopRetryThreadsById, reached through the
// narrow ScalingTarget below, not Engine itself). Those serialise on the
// engine's control slot and checkpoint the retry group around the
// rebalance, so automatic and manual changes never race.
//
// The decision itself is PlanScaling(), a pure function of what was
// observed; the Autoscaler only observes, acts and records what it did.
//
// Thread-safety: Start() and Stop() are for the owner (the Engine); Events()
// may be called from any thread and takes no lock the autoscaler holds
// across anything that blocks.
#ifndef RETRYD_SERVER_ENGINE_AUTOSCALER_H_
#define RETRYD_SERVER_ENGINE_AUTOSCALER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/api/options.h"
#include "server/engine/api/scaling_event.h"
#include "server/engine/stats/thread_stats.h"

namespace retryd::engine {

// The few engine calls the autoscaler makes. The engine implements it;
// a test may too.
class ScalingTarget {
 public:
  virtual ~ScalingTarget() = default;

  // True while retry threads may be started or stopped: the engine runs
  // (not draining or stopping) and is not in order.
  virtual bool Scalable() const = 0;
  // As Engine::MeasureRetryBacklog, Threads, StartRetryThreads and
  // StopRetryThreadsById (graceful).
  // The retry backlog of each tier (Engine::MeasureTierBacklogs).
  virtual absl::StatusOr<std::vector<int64_t>> MeasureTierBacklogs(absl::Duration timeout) = 0;
  virtual std::vector<std::shared_ptr<const ThreadStats>> Threads() const = 0;
  virtual absl::StatusOr<std::vector<int>> StartRetryThreads(int count, int tier,
                                                             absl::Time deadline) = 0;
  virtual absl::StatusOr<std::vector<int>> StopRetryThreadsById(const std::vector<int>& ids,
                                                                absl::Time deadline) = 0;
};

// One running retry thread as a scaling decision sees it.
struct RetryThreadView {
  int id = 0;
  bool has_partitions = false;
  // How long it has had nothing to do: nothing assigned, or nothing held,
  // due, in flight or arriving. 0 while it has work.
  int64_t idle_ms = 0;
};

struct ScalingInput {
  int64_t backlog = -1;  // The retry backlog; -1 if it could not be measured.
  // Distinct retry-topic partitions the running retry threads hold between
  // them: once the group is settled, the topic's partition count.
  int partitions = 0;
  std::vector<RetryThreadView> threads;  // The running retry threads.
};

struct ScalingPlan {
  int start = 0;  // Retry threads to start (then nothing stops).
  std::string start_reason;
  struct Stop {
    int id;
    std::string reason;
  };
  std::vector<Stop> stop;  // Retry threads to stop.
};

// What to do, given `input`, under `options` (min_threads, max_threads,
// autoscale). Starts: up to min_threads if fewer run; one thread if the
// backlog is above zero and none runs; else, while the backlog exceeds
// backlog_per_thread for each running thread, as many as the backlog asks
// for, at most max_threads and at most one per partition. Stops, only when
// nothing starts: threads idle for idle_exit_ms, those without partitions
// first, never below min_threads, never the last one while the backlog is
// above zero or unknown, and one with partitions only while the threads
// left would each have at most backlog_per_thread.
ScalingPlan PlanScaling(const ScalingInput& input, const RetryOptions& options);

class Autoscaler {
 public:
  // How many events Events() keeps.
  static constexpr int kMaxEvents = 32;

  // `target` outlives the autoscaler; `options` say how to scale, and each
  // start or stop may take `operation_timeout`.
  Autoscaler(ScalingTarget& target, RetryOptions options, absl::Duration operation_timeout);
  ~Autoscaler();  // Stop()s.

  Autoscaler(const Autoscaler&) = delete;
  Autoscaler& operator=(const Autoscaler&) = delete;

  // Starts the thread; nothing after Stop().
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the thread: waits for an operation in progress (each is bounded
  // by shutdown_timeout_ms), then joins. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The most recent automatic starts and stops, oldest first.
  std::vector<ScalingEvent> Events() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // One look, and the action it calls for.
  void Step() ABSL_LOCKS_EXCLUDED(mu_);
  // What tier `tier` looks like, its backlog `backlog` (-1: unknown). A
  // fixed-delay tier counts only the share of its backlog on partitions
  // whose next record is due: more threads would not make a wait for a
  // due time shorter.
  ScalingInput Observe(int tier, int64_t backlog) const;
  // Carries out `plan` for tier `tier`.
  void Act(const ScalingPlan& plan, int tier) ABSL_LOCKS_EXCLUDED(mu_);
  // REQUIRES: reasons.size() == ids.size().
  void Record(const std::vector<int>& ids, bool started, const std::vector<std::string>& reasons)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Logs a failed operation, once until the next success or another error.
  void NoteFailure(const std::string& what) ABSL_LOCKS_EXCLUDED(mu_);

  ScalingTarget& target_;
  const RetryOptions options_;
  const absl::Duration tick_;
  const absl::Duration operation_timeout_;

  mutable absl::Mutex mu_;  // Guards the fields below; never held across a call to the engine.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  std::deque<ScalingEvent> events_ ABSL_GUARDED_BY(mu_);  // Oldest first.
  std::string last_failure_ ABSL_GUARDED_BY(mu_);
  int next_tier_ = 0;  // The tier looked at first next time; only Run()'s thread uses it.
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_AUTOSCALER_H_
