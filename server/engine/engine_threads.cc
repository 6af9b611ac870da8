// Engine: retry threads started and stopped at runtime (ChangeRetryThreads
// and its wrappers). Changes queue for the control slot; whichever caller
// finds the slot free leads: its RetryThreadPool (retry_thread_pool.h) takes
// every queued change, decides each in turn (PlanThreadChanges,
// thread_planner.h), and applies them all as one change of the retry group's
// membership. The others wait for their own change's outcome.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/error_reason.h"
#include "server/engine/engine_impl.h"
#include "server/engine/retry_thread_pool.h"

namespace retryd::engine {

namespace {

absl::Status Refused(absl::StatusCode code, absl::string_view reason, absl::string_view message) {
  return WithReason(absl::Status(code, message), reason);
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
    retry_pool_->RunChangeBatch(*control, deadline);  // Takes `me` too.
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
