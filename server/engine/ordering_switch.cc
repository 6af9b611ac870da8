// Engine::Impl::OrderingSwitch (ordering_switch.h): the ordering mode switched at runtime
// (SetInOrder, SetOrderingMode). A switch to IN_ORDER pauses the input,
// empties the retry backlog (or refuses, with a reason) and stops the retry
// threads; a switch to KEY reads which keys are parked in the retry topic
// first; a switch out of IN_ORDER starts retry threads again.
#include "server/engine/ordering_switch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/engine/engine_impl.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/steering/retry_tiers.h"
#include "server/engine/worker/worker.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::engine {
namespace {

// How often a drain looks at the retry group's committed lag, and how long
// one look may block: short, since a Stop() waits for the look to end.
constexpr absl::Duration kDrainCheckInterval = absl::Milliseconds(250);
constexpr absl::Duration kMeasureTimeout = absl::Seconds(1);
// How long one read of the parked keys in the retry topic may take.
constexpr absl::Duration kReadParkedTimeout = absl::Seconds(30);
// How often a drain logs how much of the retry backlog is left.
constexpr absl::Duration kDrainProgressLogInterval = absl::Seconds(5);

// Wait conditions on mu_ that a cancellation (see WakeOnCancel) also ends.
struct NotDrainingOrCancelled {
  bool operator()() const {
    return *state != EngineState::kDraining || (cancel != nullptr && cancel->cancelled());
  }
  const EngineState* state;
  const Cancellation* cancel;
};

std::string IdList(const std::vector<int>& ids) { return absl::StrJoin(ids, ", "); }

}  // namespace

absl::StatusOr<SetOrderingResult> Engine::Impl::SetInOrder(bool in_order, bool drain_retries,
                                                           absl::Time deadline,
                                                           Cancellation* cancel) {
  return ordering_switch_->SetInOrder(in_order, drain_retries, deadline, cancel);
}

absl::StatusOr<SetOrderingResult> Engine::Impl::SetOrderingMode(Ordering ordering,
                                                                bool drain_retries,
                                                                absl::Time deadline,
                                                                Cancellation* cancel) {
  return ordering_switch_->SetOrderingMode(ordering, drain_retries, deadline, cancel);
}

absl::StatusOr<SetOrderingResult> Engine::Impl::OrderingSwitch::SetInOrder(bool in_order,
                                                                           bool drain_retries,
                                                                           absl::Time deadline,
                                                                           Cancellation* cancel) {
  if (!in_order && drain_retries) {
    return absl::InvalidArgumentError("drain_retries applies only when switching in_order on");
  }
  const Ordering relaxed = engine_.options_.ordering == Ordering::kInOrder
                               ? Ordering::kUnordered
                               : engine_.options_.ordering;
  return SetOrderingMode(in_order ? Ordering::kInOrder : relaxed, drain_retries, deadline, cancel);
}

absl::StatusOr<SetOrderingResult> Engine::Impl::OrderingSwitch::SetOrderingMode(
    Ordering ordering, bool drain_retries, absl::Time deadline, Cancellation* cancel) {
  if (drain_retries && ordering != Ordering::kInOrder) {
    return absl::InvalidArgumentError("drain_retries applies only to a switch to IN_ORDER");
  }
  // Outlives every wait below.
  const Cancellation::Subscription wake = engine_.WakeOnCancel(cancel);
  absl::StatusOr<ControlSlot> control = engine_.BeginControl(deadline, cancel);
  if (!control.ok()) return control.status();
  const Ordering current = engine_.ordering();
  if (ordering == current) {
    SetOrderingResult result;
    result.ordering = ordering;
    return result;
  }
  if (ordering != Ordering::kInOrder) {
    return SwitchRelaxed(*control, current, ordering, deadline, cancel);
  }
  const int running = engine_.RetryThreadCount();
  if (running > 0 && !drain_retries) return RetryThreadsRunningError(running);
  absl::StatusOr<SetOrderingResult> result =
      SwitchToInOrder(*control, deadline, drain_retries, cancel);
  if (result.ok()) engine_.parking_.Clear();
  return result;
}

absl::Status Engine::Impl::OrderingSwitch::RetryThreadsRunningError(int running) {
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          running, " retry thread", running > 1 ? "s run" : " runs",
          "; in-order mode excludes retry threads. Stop them first (StopRetryThreads), or "
          "switch with drain_retries to empty the retry backlog, stop them and switch")),
      reason::kRetryThreadsRunning);
}

absl::StatusOr<SetOrderingResult> Engine::Impl::OrderingSwitch::SwitchRelaxed(
    const ControlSlot& control, Ordering current, Ordering ordering, absl::Time deadline,
    const Cancellation* cancel) {
  SetOrderingResult result;
  result.ordering = ordering;
  if (ordering == Ordering::kKey && HasTiers(engine_.options_.retry)) {
    return WithReason(
        absl::FailedPreconditionError(
            "key order is not available with tiered retry topics (retry.tiers): a key's records "
            "could be spread over several tiers; nothing changed"),
        reason::kRetryTiersConfigured);
  }
  if (ordering == Ordering::kKey) {
    // Before any retry thread starts: in order, nothing goes to the retry
    // topic, so what is read there stays true until key order is on.
    absl::StatusOr<int64_t> parked = SwitchToKeyOrder(control, deadline, cancel);
    if (!parked.ok()) return parked.status();
    result.parked_keys = *parked;
  }
  if (current == Ordering::kInOrder) {
    absl::StatusOr<std::vector<int>> started = SwitchOutOfInOrder(control, ordering);
    if (!started.ok()) {
      engine_.ordering_.store(Ordering::kInOrder, std::memory_order_relaxed);
      engine_.parking_.Clear();
      return started.status();
    }
    result.started_thread_ids = *std::move(started);
  } else if (ordering == Ordering::kUnordered) {
    engine_.ordering_.store(Ordering::kUnordered, std::memory_order_relaxed);
    engine_.parking_.Clear();
    LogInfo("engine: key order off; parked keys released");
  }
  return result;
}
absl::StatusOr<std::vector<int>> Engine::Impl::OrderingSwitch::SwitchOutOfInOrder(
    const ControlSlot& control, Ordering to) {
  engine_.AssertControlHeld(&control);
  // Each tier without a retry thread gets its configured count; in order
  // configured forces those to 0, yet the retry topics need a reader once
  // failures go there again.
  const std::vector<int> idle_tiers = TiersWithoutThreads();
  std::vector<std::unique_ptr<Worker>> started;
  int wanted = 0;
  for (int tier : idle_tiers) {
    int count = TierStartThreads(engine_.options_.retry, engine_.options_.retry.tiers[tier]);
    if (count == 0 && engine_.options_.ordering == Ordering::kInOrder) count = 1;
    wanted += count;
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<std::unique_ptr<Worker>> worker =
          engine_.StartWorker(ThreadRole::kRetry, 0, tier);
      if (!worker.ok()) {
        engine_.StopWorkers(started, /*graceful=*/true, engine_.StopDeadline());
        engine_.Retire(started);
        return absl::Status(worker.status().code(),
                            absl::StrCat("in-order mode stays on: a retry thread did not start (",
                                         worker.status().message(), ")"));
      }
      started.push_back(*std::move(worker));
    }
  }
  std::vector<int> ids;
  {
    absl::MutexLock lock(&engine_.mu_);
    for (auto& worker : started) {
      ids.push_back(worker->id());
      engine_.retries_.push_back(std::move(worker));
    }
  }
  // Only now: a failure from here on has a reader in the retry topic.
  engine_.ordering_.store(to, std::memory_order_relaxed);
  if (!ids.empty()) {
    LogInfo("engine: in-order mode off (now ", OrderingName(to), "); started retry threads ",
            IdList(ids));
  } else if (wanted == 0 && !idle_tiers.empty()) {
    LogWarning(
        "engine: in-order mode off; retry.threads is 0, so the retry topic has no reader "
        "until retry threads are started");
  } else {
    LogInfo("engine: in-order mode off");
  }
  return ids;
}

std::vector<int> Engine::Impl::OrderingSwitch::TiersWithoutThreads() const {
  std::vector<bool> read(engine_.options_.retry.tiers.size(), false);
  {
    absl::MutexLock lock(&engine_.mu_);
    for (const auto& worker : engine_.retries_) read[worker->tier()] = true;
  }
  std::vector<int> tiers;
  for (size_t i = 0; i < read.size(); ++i) {
    if (!read[i]) tiers.push_back(static_cast<int>(i));
  }
  return tiers;
}

bool Engine::Impl::OrderingSwitch::PrimariesQuiet() const {
  for (const auto& s : engine_.Threads()) {
    if (s->role() != ThreadRole::kPrimary) continue;
    const bool paused = s->state() == ThreadState::kPaused || s->partitions().empty();
    if (!paused || s->in_flight.load(std::memory_order_relaxed) != 0 ||
        s->calls_in_flight.load(std::memory_order_relaxed) != 0) {
      return false;
    }
  }
  return true;
}

void Engine::Impl::OrderingSwitch::AbandonSwitch(const std::vector<int>& temporaries) {
  engine_.AssertControlHeld(nullptr);
  engine_.input_paused_.store(false, std::memory_order_relaxed);
  std::vector<std::unique_ptr<Worker>> stopping;
  {
    absl::MutexLock lock(&engine_.mu_);
    if (engine_.state_ == EngineState::kDraining) engine_.state_ = EngineState::kRunning;
    for (auto it = engine_.retries_.begin(); it != engine_.retries_.end();) {
      if (std::find(temporaries.begin(), temporaries.end(), (*it)->id()) != temporaries.end()) {
        stopping.push_back(std::move(*it));
        it = engine_.retries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (stopping.empty()) return;
  engine_.StopWorkers(stopping, /*graceful=*/true, engine_.StopDeadline());
  engine_.Retire(stopping);
  LogInfo("engine: stopped temporary retry threads ", IdList(temporaries));
}

absl::StatusOr<std::vector<ParkedRecord>> Engine::Impl::ReadParkedRecords(
    absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  // Where the retry threads will read from: what lies before is complete.
  absl::StatusOr<std::map<int32_t, int64_t>> committed = retry_lag_->Committed(timeout);
  if (!committed.ok()) return committed.status();
  std::vector<ParkedRecord> parked;
  absl::Status read = kafka::ScanTopic(
      options_.bootstrap_servers, options_.kafka_properties, options_.retry.topic, *committed,
      std::max(absl::Milliseconds(1), deadline - absl::Now()), [&parked](const Record& r) {
        // A record with no key is unordered; one with unreadable headers
        // goes to the dead-letter topic when a retry thread reads it.
        if (!r.key.has_value()) return;
        absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(r.headers);
        if (!meta.ok()) return;
        const int64_t since_ms = meta->first_failure_ms > 0 ? meta->first_failure_ms : meta->due_ms;
        parked.push_back({{{meta->original_topic, meta->original_partition}, *r.key},
                          meta->original_offset,
                          absl::FromUnixMillis(since_ms),
                          r.partition,
                          r.offset});
      });
  if (!read.ok()) return read;
  return parked;
}

absl::Status Engine::Impl::OrderingSwitch::PauseInputUntil(
    absl::string_view mode, absl::Time deadline, const Cancellation* cancel,
    const std::vector<int>* temporaries, absl::FunctionRef<absl::StatusOr<bool>()> quiet,
    absl::FunctionRef<absl::Status()> late) {
  engine_.AssertControlHeld(nullptr);
  {
    absl::MutexLock lock(&engine_.mu_);
    engine_.state_ = EngineState::kDraining;
  }
  engine_.input_paused_.store(true, std::memory_order_relaxed);
  for (;;) {
    {
      absl::MutexLock lock(&engine_.mu_);
      if (engine_.state_ != EngineState::kDraining) {
        return absl::AbortedError(absl::StrCat("the engine is stopping; ", mode, " stays off"));
      }
    }
    if (cancel != nullptr && cancel->cancelled()) {
      AbandonSwitch(*temporaries);
      LogWarning("engine: the switch to ", mode, " was cancelled by its caller; input resumed, ",
                 mode, " stays off");
      return absl::CancelledError(absl::StrCat("the call was cancelled: input resumed, ", mode,
                                               " stays off, nothing changed"));
    }
    if (PrimariesQuiet()) {
      absl::StatusOr<bool> done = quiet();
      if (!done.ok()) {
        AbandonSwitch(*temporaries);
        return done.status();
      }
      if (*done) return absl::OkStatus();
    }
    if (absl::Now() >= deadline) {
      AbandonSwitch(*temporaries);
      LogWarning("engine: the switch to ", mode, " timed out; ", mode, " stays off");
      return late();
    }
    // Paces the checks; a Stop() or a cancellation ends the wait at once.
    absl::MutexLock lock(&engine_.mu_);
    const NotDrainingOrCancelled woken{&engine_.state_, cancel};
    engine_.mu_.AwaitWithDeadline(absl::Condition(&woken),
                                  std::min(deadline, absl::Now() + kDrainCheckInterval));
  }
}

void Engine::Impl::OrderingSwitch::EndSwitch(Ordering to) {
  engine_.ordering_.store(to, std::memory_order_relaxed);
  engine_.input_paused_.store(false, std::memory_order_relaxed);
  absl::MutexLock lock(&engine_.mu_);
  if (engine_.state_ == EngineState::kDraining) engine_.state_ = EngineState::kRunning;
}

absl::StatusOr<int64_t> Engine::Impl::OrderingSwitch::SwitchToKeyOrder(const ControlSlot& control,
                                                                       absl::Time deadline,
                                                                       const Cancellation* cancel) {
  engine_.AssertControlHeld(&control);
  // No record may go to the retry topic between the read below and the
  // switch, nor be on its way there during the read: it would be missing
  // from what is parked, or parked where it no longer is. So the primaries
  // pause, and the retry threads keep their keyed records in place from now
  // on (as in key order), and the read waits for those they were sending.
  engine_.key_order_coming_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // See Worker::MaySendBack.
  absl::Status last_failure = absl::DeadlineExceededError("input had not paused");
  const std::vector<int> no_temporary;
  const absl::Status paused = PauseInputUntil(
      "key order", deadline, cancel, &no_temporary,
      [&]() -> absl::StatusOr<bool> {
        if (const int64_t sending = engine_.keyed_sends_back_->load(std::memory_order_relaxed);
            sending > 0) {
          last_failure = absl::DeadlineExceededError(
              absl::StrCat("retry threads were still sending ", sending, " keyed records back to ",
                           engine_.options_.retry.topic));
          return false;
        }
        absl::StatusOr<std::vector<ParkedRecord>> parked = engine_.ReadParkedRecords(
            std::max(absl::Milliseconds(1), std::min(kReadParkedTimeout, deadline - absl::Now())));
        if (parked.ok()) {
          engine_.parking_.Rebuild(*parked);
          return true;
        }
        last_failure = parked.status();
        LogWarning("engine: reading the parked keys in ", engine_.options_.retry.topic, ": ",
                   parked.status().message());
        return false;
      },
      [&] {
        return absl::Status(
            absl::IsDeadlineExceeded(last_failure) ? absl::StatusCode::kDeadlineExceeded
                                                   : absl::StatusCode::kUnavailable,
            absl::StrCat("key order stays off, nothing changed: ", last_failure.message(),
                         " when the deadline passed. Retry with a longer deadline"));
      });
  if (!paused.ok()) {
    engine_.key_order_coming_.store(false, std::memory_order_relaxed);
    return paused;
  }
  EndSwitch(Ordering::kKey);
  engine_.key_order_coming_.store(false, std::memory_order_relaxed);
  const KeyParking::Summary parked = engine_.parking_.summary();
  LogInfo("engine: key order on; ", parked.keys, " keys parked behind ", parked.records,
          " records in ", engine_.options_.retry.topic);
  return parked.keys;
}

absl::StatusOr<SetOrderingResult> Engine::Impl::OrderingSwitch::SwitchToInOrder(
    const ControlSlot& control, absl::Time deadline, bool drain, const Cancellation* cancel) {
  engine_.AssertControlHeld(&control);
  Drain state{.deadline = deadline, .drain = drain, .last_progress_log = absl::Now()};
  const absl::Status paused = PauseInputUntil(
      "in-order mode", deadline, cancel, &state.temporaries, [&] { return DrainStep(state); },
      [&] { return DrainTimedOut(state); });
  if (!paused.ok()) return paused;
  return FinishSwitchToInOrder(state.initial_lag);
}

absl::StatusOr<bool> Engine::Impl::OrderingSwitch::DrainStep(Drain& state) {
  absl::StatusOr<int64_t> committed_lag = engine_.MeasureRetryBacklog(
      std::max(absl::Milliseconds(1), std::min(kMeasureTimeout, state.deadline - absl::Now())));
  if (!committed_lag.ok()) {
    if (!state.drain) {
      return absl::UnavailableError(absl::StrCat(
          "the retry backlog could not be measured (", committed_lag.status().message(),
          "); in-order mode stays off, since switching without knowing the retry topic is "
          "empty could strand records there. Try again once Kafka answers"));
    }
    LogWarning("engine: drain: ", committed_lag.status().message());
    return false;
  }
  state.lag = *committed_lag;
  if (state.initial_lag < 0) state.initial_lag = state.lag;
  if (state.lag == 0) return true;
  if (!state.drain) return BacklogError(state.lag);
  if (!state.temporaries_started) {
    state.temporaries_started = true;
    if (absl::Status started = StartTemporaries(state); !started.ok()) return started;
  }
  if (absl::Now() - state.last_progress_log >= kDrainProgressLogInterval) {
    state.last_progress_log = absl::Now();
    LogInfo("engine: drain: ", state.lag, " of ", state.initial_lag, " retry records left");
  }
  return false;
}

absl::Status Engine::Impl::OrderingSwitch::BacklogError(int64_t lag) {
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          "the retry topic holds a backlog of ", lag,
          " records that in-order mode would "
          "strand there (no retry thread reads it in order). Call SetInOrder with "
          "drain_retries to empty it first, or start retry threads and let them empty it")),
      reason::kRetryBacklog);
}

absl::Status Engine::Impl::OrderingSwitch::StartTemporaries(Drain& state) {
  for (int tier : TiersWithoutThreads()) {
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        engine_.StartWorker(ThreadRole::kRetry, 0, tier);
    if (!worker.ok()) {
      return absl::Status(
          worker.status().code(),
          absl::StrCat("no retry thread could start to empty the retry backlog of ", state.lag,
                       " records in ", engine_.options_.retry.tiers[tier].topic, " (",
                       worker.status().message(), "); nothing changed"));
    }
    state.temporaries.push_back((*worker)->id());
    absl::MutexLock lock(&engine_.mu_);
    engine_.retries_.push_back(*std::move(worker));
  }
  if (!state.temporaries.empty()) {
    LogInfo("engine: drain: started retry threads ", IdList(state.temporaries),
            " (for the retry topics no retry thread reads) to empty the retry backlog of ",
            state.lag, " records");
  }
  return absl::OkStatus();
}

absl::Status Engine::Impl::OrderingSwitch::DrainTimedOut(const Drain& state) {
  return absl::DeadlineExceededError(absl::StrCat(
      state.drain ? "the retry backlog was not empty" : "input had not paused",
      " when the deadline passed (",
      state.lag >= 0 ? absl::StrCat(state.lag, " records left") : "backlog not measured",
      "); nothing changed: in-order mode is off and the retry threads that ran still run. "
      "Retry with a longer deadline"));
}

SetOrderingResult Engine::Impl::OrderingSwitch::FinishSwitchToInOrder(int64_t drained) {
  engine_.AssertControlHeld(nullptr);
  std::vector<std::unique_ptr<Worker>> stopping;
  {
    absl::MutexLock lock(&engine_.mu_);
    stopping.swap(engine_.retries_);
  }
  std::vector<int> ids;
  for (const auto& worker : stopping) ids.push_back(worker->id());
  engine_.StopWorkers(stopping, /*graceful=*/true, engine_.StopDeadline());
  engine_.Retire(stopping);
  EndSwitch(Ordering::kInOrder);
  if (drained > 0 || !ids.empty()) {
    LogInfo("engine: drained ", drained, " retry records, stopped retry threads ", IdList(ids),
            "; in-order mode on");
  } else {
    LogInfo("engine: retry backlog empty; in-order mode on");
  }
  SetOrderingResult result;
  result.ordering = Ordering::kInOrder;
  result.stopped_thread_ids = std::move(ids);
  result.drained_records = std::max<int64_t>(0, drained);
  return result;
}

}  // namespace retryd::engine
