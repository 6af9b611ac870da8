// A worker: one thread, one Kafka consumer, and the record handling of one
// role.
//
//  * Primary: consumes the input topics in group `group_id`, runs each record
//    through the processor once, and hands it to exactly one outcome: output
//    (or done), the retry topic, or the dead-letter topic. In in-order mode a
//    failed record is instead retried in place, its partition paused.
//  * Retry: consumes the retry topic in group `<group_id>.retry`, holds each
//    record until its due time (a bounded look-ahead per partition), then
//    processes it again and re-enqueues it, or dead-letters it.
//
// An input offset is committed only below the lowest record whose outcome is
// not yet durable (see CompletionTracker). Nothing here blocks while holding
// a lock; the consumer is used only by the worker's own thread.
//
// Thread-safety: Start(), RequestStop() and Join() are for the owner (the
// Engine); stats() may be read from any thread.
#ifndef RETRYD_SERVER_ENGINE_WORKER_H_
#define RETRYD_SERVER_ENGINE_WORKER_H_

#include <atomic>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/log_throttle.h"
#include "server/engine/backoff.h"
#include "server/engine/completion_tracker.h"
#include "server/engine/due_scheduler.h"
#include "server/engine/options.h"
#include "server/engine/processor.h"
#include "server/engine/record.h"
#include "server/engine/thread_stats.h"
#include "server/kafka/consumer.h"
#include "server/kafka/producer.h"

namespace retryd {

// What every worker shares; owned by the Engine, outlives its workers.
struct WorkerContext {
  const EngineOptions* options = nullptr;
  Processor* processor = nullptr;
  kafka::Producer* producer = nullptr;
  // Read per record, so a runtime switch takes effect at the next record.
  const std::atomic<bool>* in_order = nullptr;
  // While set, primary threads pause all their partitions (a drain).
  const std::atomic<bool>* input_paused = nullptr;
};

class Worker : public kafka::ConsumerListener {
 public:
  Worker(int id, ThreadRole role, const WorkerContext& context);
  ~Worker() override;  // Requires Join() to have returned if Start() succeeded.

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Creates the consumer (subscribing to the role's topics) and starts the
  // thread. The thread reports progress through stats().
  absl::Status Start();

  // Asks the thread to stop; returns at once. Graceful: finish in-flight
  // hand-offs until `deadline` (at most shutdown_timeout_ms away), commit,
  // leave the group. Not graceful: leave the group without waiting or
  // committing more. The last commit and the group leave get a few seconds
  // past `deadline` (kStopGrace) at most; what is not done by then is
  // logged and abandoned, to be processed again.
  void RequestStop(bool graceful, absl::Time deadline = absl::InfiniteFuture());

  // Waits for the thread to exit.
  void Join();


  int id() const { return id_; }
  ThreadRole role() const { return role_; }
  // Shared so readers may keep it after the worker is gone.
  std::shared_ptr<const ThreadStats> stats() const { return sink_; }

  // kafka::ConsumerListener; called on the worker's thread.
  void OnAssigned(const std::vector<TopicPartition>& partitions) override;
  void OnRevoked(const std::vector<TopicPartition>& partitions, bool lost) override;
  void OnCommitFailed(const kafka::CommitOffsets& offsets) override;

 private:
  enum class Emission { kOutput, kRetry, kDeadLetter };

  // A hand-off whose produce failed, to be sent again by the worker.
  struct Redo {
    OutgoingRecord record;
    Emission kind;
    std::shared_ptr<CompletionTracker> tracker;
    int64_t offset;
    absl::Time not_before;
  };

  // The stats plus what delivery reports hand back to the worker. Shared
  // with in-flight delivery callbacks, which may outlive the worker.
  struct Sink : ThreadStats {
    Sink(int id, ThreadRole role, int64_t resume_below)
        : ThreadStats(id, role), resume_below(resume_below) {}

    // One hand-off acknowledged or given up. The decrement that brings
    // in_flight below `resume_below` also passes through flight_mu, so a
    // worker waiting on it (in WaitForAcks) re-checks at once.
    void HandOffDone() {
      if (in_flight.fetch_sub(1, std::memory_order_relaxed) == resume_below) {
        absl::MutexLock lock(&flight_mu);
      }
    }

    const int64_t resume_below;  // Back-pressure ends below this many in flight.
    absl::Mutex flight_mu;       // Guards nothing; wakes a worker in WaitForAcks.
    absl::Mutex redo_mu;         // Guards redo.
    std::deque<Redo> redo ABSL_GUARDED_BY(redo_mu);
    // An outage fails every record in flight at once: one line a second.
    LogThrottle redo_log{absl::Seconds(1)};
  };

  void Run();
  void HandleConsumed(Record record);
  void Attempt(HeldRecord held);
  void RecordEndToEnd(const HeldRecord& held, absl::Time now);
  void OnSuccess(const HeldRecord& held);
  void OnRetriableFailure(HeldRecord held, std::string reason);
  void DeadLetter(const HeldRecord& held, std::string reason);
  void DeadLetterMalformed(const Record& record, const std::shared_ptr<CompletionTracker>& tracker,
                           const absl::Status& why);
  void Emit(OutgoingRecord record, Emission kind, std::shared_ptr<CompletionTracker> tracker,
            int64_t offset);
  void ProcessDue(int64_t now_ms);
  void DrainWaiting(const TopicPartition& tp);
  void DrainRedo(bool force);
  // At the back-pressure limit, waits a little for acknowledgements before
  // ReconcilePauses() resorts to pausing (which drops what was fetched).
  void WaitForAcks();
  void ReconcilePauses();
  void Commit(bool sync);
  void UpdateGauges();
  bool InOrder() const;
  // Held or waiting records of `tp` (their trackers entries never complete
  // while they are held).
  int64_t HeldCount(const TopicPartition& tp) const;
  // Waits until only held records are pending on every partition in `tps`,
  // re-sending failed hand-offs meanwhile, until `deadline`.
  void AwaitHandOffs(const std::vector<TopicPartition>& tps, absl::Time deadline);

  const int id_;
  const ThreadRole role_;
  const WorkerContext context_;
  const std::shared_ptr<Sink> sink_;

  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> graceful_{true};
  // Unix ns; no deadline until RequestStop() sets one.
  std::atomic<int64_t> stop_deadline_ns_{std::numeric_limits<int64_t>::max()};
  std::thread thread_;

  // Everything below belongs to the worker's thread (and to Start() before
  // the thread exists): no lock.
  std::unique_ptr<kafka::Consumer> consumer_;
  Backoff backoff_;
  DueScheduler scheduler_;
  // In-order mode: records that arrived behind a held record of their
  // partition, in offset order.
  std::map<TopicPartition, std::deque<Record>> waiting_;
  std::map<TopicPartition, std::shared_ptr<CompletionTracker>> trackers_;
  std::map<TopicPartition, int64_t> committed_;  // Last offset committed.
  std::set<TopicPartition> paused_;
  bool backpressure_ = false;
  absl::Time next_commit_;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_ENGINE_WORKER_H_
