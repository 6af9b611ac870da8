// Turns the metrics sampler's samples into the MetricsSnapshot messages of
// one WatchMetrics stream.
//
// Each snapshot covers the interval since the sample the previous snapshot
// of the same stream was built from: counts are cumulative (straight from
// the newest sample), latencies are summarised over the interval (p50/p99
// from the difference of two histograms, max exact from the sampler). A
// thread that stops or fails while the stream is open appears once with
// state STOPPED or FAILED, then leaves; threads that ended before the
// stream began are not reported. New threads appear as soon as the sampler
// sees them.
//
// Thread-compatible: one builder per stream, used by one reaction at a time.
#ifndef RETRYD_SERVER_CONTROL_SNAPSHOT_BUILDER_H_
#define RETRYD_SERVER_CONTROL_SNAPSHOT_BUILDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "retryd/v1/control.pb.h"
#include "server/engine/metrics_sampler.h"

namespace retryd::control {

class SnapshotBuilder {
 public:
  // The exact maximum latencies of `thread_id` over samples in
  // (from_ms, to_ms]; MetricsSampler::MaxOver in production.
  using MaxLookup =
      std::function<engine::MaxLatencies(int thread_id, int64_t from_ms, int64_t to_ms)>;

  // `thread_ids`: the threads to report; empty means all, unknown ids are
  // simply never matched. `watch_start_ms`: when the stream began (Unix ms).
  SnapshotBuilder(std::vector<int> thread_ids, int64_t watch_start_ms, MaxLookup max_over);

  // Replaces `out` with the snapshot of `latest` (not null). When `latest`
  // is no newer than the sample used last time (the sampler has not ticked
  // since), the snapshot repeats the previous interval.
  void Build(std::shared_ptr<const engine::EngineSample> latest, v1::MetricsSnapshot& out);

 private:
  void AddThread(const engine::ThreadSample& thread, v1::MetricsSnapshot& out) const;

  const absl::flat_hash_set<int> filter_;
  const int64_t watch_start_ms_;
  const MaxLookup max_over_;

  std::shared_ptr<const engine::EngineSample> baseline_;  // Null until the second sample.
  std::shared_ptr<const engine::EngineSample> current_;
  // Ended threads already reported, pruned once the sampler drops them.
  absl::flat_hash_set<int> reported_ended_;
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_SNAPSHOT_BUILDER_H_
