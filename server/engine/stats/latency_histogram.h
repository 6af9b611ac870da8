// A lock-free latency histogram: log-linear buckets (4 per power of two,
// about 19 % wide) from 1 microsecond to about 12 days, plus the largest
// value recorded since the last TakeMax().
//
// Thread-safe: Record() from any thread (the owning worker), Read() from
// any thread. TakeMax() resets, so exactly one reader (the metrics sampler)
// may call it.
#ifndef RETRYD_SERVER_ENGINE_STATS_LATENCY_HISTOGRAM_H_
#define RETRYD_SERVER_ENGINE_STATS_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace retryd::engine {

struct LatencySummary {
  uint64_t count = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
};

class LatencyHistogram {
 public:
  static constexpr int kSubBuckets = 4;
  static constexpr int kBuckets = 40 * kSubBuckets + 1;
  using Counts = std::array<uint64_t, kBuckets>;

  void Record(absl::Duration latency);

  // Cumulative counts since construction.
  Counts Read() const;

  // The largest latency recorded since the previous call, in ms (0 if none).
  double TakeMaxMs();

  // Count and percentiles of what was recorded between two Read()s
  // (`before` may be all zeros); max is the caller's (from TakeMaxMs()).
  static LatencySummary Summarize(const Counts& now, const Counts& before, double max_ms);

  // Exposed for tests: the bucket of `micros` and the upper bound of a bucket.
  static int BucketOf(int64_t micros);
  static double BucketUpperMs(int bucket);

 private:
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
  std::atomic<int64_t> max_micros_{0};
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_STATS_LATENCY_HISTOGRAM_H_
