// Engine: retry threads started and stopped at runtime (ChangeRetryThreads
// and its wrappers). Changes queue for the control slot; whichever caller
// finds the slot free leads: it takes every queued change, decides each in
// turn, and applies them all as one change of the retry group's
// membership. The others wait for their own change's outcome.
#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/engine/worker/worker.h"

namespace retryd::engine {

// Guarded by the engine's mu_ from when it is queued.
struct Engine::PendingChange {
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

struct Engine::ChangeBatch {
  std::vector<std::shared_ptr<PendingChange>> changes;  // Taken, in arrival order.
  std::vector<int> stop_graceful;
  std::vector<int> stop_now;
  // The threads to start: reserved id, and the change that asked.
  std::vector<std::pair<int, PendingChange*>> start;
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

absl::StatusOr<RetryThreadChangeResult> Engine::ChangeRetryThreads(RetryThreadChange change,
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

bool Engine::DecideChangesLocked(bool take, ChangeBatch* batch) {
  mu_.AssertHeld();
  const RetryOptions& retry = options_.retry;
  const int tiers = static_cast<int>(retry.tiers.size());
  // The retry threads running now that no change so far stops, oldest first.
  std::vector<int> kept;
  std::map<int, int> tier_of;  // Of every thread running or starting, by id.
  for (const auto& worker : retries_) {
    kept.push_back(worker->id());
    tier_of[worker->id()] = worker->tier();
  }
  std::vector<int> starting;  // Ids reserved for threads to start.
  int next_id = next_id_;
  bool changes = false;
  for (const std::shared_ptr<PendingChange>& pending : pending_changes_) {
    const RetryThreadChange& c = pending->change;
    const bool tier_ok = c.tier >= 0 && c.tier < tiers;
    // The change's tier: its threads kept, oldest first, and how many run.
    std::vector<int> kept_in_tier;
    for (int id : kept) {
      if (tier_of[id] == c.tier) kept_in_tier.push_back(id);
    }
    int running = static_cast<int>(kept_in_tier.size());
    for (int id : starting) running += tier_of[id] == c.tier ? 1 : 0;
    const std::string of_tier =
        tiers > 1 && tier_ok ? absl::StrCat(" of tier ", retry.tiers[c.tier].topic) : "";
    absl::Status status;
    int start = 0;
    std::vector<int> stop;
    auto over_max = [&](int total) {
      return Refused(absl::StatusCode::kFailedPrecondition, reason::kMaxThreadsReached,
                     absl::StrCat(total, " retry threads", of_tier,
                                  " would be too many: retry.max_threads is ", retry.max_threads,
                                  tiers > 1 ? " a tier" : "", " and ", running,
                                  " run or are starting; nothing changed"));
    };
    auto invalid = [](absl::string_view message) {
      return Refused(absl::StatusCode::kInvalidArgument, reason::kInvalidField, message);
    };
    auto in_order_refusal = [] {
      return Refused(absl::StatusCode::kFailedPrecondition, reason::kInOrderActive,
                     "in-order mode excludes retry threads: switch it off first (SetInOrder "
                     "false, or SetOrderingMode); nothing changed");
    };
    switch (c.kind) {
      case RetryThreadChange::Kind::kStart:
        if (!tier_ok) {
          status = invalid(absl::StrCat("tier: there is no retry tier ", c.tier));
        } else if (c.count < 1) {
          status = invalid(absl::StrCat("count: must be at least 1, got ", c.count));
        } else if (in_order()) {
          status = in_order_refusal();
        } else if (running + c.count > retry.max_threads) {
          status = over_max(running + c.count);
        } else {
          start = c.count;
        }
        break;
      case RetryThreadChange::Kind::kStopCount:
        if (!tier_ok) {
          status = invalid(absl::StrCat("tier: there is no retry tier ", c.tier));
        } else if (c.count < 1) {
          status = invalid(absl::StrCat("count: must be at least 1, got ", c.count));
        } else {
          const int n = std::min<int>(c.count, static_cast<int>(kept_in_tier.size()));
          stop.assign(kept_in_tier.rbegin(), kept_in_tier.rbegin() + n);
        }
        break;
      case RetryThreadChange::Kind::kStopIds: {
        std::vector<int> unknown;
        for (int id : c.ids) {
          if (!Contains(kept, id)) unknown.push_back(id);
        }
        if (c.ids.empty()) {
          status = invalid("no thread ids given");
        } else if (!unknown.empty()) {
          status =
              Refused(absl::StatusCode::kNotFound, reason::kThreadNotFound,
                      absl::StrCat(unknown.size() > 1 ? "threads " : "thread ", IdList(unknown),
                                   unknown.size() > 1 ? " are not running retry threads"
                                                      : " is not a running retry thread",
                                   "; nothing stopped"));
        } else {
          stop = c.ids;
        }
        break;
      }
      case RetryThreadChange::Kind::kSetCount:
        if (!tier_ok) {
          status = invalid(absl::StrCat("tier: there is no retry tier ", c.tier));
        } else if (retry.autoscale.enabled) {
          status = Refused(absl::StatusCode::kFailedPrecondition, reason::kAutoscaleActive,
                           "retry.autoscale is on and sets the number of retry threads itself; "
                           "nothing changed. Turn it off in the config to set a count");
        } else if (c.count < 0) {
          status = invalid(absl::StrCat("target: must be at least 0, got ", c.count));
        } else if (c.count > retry.max_threads) {
          status = over_max(c.count);
        } else if (c.count > 0 && in_order()) {
          status = in_order_refusal();
        } else if (c.count > running) {
          start = c.count - running;
        } else if (running - c.count > static_cast<int>(kept_in_tier.size())) {
          status = Refused(absl::StatusCode::kAborted, reason::kConcurrentChange,
                           "a change applied together with this one starts threads it would "
                           "have to stop; nothing changed. Try again");
        } else {
          stop.assign(kept_in_tier.rbegin(), kept_in_tier.rbegin() + (running - c.count));
        }
        break;
    }
    if (status.ok() && !stop.empty() && !in_order()) {
      // The floor holds in every tier the stop touches.
      std::map<int, int> left, stopped;
      for (int id : kept) ++left[tier_of[id]];
      for (int id : starting) ++left[tier_of[id]];
      for (int id : stop) ++stopped[tier_of[id]];
      for (const auto& [tier, n] : stopped) {
        if (left[tier] - n >= retry.min_threads) continue;
        status = Refused(
            absl::StatusCode::kFailedPrecondition, reason::kMinThreadsReached,
            absl::StrCat("stopping ", n, " of the ", left[tier], " retry threads",
                         tiers > 1 ? absl::StrCat(" of tier ", retry.tiers[tier].topic) : "",
                         " would leave ", left[tier] - n, ", below retry.min_threads (",
                         retry.min_threads, "); nothing stopped"));
        break;
      }
    }
    if (status.ok()) {
      changes = changes || start > 0 || !stop.empty();
      for (int id : stop) kept.erase(std::find(kept.begin(), kept.end(), id));
      std::vector<int> started;
      for (int i = 0; i < start; ++i) {
        tier_of[next_id] = c.tier;
        started.push_back(next_id++);
      }
      starting.insert(starting.end(), started.begin(), started.end());
      if (batch != nullptr) {
        std::vector<int>& stops = c.graceful ? batch->stop_graceful : batch->stop_now;
        stops.insert(stops.end(), stop.begin(), stop.end());
      }
      if (take) {
        pending->result.started = started;
        pending->result.stopped = stop;
        for (int id : started) batch->start.emplace_back(id, pending.get());
      }
    }
    if (take) {
      pending->taken = true;
      pending->status = std::move(status);
    }
  }
  if (take) {
    next_id_ = next_id;
    std::vector<int> running = kept;
    running.insert(running.end(), starting.begin(), starting.end());
    for (const std::shared_ptr<PendingChange>& pending : pending_changes_) {
      if (pending->status.ok()) pending->result.running = running;
      batch->changes.push_back(pending);
    }
    pending_changes_.clear();
  }
  return changes;
}

void Engine::RunChangeBatch(const ControlSlot& control, absl::Time deadline) {
  AssertControlHeld(&control);
  // Every retry thread hands back what it holds and commits before the
  // membership changes (see CheckpointRetryThreads), so the rebalance
  // repeats nothing. The time that takes gathers the changes that arrive
  // meanwhile into this batch.
  std::vector<Worker*> checkpointed;
  {
    absl::MutexLock lock(&mu_);
    ChangeBatch planned;
    if (DecideChangesLocked(/*take=*/false, &planned)) {
      // A thread stopped without grace leaves without committing.
      for (const auto& worker : retries_) {
        if (!Contains(planned.stop_now, worker->id())) checkpointed.push_back(worker.get());
      }
    }
  }
  CheckpointRetryThreads(checkpointed, absl::InfiniteFuture());
  ChangeBatch batch;
  std::vector<std::unique_ptr<Worker>> graceful, now;
  {
    absl::MutexLock lock(&mu_);
    DecideChangesLocked(/*take=*/true, &batch);
    for (auto it = retries_.begin(); it != retries_.end();) {
      const int id = (*it)->id();
      if (Contains(batch.stop_graceful, id) || Contains(batch.stop_now, id)) {
        (Contains(batch.stop_graceful, id) ? graceful : now).push_back(std::move(*it));
        it = retries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // The leaves and the joins together, so that the broker folds them into
  // one rebalance.
  const absl::Time stop_deadline = StopDeadline();
  for (auto& worker : graceful) worker->RequestStop(/*graceful=*/true, stop_deadline);
  for (auto& worker : now) worker->RequestStop(/*graceful=*/false, stop_deadline);
  std::vector<std::unique_ptr<Worker>> started;
  std::vector<std::pair<PendingChange*, absl::Status>> failed;
  for (const auto& [id, change] : batch.start) {
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        StartWorker(ThreadRole::kRetry, id, change->change.tier);
    if (worker.ok()) {
      started.push_back(*std::move(worker));
    } else {
      LogWarning("engine: retry thread ", id, " did not start: ", worker.status().message());
      failed.emplace_back(change, worker.status());
    }
  }
  std::vector<std::shared_ptr<const ThreadStats>> joining;
  std::vector<int> started_ids;
  {
    absl::MutexLock lock(&mu_);
    for (auto& worker : started) {
      started_ids.push_back(worker->id());
      joining.push_back(worker->stats());
      for (const auto& [id, change] : batch.start) {
        if (id == worker->id()) change->joining.push_back(worker->stats());
      }
      retries_.push_back(std::move(worker));
    }
    for (auto& [change, status] : failed) {
      change->status = absl::Status(
          status.code(), absl::StrCat("a retry thread did not start (", status.message(), ")"));
    }
  }
  for (auto& worker : graceful) worker->Join();
  for (auto& worker : now) worker->Join();
  std::vector<int> stopped_ids;
  for (const auto& worker : graceful) stopped_ids.push_back(worker->id());
  for (const auto& worker : now) stopped_ids.push_back(worker->id());
  // The checkpointed threads that stay (before the others are destroyed).
  std::vector<Worker*> remaining;
  for (Worker* worker : checkpointed) {
    if (!Contains(stopped_ids, worker->id())) remaining.push_back(worker);
  }
  Retire(graceful);
  Retire(now);
  {
    absl::MutexLock lock(&mu_);
    std::vector<int> running;
    for (const auto& worker : retries_) running.push_back(worker->id());
    for (const auto& change : batch.changes) {
      change->applied = true;
      if (change->status.ok()) change->result.running = running;
    }
  }
  if (!started_ids.empty() || !stopped_ids.empty()) {
    LogInfo("engine: retry threads: started [", IdList(started_ids), "], stopped [",
            IdList(stopped_ids), "] (", batch.changes.size(),
            batch.changes.size() > 1 ? " changes applied together)" : " change)");
  }
  if (started_ids.empty() && stopped_ids.empty()) {
    // No membership change: no rebalance to wait for.
    for (Worker* worker : remaining) worker->ReleaseCheckpoint();
    return;
  }
  // Joining the group takes a rebalance (on the mock cluster, sometimes
  // two); the caller may wait for it. The running threads stay checkpointed
  // until the new ones have joined, and the control slot stays taken, so
  // no other operation stops a thread this one still waits on.
  const absl::Time settle =
      std::min(deadline, absl::Now() + absl::Milliseconds(options_.shutdown_timeout_ms) +
                             absl::Milliseconds(SessionTimeoutMs()));
  for (const auto& stats : joining) stats->joined.WaitForNotificationWithDeadline(deadline);
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

absl::StatusOr<std::vector<int>> Engine::StartRetryThreads(int count, absl::Time deadline,
                                                           int tier) {
  return Ids(ChangeRetryThreads({.kind = RetryThreadChange::Kind::kStart,
                                 .count = count,
                                 .ids = {},
                                 .graceful = true,
                                 .tier = tier},
                                deadline),
             &RetryThreadChangeResult::started);
}

absl::StatusOr<std::vector<int>> Engine::StopRetryThreads(int count, bool graceful,
                                                          absl::Time deadline, int tier) {
  return Ids(ChangeRetryThreads({.kind = RetryThreadChange::Kind::kStopCount,
                                 .count = count,
                                 .ids = {},
                                 .graceful = graceful,
                                 .tier = tier},
                                deadline),
             &RetryThreadChangeResult::stopped);
}

absl::StatusOr<std::vector<int>> Engine::StopRetryThreadsById(const std::vector<int>& ids,
                                                              bool graceful, absl::Time deadline) {
  return Ids(
      ChangeRetryThreads(
          {.kind = RetryThreadChange::Kind::kStopIds, .ids = ids, .graceful = graceful}, deadline),
      &RetryThreadChangeResult::stopped);
}

}  // namespace retryd::engine
