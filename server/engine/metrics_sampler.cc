#include "server/engine/metrics_sampler.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "server/common/logging.h"

namespace retryd::engine {
namespace {

// How long stopped threads stay in samples, and maxima are kept.
constexpr absl::Duration kHistory = absl::Minutes(1);

ThreadSample Read(const ThreadStats& s) {
  ThreadSample t;
  static_cast<Counters&>(t) = s.counters.Read();
  t.id = s.id();
  t.role = s.role();
  t.state = s.state();
  t.state_since_ms = s.state_since_ms();
  t.partitions = s.partitions();
  t.group_id = s.group_id();
  t.topic_lag = s.topic_lag();
  t.in_flight = s.in_flight.load(std::memory_order_relaxed);
  t.scheduled = s.scheduled.load(std::memory_order_relaxed);
  t.calls_in_flight = s.calls_in_flight.load(std::memory_order_relaxed);
  t.lag = s.lag.load(std::memory_order_relaxed);
  t.parked = s.parked.load(std::memory_order_relaxed);
  t.held_bytes = s.held_bytes.load(std::memory_order_relaxed);
  t.processing = s.processing_latency.Read();
  t.end_to_end = s.end_to_end_latency.Read();
  t.last_error = s.last_error();
  t.last_error_ms = s.last_error_ms();
  return t;
}

}  // namespace

MetricsSampler::MetricsSampler(Engine& engine, absl::Duration tick)
    : engine_(engine), tick_(tick) {}

MetricsSampler::~MetricsSampler() { Stop(); }

void MetricsSampler::Start() {
  if (thread_.joinable()) return;
  SampleOnce();
  thread_ = std::thread([this] { Run(); });
}

void MetricsSampler::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
}

void MetricsSampler::Run() {
  SetThreadName("metrics");
  SetThreadComponent("engine");
  absl::Time next = absl::Now() + tick_;
  while (!stop_.WaitForNotificationWithDeadline(next)) {
    SampleOnce();
    next += tick_;
    // After a stall (e.g. a suspended process) skip the missed ticks.
    if (next < absl::Now()) next = absl::Now() + tick_;
  }
}

std::shared_ptr<const EngineSample> MetricsSampler::SampleNow() { return SampleOnce(); }

std::shared_ptr<const EngineSample> MetricsSampler::SampleOnce() {
  absl::MutexLock sampling(&sample_mu_);
  auto sample = std::make_shared<EngineSample>();
  sample->time_ms = absl::ToUnixMillis(absl::Now());
  sample->state = engine_.state();
  sample->ordering = engine_.ordering();
  sample->downstream = engine_.downstream();
  sample->scaling_events = engine_.ScalingEvents();
  TickMax tick_max{sample->time_ms, {}};
  auto add = [&](const std::shared_ptr<const ThreadStats>& stats) {
    sample->threads.push_back(Read(*stats));
    tick_max.by_thread[stats->id()] = {stats->processing_latency.TakeMaxMs(),
                                       stats->end_to_end_latency.TakeMaxMs()};
  };
  const std::vector<std::shared_ptr<const ThreadStats>> running = engine_.Threads();
  for (const auto& stats : running) add(stats);
  sample->retry_backlog = engine_.RetryBacklog(running);
  sample->tier_backlog = engine_.TierBacklogs(running);
  sample->partition_backlog = engine_.PartitionBacklogs();
  for (const auto& stats : engine_.RecentlyStopped(kHistory)) add(stats);
  sample->totals = engine_.Totals();
  sample->parked_keys = engine_.ParkedKeys();

  absl::MutexLock lock(&mu_);
  latest_ = sample;
  // MaxOver() searches maxima_ by time: should the clock step back, the
  // ticks now in the future go.
  while (!maxima_.empty() && maxima_.back().time_ms > tick_max.time_ms) maxima_.pop_back();
  maxima_.push_back(std::move(tick_max));
  const int64_t horizon = maxima_.back().time_ms - absl::ToInt64Milliseconds(kHistory);
  while (!maxima_.empty() && maxima_.front().time_ms < horizon) maxima_.pop_front();
  return sample;
}

std::shared_ptr<const EngineSample> MetricsSampler::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

MaxLatencies MetricsSampler::MaxOver(int thread_id, int64_t from_ms, int64_t to_ms) const {
  MaxLatencies out;
  absl::MutexLock lock(&mu_);
  // maxima_ is in time order: start at the first tick after from_ms.
  auto first = std::upper_bound(maxima_.begin(), maxima_.end(), from_ms,
                                [](int64_t ms, const TickMax& tick) { return ms < tick.time_ms; });
  for (auto tick = first; tick != maxima_.end() && tick->time_ms <= to_ms; ++tick) {
    auto it = tick->by_thread.find(thread_id);
    if (it == tick->by_thread.end()) continue;
    out.processing_ms = std::max(out.processing_ms, it->second.processing_ms);
    out.end_to_end_ms = std::max(out.end_to_end_ms, it->second.end_to_end_ms);
  }
  return out;
}

}  // namespace retryd::engine
