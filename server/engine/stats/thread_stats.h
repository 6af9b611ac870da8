// Per-thread state and counters, written by the thread that owns them (and by
// Kafka delivery reports for that thread's records), read by anyone.
//
// Thread-safe. Counters are relaxed atomics, so readers never take a lock a
// worker holds; the only lock, `mu_`, guards the last error (and when) and
// the partition list, and is never held across anything that blocks.
#ifndef RETRYD_SERVER_ENGINE_STATS_THREAD_STATS_H_
#define RETRYD_SERVER_ENGINE_STATS_THREAD_STATS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/engine/api/counters.h"
#include "server/engine/api/thread_role.h"
#include "server/engine/stats/latency_histogram.h"
#include "server/model/record.h"

namespace retryd::engine {

enum class ThreadState {
  kStarting,        // Created, joining its consumer group.
  kRunning,         // Processing records.
  kIdle,            // Nothing to do: no records arrived in the last poll.
  kWaitingBackoff,  // Holding records until their due time, nothing else to do.
  kPaused,          // Every assigned partition is paused (back-pressure).
  // The processor's downstream is taken for down: partitions paused, records
  // waiting for it (see DownstreamGate).
  kWaitingDownstream,
  kStopping,  // Finishing in-flight work before it stops.
  kStopped,   // Done; the thread has exited.
  kFailed,    // Stopped by an error it could not recover from.
};

// Stopped or failed: the thread has exited and does no more work.
inline bool IsEnded(ThreadState state) {
  return state == ThreadState::kStopped || state == ThreadState::kFailed;
}

const char* ThreadStateName(ThreadState state);

class ThreadStats {
 public:
  ThreadStats(int id, ThreadRole role) : id_(id), role_(role) {}

  int id() const { return id_; }
  ThreadRole role() const { return role_; }
  // A retry thread's tier (an index into RetryOptions::tiers); -1 for a
  // primary thread. Set once, before the thread starts.
  int tier() const { return tier_.load(std::memory_order_relaxed); }
  void set_tier(int tier) { tier_.store(tier, std::memory_order_relaxed); }

  void SetState(ThreadState state) {
    if (state_.exchange(state, std::memory_order_relaxed) != state) {
      state_since_ms_.store(absl::ToUnixMillis(absl::Now()), std::memory_order_relaxed);
    }
  }
  ThreadState state() const { return state_.load(std::memory_order_relaxed); }
  int64_t state_since_ms() const { return state_since_ms_.load(std::memory_order_relaxed); }

  // The thread's loop turned (called at the top of each turn, by the thread
  // itself): liveness reads when it last did (Engine::Liveness) with one
  // relaxed load, so a stuck thread is seen without asking it anything.
  void NoteLoopTurn() {
    loop_turned_ms_.store(absl::ToUnixMillis(absl::Now()), std::memory_order_relaxed);
  }
  // Unix ms of the loop's last turn; the thread's creation before its first.
  int64_t loop_turned_ms() const { return loop_turned_ms_.load(std::memory_order_relaxed); }

  void SetLastError(std::string error) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    last_error_ = std::move(error);
    last_error_ms_ = absl::ToUnixMillis(absl::Now());
  }
  std::string last_error() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return last_error_;
  }
  int64_t last_error_ms() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return last_error_ms_;
  }

  void SetPartitions(std::vector<TopicPartition> partitions) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    partitions_ = std::move(partitions);
  }
  std::vector<TopicPartition> partitions() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return partitions_;
  }

  // The consumer group the thread is a member of, and the member id its
  // coordinator gave it (empty until it has joined). Set by the thread.
  void SetGroup(std::string group_id, std::string member_id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    group_id_ = std::move(group_id);
    member_id_ = std::move(member_id);
  }
  std::string group_id() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return group_id_;
  }
  std::string group_member_id() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return member_id_;
  }

  // `lag` by topic, as last measured (at each commit interval).
  void SetTopicLag(std::map<std::string, int64_t> lag) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    topic_lag_ = std::move(lag);
  }
  std::map<std::string, int64_t> topic_lag() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return topic_lag_;
  }

  // Notified once the thread's consumer has joined its group (its first
  // assignment, possibly empty) or the thread has exited.
  absl::Notification joined;

  AtomicCounters counters;  // Cumulative.
  // Gauges.
  std::atomic<int64_t> in_flight{0};        // Records handed to Kafka, not yet acknowledged.
  std::atomic<int64_t> scheduled{0};        // Records held until their due time.
  std::atomic<int64_t> calls_in_flight{0};  // Processor calls in flight.
  // A fixed-delay tier's thread: its partitions whose next record is held
  // until due (as of its last gauge update).
  std::atomic<int64_t> waiting_partitions{0};
  // Key order: records held behind an earlier record of their key.
  std::atomic<int64_t> parked{0};
  // Bytes of the records the thread holds, in flight to Kafka included: the
  // sum of their ByteCharges.
  std::atomic<int64_t> held_bytes{0};
  std::atomic<int64_t> lag{0};  // Records behind the high watermarks.
  // Between giving partitions up in a rebalance and being assigned anew: the
  // group is still deciding, so having no partitions does not make it idle.
  std::atomic<bool> rebalancing{false};
  // Unix ms of its last assignment or revocation.
  std::atomic<int64_t> assignment_changed_ms{0};
  // Latencies: the processor call, and record timestamp to final outcome.
  // Mutable: recording does not change what the stats describe, and the
  // metrics sampler (the one caller of TakeMaxMs) holds a const view.
  mutable LatencyHistogram processing_latency;
  mutable LatencyHistogram end_to_end_latency;

 private:
  const int id_;
  const ThreadRole role_;
  std::atomic<int> tier_{-1};
  std::atomic<ThreadState> state_{ThreadState::kStarting};
  std::atomic<int64_t> state_since_ms_{absl::ToUnixMillis(absl::Now())};
  std::atomic<int64_t> loop_turned_ms_{absl::ToUnixMillis(absl::Now())};

  mutable absl::Mutex mu_;  // Guards the fields below.
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  int64_t last_error_ms_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<TopicPartition> partitions_ ABSL_GUARDED_BY(mu_);
  std::string group_id_ ABSL_GUARDED_BY(mu_);
  std::string member_id_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> topic_lag_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_STATS_THREAD_STATS_H_
