// The metrics sampler: one thread that reads every worker's stats at a
// fixed tick and publishes an immutable EngineSample, shared by every
// reader (metrics streams, /metrics, status). Readers never touch the
// workers: they diff two samples (counts are cumulative) and ask the sampler
// for the exact maximum latencies between them. A reader that must see
// everything counted before it asked (a /metrics scrape) takes a sample of
// its own with SampleNow(), which every other reader then shares too.
//
// Thread-safe. Start() and Stop() are for the owner.
#ifndef RETRYD_SERVER_ENGINE_METRICS_SAMPLER_H_
#define RETRYD_SERVER_ENGINE_METRICS_SAMPLER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/engine/api/counters.h"
#include "server/engine/api/downstream.h"
#include "server/engine/api/engine.h"
#include "server/engine/ordering/key_parking.h"
#include "server/engine/stats/latency_histogram.h"
#include "server/engine/stats/thread_stats.h"

namespace retryd::engine {

// Counters are cumulative.
struct ThreadSample : Counters {
  int id = 0;
  ThreadRole role = ThreadRole::kPrimary;
  ThreadState state = ThreadState::kStarting;
  int64_t state_since_ms = 0;
  std::vector<TopicPartition> partitions;
  int64_t in_flight = 0, scheduled = 0, lag = 0, calls_in_flight = 0;  // Gauges.
  int64_t parked = 0;      // Gauge: held behind an earlier record of their key.
  int64_t held_bytes = 0;  // Gauge: bytes of the records it holds.
  LatencyHistogram::Counts processing{}, end_to_end{};  // Cumulative.
  std::string group_id;                                 // Its consumer group.
  std::map<std::string, int64_t> topic_lag;             // `lag` by topic.
  std::string last_error;
  int64_t last_error_ms = 0;
};

// A gauge of ThreadSample, declared once for everything that reports the
// gauges one by one: WatchMetrics' ThreadMetrics (set by name) and the
// Prometheus families retryd_thread_<name>. A new gauge is a member of
// ThreadSample, its line in Read() (metrics_sampler.cc), an entry here and a
// field of the same name in retryd.v1.ThreadMetrics.
struct ThreadGaugeField {
  const char* name;  // Also the name of its field in retryd.v1.ThreadMetrics.
  int64_t ThreadSample::*member;
  const char* help;  // The HELP line of its Prometheus family.
};

inline constexpr ThreadGaugeField kThreadGaugeFields[] = {
    {"in_flight", &ThreadSample::in_flight,
     "Records handed to Kafka (output, retry or dead-letter topic), not yet acknowledged."},
    {"scheduled", &ThreadSample::scheduled, "Records held until their due time."},
    {"lag", &ThreadSample::lag,
     "Records behind the high watermarks of the thread's partitions (its consumer lag)."},
    {"calls_in_flight", &ThreadSample::calls_in_flight, "Processor calls in flight."},
    {"parked", &ThreadSample::parked,
     "Key order: records held behind an earlier record of their key."},
    {"held_bytes", &ThreadSample::held_bytes,
     "Bytes of the records the thread holds, against the max_held_bytes budget."},
};

struct EngineSample {
  int64_t time_ms = 0;
  EngineState state = EngineState::kCreated;
  Ordering ordering = Ordering::kUnordered;
  int64_t retry_backlog = 0;
  // Each retry tier's backlog (Engine::TierBacklogs), by tier index.
  std::vector<int64_t> tier_backlog;
  // Each retry topic partition's backlog (Engine::PartitionBacklogs).
  std::vector<PartitionBacklog> partition_backlog;
  // Engine::Totals(), read after the threads: every thread ever, those long
  // stopped included.
  EngineTotals totals;
  KeyParking::Summary parked_keys;  // Engine::ParkedKeys().
  DownstreamSnapshot downstream;
  std::vector<ScalingEvent> scaling_events;  // Engine::ScalingEvents().
  // Running threads, then threads stopped within the last minute (state
  // STOPPED or FAILED), by id.
  std::vector<ThreadSample> threads;
};

struct MaxLatencies {
  double processing_ms = 0;
  double end_to_end_ms = 0;
};

class MetricsSampler {
 public:
  explicit MetricsSampler(Engine& engine, absl::Duration tick = absl::Milliseconds(100));
  ~MetricsSampler();  // Stop()s.

  MetricsSampler(const MetricsSampler&) = delete;
  MetricsSampler& operator=(const MetricsSampler&) = delete;

  // Takes a first sample, then one per tick on its own thread.
  void Start();
  void Stop();

  // The newest sample; never null after Start().
  std::shared_ptr<const EngineSample> Latest() const;

  // Takes a sample now, publishes it as the newest and returns it: it holds
  // everything counted before the call. Blocks only while another sample is
  // taken.
  std::shared_ptr<const EngineSample> SampleNow() ABSL_LOCKS_EXCLUDED(sample_mu_, mu_);

  // Exact per-thread maximum latencies over samples taken in (from_ms, to_ms],
  // kept for the last minute.
  MaxLatencies MaxOver(int thread_id, int64_t from_ms, int64_t to_ms) const;

 private:
  void Run();
  std::shared_ptr<const EngineSample> SampleOnce() ABSL_LOCKS_EXCLUDED(sample_mu_, mu_);

  Engine& engine_;
  const absl::Duration tick_;
  absl::Notification stop_;
  std::thread thread_;

  // Held while a sample is taken: LatencyHistogram::TakeMaxMs() allows one
  // reader at a time, and samples are published in the order they were
  // taken. Acquired before mu_.
  absl::Mutex sample_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  mutable absl::Mutex mu_;  // Guards the fields below; held only to copy or swap.
  std::shared_ptr<const EngineSample> latest_ ABSL_GUARDED_BY(mu_);
  struct TickMax {
    int64_t time_ms;
    std::map<int, MaxLatencies> by_thread;
  };
  std::deque<TickMax> maxima_ ABSL_GUARDED_BY(mu_);  // Oldest first, one minute.
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_METRICS_SAMPLER_H_
