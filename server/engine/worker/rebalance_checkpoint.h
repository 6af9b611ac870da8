// The steps of a retry thread's checkpoint before a rebalance the engine
// makes on purpose (Worker::RequestCheckpoint): the engine requests it, the
// thread serves it (hands its held records back, commits, quiesces), goes
// through the rebalance, and the engine releases it.
//
//   kRequested -> kQuiesced (served) -> kRebalanced (through a rebalance);
//   kReleased (any time) -> kNone once the thread resumes.
//
// Thread-safety: thread-safe; the engine's calls and the worker's meet on
// mu_, which is never held across anything that blocks but its own waits.
#ifndef RETRYD_SERVER_ENGINE_WORKER_REBALANCE_CHECKPOINT_H_
#define RETRYD_SERVER_ENGINE_WORKER_REBALANCE_CHECKPOINT_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace retryd::engine {

class RebalanceCheckpoint {
 public:
  enum class Step { kNone, kRequested, kQuiesced, kRebalanced, kReleased };

  // The engine's side.
  void Request(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Until the request is served (true) or `deadline`.
  bool AwaitServed(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Until the thread, served, has been through a rebalance (true), or
  // `deadline`.
  bool AwaitRebalanced(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  // The thread's side. The step to act on, and the request's deadline; a
  // release is taken (the step is kNone after it).
  Step Take(absl::Time* deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // The request is served (unless released meanwhile).
  void Served() ABSL_LOCKS_EXCLUDED(mu_);
  // The served thread has been through a rebalance.
  void Rebalanced() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;  // Guards the fields below.
  Step step_ ABSL_GUARDED_BY(mu_) = Step::kNone;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_REBALANCE_CHECKPOINT_H_
