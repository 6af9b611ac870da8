// Engine::Impl::RetryThreadPool: the application of a change of the retry
// threads (ChangeRetryThreads, engine_threads.cc). The leader of a batch of
// queued changes runs RunChangeBatch: the planner (PlanThreadChanges,
// thread_planner.h) decides every change in turn, and the pool checkpoints
// the running threads, takes the threads it stops out of the Impl's
// retries_, stops them, starts the new ones, retires the stopped and waits
// for the group to settle. Engine::Impl owns one; it works on the Impl's
// retry threads and queued changes, under the Impl's locks.
//
// Thread-safety: as Engine::Impl (thread-safe). It has no lock of its own:
// what it touches (retries_, next_id_, pending_changes_ and the changes in
// it) is the Impl's, guarded by the Impl's mu_; a batch runs holding the
// control slot, and never holds mu_ across a thread's start, stop or join.
#ifndef RETRYD_SERVER_ENGINE_RETRY_THREAD_POOL_H_
#define RETRYD_SERVER_ENGINE_RETRY_THREAD_POOL_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/engine/api/engine.h"
#include "server/engine/engine_impl.h"
#include "server/engine/stats/thread_stats.h"
#include "server/engine/thread_planner.h"

namespace retryd::engine {

// Guarded by the engine's mu_ from when it is queued.
struct Engine::Impl::PendingChange {
  RetryThreadChange change;
  // A leader took it: it is decided (status, result) and no longer withdrawn
  // at its deadline.
  bool taken = false;
  absl::Status status;
  RetryThreadChangeResult result;
  // Its batch has stopped the threads it stops and started those it starts.
  bool applied = false;
  std::vector<std::shared_ptr<const ThreadStats>> joining;  // Of the threads it started.
};

class Engine::Impl::RetryThreadPool {
 public:
  // `engine` outlives this pool; only its address is kept here (the Impl
  // constructs its pool before it is fully constructed).
  explicit RetryThreadPool(Impl& engine) : engine_(engine) {}

  RetryThreadPool(const RetryThreadPool&) = delete;
  RetryThreadPool& operator=(const RetryThreadPool&) = delete;

  // The leader's part of ChangeRetryThreads: applies every queued change,
  // then waits (until `deadline`) for the threads started to join and the
  // others to be through the rebalance.
  // REQUIRES: `control` held.
  void RunChangeBatch(const ControlSlot& control, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);

 private:
  // What a batch decided, and the workers it starts and stops.
  struct ChangeBatch;
  // What the queued changes would do to the running retry threads, decided
  // in turn (PlanThreadChanges); takes nothing.
  // REQUIRES: the control slot held by the caller.
  ThreadPlan PlanChangesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_.mu_);
  // The parts of RunChangeBatch, in order (see retry_thread_pool.cc).
  std::vector<Worker*> ThreadsToCheckpoint() ABSL_LOCKS_EXCLUDED(engine_.mu_);
  void TakeChangesLocked(ChangeBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_.mu_);
  void StartBatchThreads(ChangeBatch* batch) ABSL_LOCKS_EXCLUDED(engine_.mu_);
  std::vector<Worker*> RetireBatchThreads(ChangeBatch* batch,
                                          const std::vector<Worker*>& checkpointed)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);

  Impl& engine_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_RETRY_THREAD_POOL_H_
