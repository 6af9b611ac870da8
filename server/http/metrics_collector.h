// The engine in Prometheus' terms: the metric families of one EngineSample,
// and their text exposition (format 0.0.4) for GET /metrics.
//
// Every family comes from a table or a field of the sample, not from a list
// kept here by hand: the counters from kCounterFields (counters.h), as
// retryd_thread_<name>_total{thread_id,role} and retryd_<name>_total (every
// thread ever, as GetStatus' totals); the per-thread gauges from
// kThreadGaugeFields (metrics_sampler.h) as retryd_thread_<name>; the
// latencies as histograms. A thread's state is the enum-style gauge
// retryd_thread_state{thread_id,role,state} (1 for its state, 0 for the
// others) rather than a label of its counters: a label that changes would
// start a new series at every change and break rate(). docs/metrics.md
// ("Metrics") lists the families; a test checks that list against
// MetricFamilies().
//
// Latency histograms: the engine keeps log-linear buckets, 4 per power of
// two (latency_histogram.h); each family's `le` bounds are every power of
// two microseconds from 256 us to 67 s, so each bucket's count is exact (a
// latency is counted below the bound it is under; latencies are recorded in
// whole microseconds). The engine keeps no sum: `_sum` is estimated from the
// fine buckets, each latency taken at the middle of its bucket (within
// about 12 % of the true sum).
//
// Thread-safety: MetricFamilies() and kMetricsContentType are pure;
// MetricsCollector is thread-safe (Collect() takes a sample, MetricsSampler
// serialising it).
#ifndef RETRYD_SERVER_HTTP_METRICS_COLLECTOR_H_
#define RETRYD_SERVER_HTTP_METRICS_COLLECTOR_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "server/engine/metrics_sampler.h"

namespace retryd::http {

// The Content-Type of the text exposition format.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// What the families need beside the sample.
struct MetricsContext {
  std::string version;         // retryd_build_info{version}.
  int64_t max_held_bytes = 0;  // Per thread; 0: no limit.
  bool kafka_reachable = false;
  // The retry tiers' topics, by tier index: retryd_retry_tier_backlog{tier}.
  std::vector<std::string> tier_topics;
};

// The upper bounds (seconds) of the latency histograms' buckets, +Inf aside.
std::vector<double> LatencyBucketBounds();

std::vector<prometheus::MetricFamily> MetricFamilies(const engine::EngineSample& sample,
                                                     const MetricsContext& context);

// The families serialised by prometheus::TextSerializer.
std::string RenderMetrics(const std::vector<prometheus::MetricFamily>& families);

class MetricsCollector : public prometheus::Collectable {
 public:
  // `sampler` must outlive the collector; `context` is called once per
  // Collect().
  MetricsCollector(engine::MetricsSampler& sampler, std::function<MetricsContext()> context);

  // The families of a sample taken now (MetricsSampler::SampleNow()), so
  // that they hold everything counted before the call.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  engine::MetricsSampler& sampler_;
  const std::function<MetricsContext()> context_;
};

}  // namespace retryd::http

#endif  // RETRYD_SERVER_HTTP_METRICS_COLLECTOR_H_
