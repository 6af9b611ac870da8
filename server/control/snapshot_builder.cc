#include "server/control/snapshot_builder.h"

#include <algorithm>
#include <utility>

#include "server/control/proto_convert.h"

namespace retryd::control {
namespace {

const engine::ThreadSample* FindThread(const engine::EngineSample* sample, int id) {
  if (sample == nullptr) return nullptr;
  for (const engine::ThreadSample& t : sample->threads) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

}  // namespace

SnapshotBuilder::SnapshotBuilder(std::vector<int> thread_ids, int64_t watch_start_ms,
                                 MaxLookup max_over)
    : filter_(thread_ids.begin(), thread_ids.end()),
      watch_start_ms_(watch_start_ms),
      max_over_(std::move(max_over)) {}

void SnapshotBuilder::Build(std::shared_ptr<const engine::EngineSample> latest,
                            v1::MetricsSnapshot& out) {
  if (current_ == nullptr) {
    current_ = std::move(latest);
  } else if (latest->time_ms > current_->time_ms) {
    baseline_ = std::move(current_);
    current_ = std::move(latest);
  }
  out.Clear();
  out.set_time_unix_ms(current_->time_ms);
  out.set_interval_ms(
      baseline_ == nullptr ? 0 : static_cast<uint32_t>(current_->time_ms - baseline_->time_ms));
  out.set_engine_state(ToProto(current_->state));
  out.set_ordering(ToProto(current_->ordering));
  out.set_in_order(current_->ordering == engine::Ordering::kInOrder);
  out.set_retry_backlog(current_->retry_backlog);
  ToProto(current_->downstream, *out.mutable_downstream());
  ToProto(current_->scaling_events, *out.mutable_scaling_events());

  absl::flat_hash_set<int> present;
  for (const engine::ThreadSample& thread : current_->threads) {
    present.insert(thread.id);
    if (!filter_.empty() && !filter_.contains(thread.id)) continue;
    if (engine::IsEnded(thread.state)) {
      // Once, and only if it ended while this stream watched.
      if (reported_ended_.contains(thread.id) || thread.state_since_ms < watch_start_ms_) continue;
      reported_ended_.insert(thread.id);
    }
    AddThread(thread, out);
  }
  absl::erase_if(reported_ended_, [&](int id) { return !present.contains(id); });
}

void SnapshotBuilder::AddThread(const engine::ThreadSample& thread,
                                v1::MetricsSnapshot& out) const {
  static const engine::LatencyHistogram::Counts kNone{};
  v1::ThreadMetrics* m = out.add_threads();
  m->set_thread_id(static_cast<uint32_t>(thread.id));
  m->set_role(ToProto(thread.role));
  m->set_state(ToProto(thread.state));
  m->set_time_in_state_ms(std::max<int64_t>(0, current_->time_ms - thread.state_since_ms));
  ToProto(thread.partitions, *m->mutable_assigned_partitions());
  ToProto(static_cast<const engine::Counters&>(thread), *m);
  GaugesToProto(thread, *m);

  const engine::ThreadSample* before = FindThread(baseline_.get(), thread.id);
  const int64_t from_ms = baseline_ == nullptr ? 0 : baseline_->time_ms;
  const engine::MaxLatencies max = max_over_(thread.id, from_ms, current_->time_ms);
  ToProto(engine::LatencyHistogram::Summarize(
              thread.processing, before != nullptr ? before->processing : kNone, max.processing_ms),
          *m->mutable_processing_latency());
  ToProto(engine::LatencyHistogram::Summarize(
              thread.end_to_end, before != nullptr ? before->end_to_end : kNone, max.end_to_end_ms),
          *m->mutable_end_to_end_latency());
  m->set_last_error(thread.last_error);
  m->set_last_error_unix_ms(thread.last_error_ms);
}

}  // namespace retryd::control
