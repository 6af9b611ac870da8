// Engine::Impl::OrderingSwitch: the engine's ordering mode switched at runtime
// (SetInOrder, SetOrderingMode; see api/engine.h). A switch to IN_ORDER
// pauses the input, empties the retry backlog (or refuses, with a reason)
// and stops the retry threads; a switch to KEY reads which keys are parked
// in the retry topic first; a switch out of IN_ORDER starts retry threads
// again. Engine::Impl owns one and forwards to it; it works on the engine's
// own state (the ordering, the paused input, the retry threads, the control
// slot) through the Impl, under the Impl's locks.
//
// Thread-safety: as Engine::Impl (thread-safe). It has no lock of its own:
// what it touches is the Impl's, guarded as engine_impl.h says; every
// switch runs holding the control slot, and none holds the Impl's mu_
// across a Kafka call or a thread's join.
#ifndef RETRYD_SERVER_ENGINE_ORDERING_SWITCH_H_
#define RETRYD_SERVER_ENGINE_ORDERING_SWITCH_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/api/cancellation.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/options.h"
#include "server/engine/engine_impl.h"

namespace retryd::engine {

class Engine::Impl::OrderingSwitch {
 public:
  // `engine` outlives this switch; only its address is kept here (the
  // Impl constructs its switch before it is fully constructed).
  explicit OrderingSwitch(Impl& engine) : engine_(engine) {}

  OrderingSwitch(const OrderingSwitch&) = delete;
  OrderingSwitch& operator=(const OrderingSwitch&) = delete;

  // Engine::SetInOrder and Engine::SetOrderingMode.
  absl::StatusOr<SetOrderingResult> SetInOrder(bool in_order, bool drain_retries,
                                               absl::Time deadline, Cancellation* cancel)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);
  absl::StatusOr<SetOrderingResult> SetOrderingMode(Ordering ordering, bool drain_retries,
                                                    absl::Time deadline, Cancellation* cancel)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);

  // Pauses input, measures the retry backlog and, if it is empty (or `drain`
  // has emptied it), stops the retry threads and switches in-order on; see
  // SetInOrder. Engine::Impl::StartInOrder calls it too.
  // REQUIRES: `control` held.
  absl::StatusOr<SetOrderingResult> SwitchToInOrder(const ControlSlot& control, absl::Time deadline,
                                                    bool drain, const Cancellation* cancel)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);

 private:
  // What a switch to IN_ORDER has seen and done so far (DrainStep).
  struct Drain {
    absl::Time deadline;
    bool drain = false;  // Empty the backlog (drain_retries), or refuse one.
    // Retry threads started to empty the backlog: one for each tier that
    // has none.
    std::vector<int> temporaries;
    bool temporaries_started = false;
    int64_t initial_lag = -1;
    int64_t lag = -1;
    absl::Time last_progress_log;
  };
  // Whether the retry backlog is empty yet (PauseInputUntil's `quiet`);
  // starts a retry thread to empty it when draining and none runs.
  absl::StatusOr<bool> DrainStep(Drain& state) ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // The refusal when the backlog holds records and `drain` is off.
  static absl::Status BacklogError(int64_t lag);
  // Starts a retry thread for each tier that has none, into
  // `drain.temporaries`; an error if one does not start.
  absl::Status StartTemporaries(Drain& state) ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // The error of a switch to IN_ORDER whose deadline passed.
  static absl::Status DrainTimedOut(const Drain& state);
  // The end of SwitchToInOrder, the retry backlog (`drained` records at the
  // start) empty: stops the retry threads and switches in-order on.
  // REQUIRES: the control slot held, the engine DRAINING.
  SetOrderingResult FinishSwitchToInOrder(int64_t drained) ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // FAILED_PRECONDITION, reason RETRY_THREADS_RUNNING: `running` retry
  // threads run and the switch to IN_ORDER was not asked to drain.
  static absl::Status RetryThreadsRunningError(int running);
  // The switch to `ordering` from `current`, neither IN_ORDER (nor
  // `ordering` equal to `current`): the part of SetOrderingMode after the
  // control slot is taken. REQUIRES: `control` held.
  absl::StatusOr<SetOrderingResult> SwitchRelaxed(const ControlSlot& control, Ordering current,
                                                  Ordering ordering, absl::Time deadline,
                                                  const Cancellation* cancel)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // The part both switches of ordering share. The engine is DRAINING and
  // its input paused; whenever the primaries are quiet, `quiet` looks at the
  // engine and says whether the switch may go ahead (true) or must end (an
  // error). A Stop(), the caller's cancellation, an error from `quiet` or the
  // deadline (whose error `late` writes) roll the switch back
  // (AbandonSwitch) and return an error. On success the input stays paused:
  // the caller switches and calls EndSwitch(). `mode` names the mode in
  // messages; `*temporaries` are the retry threads a rollback stops.
  // REQUIRES: the control slot held.
  absl::Status PauseInputUntil(absl::string_view mode, absl::Time deadline,
                               const Cancellation* cancel, const std::vector<int>* temporaries,
                               absl::FunctionRef<absl::StatusOr<bool>()> quiet,
                               absl::FunctionRef<absl::Status()> late)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // Ends a PauseInputUntil that succeeded: ordering `to`, input resumed,
  // state RUNNING again.
  void EndSwitch(Ordering to) ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // Rolls a switch back: input resumed, `temporaries` (retry threads it
  // started) stopped, state RUNNING again.
  // REQUIRES: the control slot held (by the switch it rolls back).
  void AbandonSwitch(const std::vector<int>& temporaries) ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // Every primary has paused its partitions (so none is halfway through a
  // record) and has no hand-off in flight: the retry topic cannot grow.
  bool PrimariesQuiet() const ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // The retry tiers (indexes) no running retry thread reads.
  std::vector<int> TiersWithoutThreads() const ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // Starts retry threads as SetInOrder(false) says, then switches to `to`.
  // REQUIRES: `control` held.
  absl::StatusOr<std::vector<int>> SwitchOutOfInOrder(const ControlSlot& control, Ordering to)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);
  // Pauses input until the primaries are quiet, finds the parked keys in
  // the retry topic and switches to key order; returns how many keys are
  // parked. Keeps reading until `deadline` if the retry topic cannot be
  // read. See SetOrderingMode.
  // REQUIRES: `control` held.
  absl::StatusOr<int64_t> SwitchToKeyOrder(const ControlSlot& control, absl::Time deadline,
                                           const Cancellation* cancel)
      ABSL_LOCKS_EXCLUDED(engine_.mu_);

  Impl& engine_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_ORDERING_SWITCH_H_
