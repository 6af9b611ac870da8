// The engine: primary threads, retry threads and the producer they share.
//
// Typical use:
//   auto engine = Engine::Create(options, std::move(processor));
//   (*engine)->Start();
//   ...
//   (*engine)->Stop();  // graceful: finish in-flight work, commit, leave
//
// Thread-safety: thread-safe. Methods may be called from any thread; the
// control methods serialise on an internal mutex that is never held across a
// Kafka call or a thread join.
#ifndef RETRYD_SERVER_ENGINE_ENGINE_H_
#define RETRYD_SERVER_ENGINE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/options.h"
#include "server/engine/processor.h"
#include "server/engine/thread_stats.h"
#include "server/engine/worker.h"
#include "server/kafka/producer.h"

namespace retryd {

// Sums over every thread the engine ran, stopped ones included.
struct EngineTotals {
  int64_t consumed = 0;         // Records the primary threads processed (first attempts).
  int64_t processed = 0;        // Processor calls, all threads.
  int64_t succeeded = 0;
  int64_t failed_attempts = 0;
  int64_t sent_to_retry = 0;
  int64_t dead_lettered = 0;
  int64_t in_flight = 0;
  int64_t retry_backlog = 0;    // Retry records not yet done: lag + held.
};

class Engine {
 public:
  // Checks `options` and connects the producer; starts no thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(EngineOptions options,
                                                        std::unique_ptr<Processor> processor);
  ~Engine();  // Stop()s.

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts `primary_threads` primary and `retry.threads` retry threads.
  absl::Status Start();

  // Graceful stop: primaries first (they feed the retry topic), then retry
  // threads, each finishing its hand-offs and committing; then the producer
  // flushes. Idempotent; blocks until done.
  void Stop();

  // Starts `count` more retry threads; returns their ids.
  // FAILED_PRECONDITION while in order or stopped; INVALID_ARGUMENT if count
  // < 1 or the total would pass retry.max_threads.
  absl::StatusOr<std::vector<int>> StartRetryThreads(int count);

  // Stops the `count` most recently started retry threads (all of them if
  // fewer run); returns their ids.
  absl::StatusOr<std::vector<int>> StopRetryThreads(int count, bool graceful);

  bool in_order() const { return in_order_.load(std::memory_order_relaxed); }
  const EngineOptions& options() const { return options_; }

  // Stats of the threads that run now.
  std::vector<std::shared_ptr<const ThreadStats>> Threads() const;
  EngineTotals Totals() const;

 private:
  Engine(EngineOptions options, std::unique_ptr<Processor> processor,
         std::unique_ptr<kafka::Producer> producer);

  absl::StatusOr<std::unique_ptr<Worker>> StartWorker(ThreadRole role);
  static void StopWorkers(std::vector<std::unique_ptr<Worker>>& workers, bool graceful);

  const EngineOptions options_;
  const std::unique_ptr<Processor> processor_;
  const std::unique_ptr<kafka::Producer> producer_;
  std::atomic<bool> in_order_;
  const WorkerContext context_;

  mutable absl::Mutex mu_;  // Guards the fields below.
  enum class Phase { kCreated, kRunning, kStopped } phase_ ABSL_GUARDED_BY(mu_) = Phase::kCreated;
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::unique_ptr<Worker>> primaries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Worker>> retries_ ABSL_GUARDED_BY(mu_);
  // Stats of stopped threads, kept for the totals.
  std::vector<std::shared_ptr<const ThreadStats>> retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd

#endif  // RETRYD_SERVER_ENGINE_ENGINE_H_
