// Engine: retry threads started and stopped at runtime (ChangeRetryThreads
// and its wrappers). Changes queue for the control slot; whichever caller
// finds the slot free leads: it takes every queued change, decides each in
// turn (PlanThreadChanges, thread_planner.h), and applies them all as one
// change of the retry group's membership. The others wait for their own
// change's outcome.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/engine/engine_impl.h"
#include "server/engine/thread_planner.h"
#include "server/engine/worker/worker.h"

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

// Owned by the leader that runs it (RunChangeBatch).
struct Engine::Impl::ChangeBatch {
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

absl::Status Refused(absl::StatusCode code, absl::string_view reason, absl::string_view message) {
  return WithReason(absl::Status(code, message), reason);
}

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// A queued change may go on: it was taken, or the control slot is free (the
// caller leads), or the engine is not simply running (the caller withdraws).
struct ChangeMayGo {
  bool operator()() const { return *taken || !*busy || *state != EngineState::kRunning; }
  const bool* taken;
  const bool* busy;
  const EngineState* state;
};

}  // namespace

absl::StatusOr<RetryThreadChangeResult> Engine::Impl::ChangeRetryThreads(RetryThreadChange change,
                                                                         absl::Time deadline) {
  auto me = std::make_shared<PendingChange>();
  me->change = std::move(change);
  std::optional<ControlSlot> control;  // Set if this call leads.
  {
    absl::MutexLock lock(&mu_);
    pending_changes_.push_back(me);
    const ChangeMayGo may_go{&me->taken, &control_busy_, &state_};
    mu_.AwaitWithDeadline(absl::Condition(&may_go), deadline);
    if (!me->taken) {
      absl::Status withdrawn;
      if (state_ == EngineState::kDraining) {
        withdrawn = DrainRunningError();
      } else if (absl::Status s = CheckRunning(); !s.ok()) {
        withdrawn =
            WithReason(absl::Status(s.code(), absl::StrCat(s.message(), "; nothing changed")),
                       reason::kEngineNotRunning);
      } else if (control_busy_) {
        withdrawn = Refused(absl::StatusCode::kDeadlineExceeded, reason::kControlBusy,
                            "another control operation was still in progress when the deadline "
                            "passed; nothing changed");
      }
      if (!withdrawn.ok()) {
        pending_changes_.erase(std::find(pending_changes_.begin(), pending_changes_.end(), me));
        return withdrawn;
      }
      control.emplace(TakeControlLocked());
    }
  }
  if (control.has_value()) {
    RunChangeBatch(*control, deadline);  // Takes `me` too.
    control.reset();
  }
  std::vector<std::shared_ptr<const ThreadStats>> joining;
  {
    absl::MutexLock lock(&mu_);
    if (!me->status.ok()) return me->status;
    mu_.AwaitWithDeadline(absl::Condition(&me->applied), deadline);
    if (!me->status.ok()) return me->status;
    joining = me->joining;
  }
  for (const auto& stats : joining) stats->joined.WaitForNotificationWithDeadline(deadline);
  absl::MutexLock lock(&mu_);
  return me->result;
}

ThreadPlan Engine::Impl::PlanChangesLocked() const {
  mu_.AssertHeld();
  RetryThreadsNow now{.next_id = next_id_, .in_order = in_order()};
  for (const auto& worker : retries_) {
    now.running.push_back({.id = worker->id(), .tier = worker->tier()});
  }
  std::vector<RetryThreadChange> changes;
  for (const auto& pending : pending_changes_) changes.push_back(pending->change);
  return PlanThreadChanges(options_.retry, now, changes);
}

// The retry threads to checkpoint before the batch: if the queued changes
// start or stop any, all but those stopped without grace (which leave
// without committing).
std::vector<Worker*> Engine::Impl::ThreadsToCheckpoint() {
  std::vector<Worker*> checkpointed;
  absl::MutexLock lock(&mu_);
  const ThreadPlan plan = PlanChangesLocked();
  if (!plan.changes_threads()) return checkpointed;
  for (const auto& worker : retries_) {
    if (!Contains(plan.stop_now, worker->id())) checkpointed.push_back(worker.get());
  }
  return checkpointed;
}

// Decides every queued change and takes it into `batch`, with the workers
// it stops (out of retries_).
void Engine::Impl::TakeChangesLocked(ChangeBatch* batch) {
  mu_.AssertHeld();
  ThreadPlan plan = PlanChangesLocked();
  next_id_ = plan.next_id;
  for (size_t i = 0; i < pending_changes_.size(); ++i) {
    const std::shared_ptr<PendingChange>& pending = pending_changes_[i];
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
  pending_changes_.clear();
  for (auto it = retries_.begin(); it != retries_.end();) {
    const int id = (*it)->id();
    if (Contains(plan.stop_graceful, id) || Contains(plan.stop_now, id)) {
      (Contains(plan.stop_graceful, id) ? batch->graceful : batch->now).push_back(std::move(*it));
      it = retries_.erase(it);
    } else {
      ++it;
    }
  }
}

// Starts the batch's new threads and adds them to retries_; a thread that
// does not start fails the change that asked for it.
void Engine::Impl::StartBatchThreads(ChangeBatch* batch) {
  std::vector<std::unique_ptr<Worker>> started;
  std::vector<std::pair<PendingChange*, absl::Status>> failed;
  for (const auto& [id, change] : batch->start) {
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        StartWorker(ThreadRole::kRetry, id, change->change.tier);
    if (worker.ok()) {
      started.push_back(*std::move(worker));
    } else {
      LogWarning("engine: retry thread ", id, " did not start: ", worker.status().message());
      failed.emplace_back(change, worker.status());
    }
  }
  absl::MutexLock lock(&mu_);
  for (auto& worker : started) {
    batch->started_ids.push_back(worker->id());
    batch->joining.push_back(worker->stats());
    for (const auto& [id, change] : batch->start) {
      if (id == worker->id()) change->joining.push_back(worker->stats());
    }
    retries_.push_back(std::move(worker));
  }
  for (auto& [change, status] : failed) {
    change->status = absl::Status(
        status.code(), absl::StrCat("a retry thread did not start (", status.message(), ")"));
  }
}

// Joins and retires the threads the batch stops and marks its changes
// applied; returns the `checkpointed` threads that stay.
std::vector<Worker*> Engine::Impl::RetireBatchThreads(ChangeBatch* batch,
                                                      const std::vector<Worker*>& checkpointed) {
  for (auto& worker : batch->graceful) worker->Join();
  for (auto& worker : batch->now) worker->Join();
  for (const auto& worker : batch->graceful) batch->stopped_ids.push_back(worker->id());
  for (const auto& worker : batch->now) batch->stopped_ids.push_back(worker->id());
  // Picked before the others are destroyed.
  std::vector<Worker*> remaining;
  for (Worker* worker : checkpointed) {
    if (!Contains(batch->stopped_ids, worker->id())) remaining.push_back(worker);
  }
  Retire(batch->graceful);
  Retire(batch->now);
  absl::MutexLock lock(&mu_);
  std::vector<int> running;
  for (const auto& worker : retries_) running.push_back(worker->id());
  for (const auto& change : batch->changes) {
    change->applied = true;
    if (change->status.ok()) change->result.running = running;
  }
  return remaining;
}

void Engine::Impl::RunChangeBatch(const ControlSlot& control, absl::Time deadline) {
  AssertControlHeld(&control);
  // Every retry thread hands back what it holds and commits before the
  // membership changes (see CheckpointRetryThreads), so the rebalance
  // repeats nothing. The time that takes gathers the changes that arrive
  // meanwhile into this batch.
  const std::vector<Worker*> checkpointed = ThreadsToCheckpoint();
  CheckpointRetryThreads(checkpointed, absl::InfiniteFuture());
  ChangeBatch batch;
  {
    absl::MutexLock lock(&mu_);
    TakeChangesLocked(&batch);
  }
  // The leaves and the joins together, so that the broker folds them into
  // one rebalance.
  const absl::Time stop_deadline = StopDeadline();
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
      std::min(deadline, absl::Now() + absl::Milliseconds(options_.shutdown_timeout_ms) +
                             absl::Milliseconds(SessionTimeoutMs()));
  for (const auto& stats : batch.joining) stats->joined.WaitForNotificationWithDeadline(deadline);
  ReleaseRetryThreads(remaining, settle);
}

namespace {

// The ids one list of a change's result holds.
absl::StatusOr<std::vector<int>> Ids(absl::StatusOr<RetryThreadChangeResult> result,
                                     std::vector<int> RetryThreadChangeResult::*ids) {
  if (!result.ok()) return result.status();
  return std::move(*result.*ids);
}

}  // namespace

absl::StatusOr<std::vector<int>> Engine::Impl::StartRetryThreads(int count, absl::Time deadline,
                                                                 int tier) {
  return Ids(ChangeRetryThreads({.kind = RetryThreadChange::Kind::kStart,
                                 .count = count,
                                 .ids = {},
                                 .graceful = true,
                                 .tier = tier},
                                deadline),
             &RetryThreadChangeResult::started);
}

absl::StatusOr<std::vector<int>> Engine::Impl::StopRetryThreads(int count, bool graceful,
                                                                absl::Time deadline, int tier) {
  return Ids(ChangeRetryThreads({.kind = RetryThreadChange::Kind::kStopCount,
                                 .count = count,
                                 .ids = {},
                                 .graceful = graceful,
                                 .tier = tier},
                                deadline),
             &RetryThreadChangeResult::stopped);
}

absl::StatusOr<std::vector<int>> Engine::Impl::StopRetryThreadsById(const std::vector<int>& ids,
                                                                    bool graceful,
                                                                    absl::Time deadline) {
  return Ids(
      ChangeRetryThreads(
          {.kind = RetryThreadChange::Kind::kStopIds, .ids = ids, .graceful = graceful}, deadline),
      &RetryThreadChangeResult::stopped);
}

}  // namespace retryd::engine
