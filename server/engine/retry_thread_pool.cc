// Engine::Impl::RetryThreadPool (retry_thread_pool.h): a batch of queued
// changes of the retry threads applied as one change of the retry group's
// membership.
#include "server/engine/retry_thread_pool.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/engine_impl.h"
#include "server/engine/thread_planner.h"
#include "server/engine/worker/worker.h"

namespace retryd::engine {

// Owned by the leader that runs it (RunChangeBatch).
struct Engine::Impl::RetryThreadPool::ChangeBatch {
  std::vector<std::shared_ptr<PendingChange>> changes;  // Taken, in arrival order.
  // The threads to start: reserved id, and the change that asked.
  std::vector<std::pair<int, PendingChange*>> start;
  // The threads to stop, out of retries_: gracefully, and not.
  std::vector<std::unique_ptr<Worker>> graceful;
  std::vector<std::unique_ptr<Worker>> now;
  // What was applied: the threads started (their stats, to wait for their
  // joins) and stopped.
  std::vector<std::shared_ptr<const ThreadStats>> joining;
  std::vector<int> started_ids;
  std::vector<int> stopped_ids;
};

namespace {

std::string IdList(const std::vector<int>& ids) { return absl::StrJoin(ids, ", "); }

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

ThreadPlan Engine::Impl::RetryThreadPool::PlanChangesLocked() const {
  engine_.mu_.AssertHeld();
  RetryThreadsNow now{.next_id = engine_.next_id_, .in_order = engine_.in_order()};
  for (const auto& worker : engine_.retries_) {
    now.running.push_back({.id = worker->id(), .tier = worker->tier()});
  }
  std::vector<RetryThreadChange> changes;
  for (const auto& pending : engine_.pending_changes_) changes.push_back(pending->change);
  return PlanThreadChanges(engine_.options_.retry, now, changes);
}

// The retry threads to checkpoint before the batch: if the queued changes
// start or stop any, all but those stopped without grace (which leave
// without committing).
std::vector<Worker*> Engine::Impl::RetryThreadPool::ThreadsToCheckpoint() {
  std::vector<Worker*> checkpointed;
  absl::MutexLock lock(&engine_.mu_);
  const ThreadPlan plan = PlanChangesLocked();
  if (!plan.changes_threads()) return checkpointed;
  for (const auto& worker : engine_.retries_) {
    if (!Contains(plan.stop_now, worker->id())) checkpointed.push_back(worker.get());
  }
  return checkpointed;
}

// Decides every queued change and takes it into `batch`, with the workers
// it stops (out of the Impl's retries_).
void Engine::Impl::RetryThreadPool::TakeChangesLocked(ChangeBatch* batch) {
  engine_.mu_.AssertHeld();
  ThreadPlan plan = PlanChangesLocked();
  engine_.next_id_ = plan.next_id;
  for (size_t i = 0; i < engine_.pending_changes_.size(); ++i) {
    const std::shared_ptr<PendingChange>& pending = engine_.pending_changes_[i];
    ThreadChangeDecision& decision = plan.decisions[i];
    pending->taken = true;
    pending->status = std::move(decision.status);
    if (pending->status.ok()) {
      for (int id : decision.start) batch->start.emplace_back(id, pending.get());
      pending->result.started = std::move(decision.start);
      pending->result.stopped = std::move(decision.stop);
      pending->result.running = plan.running;
    }
    batch->changes.push_back(pending);
  }
  engine_.pending_changes_.clear();
  for (auto it = engine_.retries_.begin(); it != engine_.retries_.end();) {
    const int id = (*it)->id();
    if (Contains(plan.stop_graceful, id) || Contains(plan.stop_now, id)) {
      (Contains(plan.stop_graceful, id) ? batch->graceful : batch->now).push_back(std::move(*it));
      it = engine_.retries_.erase(it);
    } else {
      ++it;
    }
  }
}

// Starts the batch's new threads and adds them to the Impl's retries_; a
// thread that does not start fails the change that asked for it.
void Engine::Impl::RetryThreadPool::StartBatchThreads(ChangeBatch* batch) {
  std::vector<std::unique_ptr<Worker>> started;
  std::vector<std::pair<PendingChange*, absl::Status>> failed;
  for (const auto& [id, change] : batch->start) {
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        engine_.StartWorker(ThreadRole::kRetry, id, change->change.tier);
    if (worker.ok()) {
      started.push_back(*std::move(worker));
    } else {
      LogWarning("engine: retry thread ", id, " did not start: ", worker.status().message());
      failed.emplace_back(change, worker.status());
    }
  }
  absl::MutexLock lock(&engine_.mu_);
  for (auto& worker : started) {
    batch->started_ids.push_back(worker->id());
    batch->joining.push_back(worker->stats());
    for (const auto& [id, change] : batch->start) {
      if (id == worker->id()) change->joining.push_back(worker->stats());
    }
    engine_.retries_.push_back(std::move(worker));
  }
  for (auto& [change, status] : failed) {
    change->status = absl::Status(
        status.code(), absl::StrCat("a retry thread did not start (", status.message(), ")"));
  }
}

// Joins and retires the threads the batch stops and marks its changes
// applied; returns the `checkpointed` threads that stay.
std::vector<Worker*> Engine::Impl::RetryThreadPool::RetireBatchThreads(
    ChangeBatch* batch, const std::vector<Worker*>& checkpointed) {
  for (auto& worker : batch->graceful) worker->Join();
  for (auto& worker : batch->now) worker->Join();
  for (const auto& worker : batch->graceful) batch->stopped_ids.push_back(worker->id());
  for (const auto& worker : batch->now) batch->stopped_ids.push_back(worker->id());
  // Picked before the others are destroyed.
  std::vector<Worker*> remaining;
  for (Worker* worker : checkpointed) {
    if (!Contains(batch->stopped_ids, worker->id())) remaining.push_back(worker);
  }
  engine_.Retire(batch->graceful);
  engine_.Retire(batch->now);
  absl::MutexLock lock(&engine_.mu_);
  std::vector<int> running;
  for (const auto& worker : engine_.retries_) running.push_back(worker->id());
  for (const auto& change : batch->changes) {
    change->applied = true;
    if (change->status.ok()) change->result.running = running;
  }
  return remaining;
}

void Engine::Impl::RetryThreadPool::RunChangeBatch(const ControlSlot& control,
                                                   absl::Time deadline) {
  engine_.AssertControlHeld(&control);
  // Every retry thread hands back what it holds and commits before the
  // membership changes (see CheckpointRetryThreads), so the rebalance
  // repeats nothing. The time that takes gathers the changes that arrive
  // meanwhile into this batch.
  const std::vector<Worker*> checkpointed = ThreadsToCheckpoint();
  engine_.CheckpointRetryThreads(checkpointed, absl::InfiniteFuture());
  ChangeBatch batch;
  {
    absl::MutexLock lock(&engine_.mu_);
    TakeChangesLocked(&batch);
  }
  // The leaves and the joins together, so that the broker folds them into
  // one rebalance.
  const absl::Time stop_deadline = engine_.StopDeadline();
  for (auto& worker : batch.graceful) worker->RequestStop(/*graceful=*/true, stop_deadline);
  for (auto& worker : batch.now) worker->RequestStop(/*graceful=*/false, stop_deadline);
  StartBatchThreads(&batch);
  const std::vector<Worker*> remaining = RetireBatchThreads(&batch, checkpointed);
  if (batch.started_ids.empty() && batch.stopped_ids.empty()) {
    // No membership change: no rebalance to wait for.
    for (Worker* worker : remaining) worker->ReleaseCheckpoint();
    return;
  }
  LogInfo("engine: retry threads: started [", IdList(batch.started_ids), "], stopped [",
          IdList(batch.stopped_ids), "] (", batch.changes.size(),
          batch.changes.size() > 1 ? " changes applied together)" : " change)");
  // Joining the group takes a rebalance (on the mock cluster, sometimes
  // two); the caller may wait for it. The running threads stay checkpointed
  // until the new ones have joined, and the control slot stays taken, so
  // no other operation stops a thread this one still waits on.
  const absl::Time settle =
      std::min(deadline, absl::Now() + absl::Milliseconds(engine_.options_.shutdown_timeout_ms) +
                             absl::Milliseconds(engine_.SessionTimeoutMs()));
  for (const auto& stats : batch.joining) stats->joined.WaitForNotificationWithDeadline(deadline);
  engine_.ReleaseRetryThreads(remaining, settle);
}

}  // namespace retryd::engine
