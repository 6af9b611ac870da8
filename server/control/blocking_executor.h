// A tiny worker pool for control operations that block (the engine's
// StartRetryThreads, StopRetryThreads, SetInOrder wait for consumer groups
// and drains). gRPC callback threads must never block, so the handlers post
// those calls here and finish the call from the worker.
//
// The queue is bounded: when it is full Submit() refuses the task instead of
// letting callers pile up. The engine runs its control operations one at a
// time anyway, so a few workers are plenty.
//
// Thread-safe. Shutdown() is for the owner.
#ifndef RETRYD_SERVER_CONTROL_BLOCKING_EXECUTOR_H_
#define RETRYD_SERVER_CONTROL_BLOCKING_EXECUTOR_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace retryd::control {

class BlockingExecutor {
 public:
  // Starts `threads` workers (at least 1) named `name`. Submit() refuses a
  // task once `threads + max_queued` are waiting to start.
  BlockingExecutor(std::string name, int threads, int max_queued);
  ~BlockingExecutor();  // Shutdown()s.

  BlockingExecutor(const BlockingExecutor&) = delete;
  BlockingExecutor& operator=(const BlockingExecutor&) = delete;

  // Queues `task`. RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE
  // after Shutdown(); the task is then dropped without running.
  absl::Status Submit(absl::AnyInvocable<void() &&> task);

  // Refuses new tasks, runs every queued one, joins the workers.
  // Idempotent.
  void Shutdown();

 private:
  void Run();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const size_t max_queued_;
  std::vector<std::thread> threads_;  // Written only by the constructor and Shutdown().

  mutable absl::Mutex mu_;  // Guards the fields below.
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_BLOCKING_EXECUTOR_H_
