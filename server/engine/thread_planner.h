// PlanThreadChanges: which retry threads a batch of queued changes
// (Engine::ChangeRetryThreads) starts and stops, and why it refuses the
// changes it refuses. Pure: it sees the running threads as plain values,
// takes no lock and starts or stops nothing; the engine calls it under its
// mutex and applies the plan (engine_threads.cc).
//
// Thread-safety: a plain function of its arguments.
#ifndef RETRYD_SERVER_ENGINE_THREAD_PLANNER_H_
#define RETRYD_SERVER_ENGINE_THREAD_PLANNER_H_

#include <vector>

#include "absl/status/status.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/options.h"

namespace retryd::engine {

// The retry threads as they are when the batch is planned.
struct RetryThreadsNow {
  struct Thread {
    int id = 0;
    int tier = 0;  // Index in RetryOptions::tiers.
  };
  std::vector<Thread> running;  // Oldest first.
  int next_id = 1;              // The id the next thread started gets.
  bool in_order = false;        // In-order mode: no retry threads, no floor.
};

// What the plan does for one change.
struct ThreadChangeDecision {
  // Not ok: the change is refused and `start` and `stop` are empty.
  absl::Status status;
  std::vector<int> start;  // Ids reserved for the threads it starts.
  std::vector<int> stop;   // The threads it stops (most recently started first).
};

struct ThreadPlan {
  // One per change, in the order given. Each is decided against the
  // threads as the changes before it leave them.
  std::vector<ThreadChangeDecision> decisions;
  std::vector<int> stop_graceful;  // Of the changes asking for a graceful stop.
  std::vector<int> stop_now;       // Of the others.
  // Every retry thread once the plan is applied: those that stay, oldest
  // first, then those it starts.
  std::vector<int> running;
  int next_id = 1;  // RetryThreadsNow::next_id after the ids reserved.

  // Whether any change starts or stops a thread.
  bool changes_threads() const;
};

// Decides `changes` in turn against `now` under `retry`'s limits: tiers,
// max_threads (per tier), min_threads (per tier, outside in-order mode), and
// autoscale (which refuses kSetCount).
ThreadPlan PlanThreadChanges(const RetryOptions& retry, const RetryThreadsNow& now,
                             const std::vector<RetryThreadChange>& changes);

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_THREAD_PLANNER_H_
