#include "server/engine/stats/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace retryd::engine {

int LatencyHistogram::BucketOf(int64_t micros) {
  if (micros < 1) return 0;
  const int exponent = std::bit_width(static_cast<uint64_t>(micros)) - 1;  // floor(log2)
  // Position within [2^e, 2^(e+1)) in quarters.
  const int sub = exponent >= 2 ? static_cast<int>((micros >> (exponent - 2)) & 3)
                                : static_cast<int>((micros << (2 - exponent)) & 3);
  return std::min(kBuckets - 1, 1 + exponent * kSubBuckets + sub);
}

double LatencyHistogram::BucketUpperMs(int bucket) {
  if (bucket <= 0) return 0.001;
  const int exponent = (bucket - 1) / kSubBuckets;
  const int sub = (bucket - 1) % kSubBuckets;
  return std::ldexp(1.0 + (sub + 1) / 4.0, exponent) / 1000.0;
}

void LatencyHistogram::Record(absl::Duration latency) {
  const int64_t micros = std::max<int64_t>(0, absl::ToInt64Microseconds(latency));
  counts_[BucketOf(micros)].fetch_add(1, std::memory_order_relaxed);
  int64_t seen = max_micros_.load(std::memory_order_relaxed);
  while (micros > seen &&
         !max_micros_.compare_exchange_weak(seen, micros, std::memory_order_relaxed)) {
  }
}

LatencyHistogram::Counts LatencyHistogram::Read() const {
  Counts out;
  for (int i = 0; i < kBuckets; ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
  return out;
}

double LatencyHistogram::TakeMaxMs() {
  return static_cast<double>(max_micros_.exchange(0, std::memory_order_relaxed)) / 1000.0;
}

LatencySummary LatencyHistogram::Summarize(const Counts& now, const Counts& before, double max_ms) {
  LatencySummary s;
  Counts delta;
  for (int i = 0; i < kBuckets; ++i) {
    delta[i] = now[i] >= before[i] ? now[i] - before[i] : 0;
    s.count += delta[i];
  }
  s.max_ms = max_ms;
  if (s.count == 0) return s;
  auto percentile = [&](double q) {
    const uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(s.count)));
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += delta[i];
      // A bucket's upper bound, but never above the exact max.
      if (seen >= rank) return max_ms > 0 ? std::min(BucketUpperMs(i), max_ms) : BucketUpperMs(i);
    }
    return BucketUpperMs(kBuckets - 1);
  };
  s.p50_ms = percentile(0.50);
  s.p99_ms = percentile(0.99);
  return s;
}

}  // namespace retryd::engine
