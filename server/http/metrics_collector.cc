#include "server/http/metrics_collector.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/engine/api/counters.h"
#include "server/engine/stats/latency_histogram.h"
#include "server/engine/stats/thread_stats.h"

namespace retryd::http {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;
using engine::LatencyHistogram;

// The histograms' bounds: 2^k microseconds for k in this range. Bucket 4k
// of LatencyHistogram ends exactly there.
constexpr int kFirstBoundLog2Micros = 8;  // 256 us.
constexpr int kLastBoundLog2Micros = 26;  // 67.1 s.

constexpr engine::ThreadState kThreadStates[] = {
    engine::ThreadState::kStarting, engine::ThreadState::kRunning,
    engine::ThreadState::kIdle,     engine::ThreadState::kWaitingBackoff,
    engine::ThreadState::kPaused,   engine::ThreadState::kWaitingDownstream,
    engine::ThreadState::kStopping, engine::ThreadState::kStopped,
    engine::ThreadState::kFailed,
};
constexpr engine::EngineState kEngineStates[] = {
    engine::EngineState::kCreated,  engine::EngineState::kRunning, engine::EngineState::kDraining,
    engine::EngineState::kStopping, engine::EngineState::kStopped,
};
constexpr engine::Ordering kOrderings[] = {engine::Ordering::kUnordered, engine::Ordering::kInOrder,
                                           engine::Ordering::kKey};
constexpr engine::ThreadRole kRoles[] = {engine::ThreadRole::kPrimary, engine::ThreadRole::kRetry};

// Builds the families in the order they are first named.
class Families {
 public:
  MetricFamily& Family(const std::string& name, const std::string& help, MetricType type) {
    for (MetricFamily& family : families_) {
      if (family.name == name) return family;
    }
    families_.push_back(MetricFamily{name, help, type, {}});
    return families_.back();
  }
  void Gauge(const std::string& name, const std::string& help, Labels labels, double value) {
    Add(Family(name, help, MetricType::Gauge), std::move(labels)).gauge.value = value;
  }
  void Counter(const std::string& name, const std::string& help, Labels labels, double value) {
    Add(Family(name, help, MetricType::Counter), std::move(labels)).counter.value = value;
  }
  ClientMetric& Add(MetricFamily& family, Labels labels) {
    family.metric.emplace_back();
    family.metric.back().label = std::move(labels);
    return family.metric.back();
  }
  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  std::vector<MetricFamily> families_;
};

ClientMetric::Histogram Histogram(const LatencyHistogram::Counts& counts) {
  ClientMetric::Histogram out;
  double sum_micros = 0;
  for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
    out.sample_count += counts[b];
    if (b > 0 && counts[b] > 0) {
      const double middle_ms =
          (LatencyHistogram::BucketUpperMs(b - 1) + LatencyHistogram::BucketUpperMs(b)) / 2;
      sum_micros += static_cast<double>(counts[b]) * middle_ms * 1000;
    }
  }
  out.sample_sum = sum_micros / 1e6;
  uint64_t cumulative = 0;
  int next = 0;  // The next fine bucket to add.
  for (int k = kFirstBoundLog2Micros; k <= kLastBoundLog2Micros; ++k) {
    for (; next <= 4 * k; ++next) cumulative += counts[next];
    out.bucket.push_back({cumulative, std::ldexp(1.0, k) / 1e6});
  }
  out.bucket.push_back({out.sample_count, std::numeric_limits<double>::infinity()});
  return out;
}

void AddThreads(const engine::EngineSample& sample, Families& f) {
  for (const engine::ThreadSample& t : sample.threads) {
    const Labels labels = {{"thread_id", absl::StrCat(t.id)},
                           {"role", engine::ThreadRoleName(t.role)}};
    for (engine::ThreadState state : kThreadStates) {
      Labels with_state = labels;
      with_state.push_back({"state", engine::ThreadStateName(state)});
      f.Gauge("retryd_thread_state",
              "A thread's state: 1 for the state it is in, 0 for the others (as WatchMetrics).",
              std::move(with_state), t.state == state ? 1 : 0);
    }
    f.Gauge("retryd_thread_state_start_time_seconds",
            "When the thread entered its state, in seconds since the Unix epoch.", labels,
            static_cast<double>(t.state_since_ms) / 1000);
    for (const engine::CounterField& c : engine::kCounterFields) {
      f.Counter(absl::StrCat("retryd_thread_", c.name, "_total"), c.help, labels,
                static_cast<double>(t.*c.member));
    }
    for (const engine::ThreadGaugeField& g : engine::kThreadGaugeFields) {
      f.Gauge(absl::StrCat("retryd_thread_", g.name), g.help, labels,
              static_cast<double>(t.*g.member));
    }
    f.Add(f.Family("retryd_thread_processing_latency_seconds",
                   "Processor calls' latency (_sum estimated from the engine's fine buckets).",
                   MetricType::Histogram),
          labels)
        .histogram = Histogram(t.processing);
    f.Add(f.Family("retryd_thread_end_to_end_latency_seconds",
                   "From a record's timestamp to its final outcome (_sum estimated from the "
                   "engine's fine buckets).",
                   MetricType::Histogram),
          labels)
        .histogram = Histogram(t.end_to_end);
  }
}

void AddDownstream(const engine::EngineSample& sample, Families& f) {
  // roles[] is primary, then retry.
  for (size_t i = 0; i < std::size(kRoles); ++i) {
    const engine::DownstreamRoleSnapshot& role = sample.downstream.roles[i];
    const Labels labels = {{"role", engine::ThreadRoleName(kRoles[i])}};
    f.Gauge("retryd_downstream_up",
            "1 while the processor's downstream takes calls for the role, 0 while it is taken for "
            "down (intake paused, one probe at a time).",
            labels, role.down ? 0 : 1);
    f.Counter("retryd_downstream_outages_total", "Times the downstream went down for the role.",
              labels, static_cast<double>(role.outages));
    f.Counter("retryd_downstream_probes_total", "Probes sent while the downstream was down.",
              labels, static_cast<double>(role.probes));
    f.Gauge("retryd_downstream_waiting", "Records held until the downstream takes them.", labels,
            static_cast<double>(role.waiting));
  }
  f.Gauge("retryd_downstream_consecutive_unavailable",
          "Calls refused as unavailable since the downstream last answered.", {},
          static_cast<double>(sample.downstream.consecutive_unavailable));
}

// The engine as a whole: release, state, ordering mode, Kafka's reach.
void AddEngine(const engine::EngineSample& sample, const MetricsContext& context, Families& f) {
  f.Gauge("retryd_build_info", "The running release, as the label version; always 1.",
          {{"version", context.version}}, 1);
  for (engine::EngineState state : kEngineStates) {
    f.Gauge("retryd_engine_state",
            "The engine's state: 1 for the state it is in, 0 for the others.",
            {{"state", engine::EngineStateName(state)}}, sample.state == state ? 1 : 0);
  }
  for (engine::Ordering ordering : kOrderings) {
    f.Gauge("retryd_ordering", "The ordering mode in force: 1 for it, 0 for the others.",
            {{"mode", engine::OrderingName(ordering)}}, sample.ordering == ordering ? 1 : 0);
  }
  f.Gauge("retryd_kafka_reachable", "1 if the last probe of the Kafka cluster answered, else 0.",
          {}, context.kafka_reachable ? 1 : 0);
}

// Every thread's outcome counters summed, and the hand-offs in flight.
void AddTotals(const engine::EngineSample& sample, Families& f) {
  f.Counter("retryd_consumed_total", "First attempts by the primary threads.", {},
            static_cast<double>(sample.totals.consumed));
  for (const engine::CounterField& c : engine::kCounterFields) {
    f.Counter(absl::StrCat("retryd_", c.name, "_total"),
              absl::StrCat(c.help, " All threads, stopped ones included."), {},
              static_cast<double>(sample.totals.*c.member));
  }
  f.Gauge("retryd_in_flight", "Hand-offs awaiting their acknowledgement, all threads.", {},
          static_cast<double>(sample.totals.in_flight));
}

// The retry topics' backlog: in all, by tier and by partition.
void AddRetryBacklog(const engine::EngineSample& sample, const MetricsContext& context,
                     Families& f) {
  f.Gauge("retryd_retry_backlog",
          "Records in the retry topic whose outcome the retry group has not committed.", {},
          static_cast<double>(sample.retry_backlog));
  for (size_t i = 0; i < context.tier_topics.size() && i < sample.tier_backlog.size(); ++i) {
    f.Gauge("retryd_retry_tier_backlog",
            "Records in one retry tier's topic whose outcome the retry group has not committed.",
            {{"tier", context.tier_topics[i]}}, static_cast<double>(sample.tier_backlog[i]));
  }
  for (const engine::PartitionBacklog& p : sample.partition_backlog) {
    if (p.tier < 0 || p.tier >= static_cast<int>(context.tier_topics.size())) continue;
    f.Gauge("retryd_retry_partition_backlog",
            "Records in one partition of a retry topic whose outcome the retry group has not "
            "committed, as last measured.",
            {{"topic", context.tier_topics[p.tier]}, {"partition", absl::StrCat(p.partition)}},
            static_cast<double>(p.backlog));
  }
}

// Consumer lag by group and topic: the sum of the running threads' (a
// partition belongs to one thread of its group at a time).
void AddConsumerLag(const engine::EngineSample& sample, Families& f) {
  std::map<std::pair<std::string, std::string>, int64_t> lag;
  for (const engine::ThreadSample& t : sample.threads) {
    if (engine::IsEnded(t.state)) continue;
    for (const auto& [topic, records] : t.topic_lag) lag[{t.group_id, topic}] += records;
  }
  for (const auto& [group_topic, records] : lag) {
    f.Gauge("retryd_consumer_lag_records",
            "Records behind the high watermarks, by consumer group and topic: the input topics' "
            "(the group) and the retry topic's (the retry group), as the threads last measured.",
            {{"group", group_topic.first}, {"topic", group_topic.second}},
            static_cast<double>(records));
  }
}

}  // namespace

std::vector<double> LatencyBucketBounds() {
  std::vector<double> out;
  for (int k = kFirstBoundLog2Micros; k <= kLastBoundLog2Micros; ++k) {
    out.push_back(std::ldexp(1.0, k) / 1e6);
  }
  return out;
}

std::vector<MetricFamily> MetricFamilies(const engine::EngineSample& sample,
                                         const MetricsContext& context) {
  Families f;
  AddEngine(sample, context, f);
  AddTotals(sample, f);
  AddRetryBacklog(sample, context, f);
  f.Gauge("retryd_parked_keys", "Key order: keys parked now.", {},
          static_cast<double>(sample.parked_keys.keys));
  f.Gauge("retryd_parked_records",
          "Key order: records of parked keys in the retry topic, not yet complete.", {},
          static_cast<double>(sample.parked_keys.records));
  f.Gauge("retryd_max_held_bytes",
          "The budget each thread's retryd_thread_held_bytes is held to (max_held_bytes); 0: no "
          "limit.",
          {}, static_cast<double>(context.max_held_bytes));
  AddConsumerLag(sample, f);
  AddDownstream(sample, f);
  AddThreads(sample, f);
  return f.Take();
}

std::string RenderMetrics(const std::vector<MetricFamily>& families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

MetricsCollector::MetricsCollector(engine::MetricsSampler& sampler,
                                   std::function<MetricsContext()> context)
    : sampler_(sampler), context_(std::move(context)) {}

std::vector<MetricFamily> MetricsCollector::Collect() const {
  const std::shared_ptr<const engine::EngineSample> sample = sampler_.SampleNow();
  return MetricFamilies(*sample, context_());
}

}  // namespace retryd::http
