#include "server/engine/stats/latency_histogram.h"

#include <cmath>

#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

TEST(LatencyHistogramTest, BucketsAreMonotonicAndAbout19PercentWide) {
  int last = 0;
  for (int64_t micros = 1; micros < (int64_t{1} << 38); micros = micros * 11 / 10 + 1) {
    const int bucket = LatencyHistogram::BucketOf(micros);
    EXPECT_GE(bucket, last) << micros;
    last = bucket;
    const double upper_ms = LatencyHistogram::BucketUpperMs(bucket);
    EXPECT_GE(upper_ms * 1000, static_cast<double>(micros)) << micros;
    if (micros >= 8) {
      EXPECT_LE(upper_ms * 1000, micros * 1.26) << micros;
    }
  }
  EXPECT_EQ(LatencyHistogram::BucketOf(0), 0);
  EXPECT_EQ(LatencyHistogram::BucketOf(int64_t{1} << 62), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogramTest, SummarizesTheIntervalBetweenTwoReads) {
  LatencyHistogram h;
  for (int i = 0; i < 100; ++i) h.Record(absl::Milliseconds(500));  // Before the interval.
  const LatencyHistogram::Counts before = h.Read();
  EXPECT_DOUBLE_EQ(h.TakeMaxMs(), 500.0);
  for (int i = 1; i <= 1000; ++i) h.Record(absl::Microseconds(i * 100));  // 0.1 .. 100 ms
  const LatencySummary s = LatencyHistogram::Summarize(h.Read(), before, h.TakeMaxMs());
  EXPECT_EQ(s.count, 1000u);
  EXPECT_DOUBLE_EQ(s.max_ms, 100.0);
  EXPECT_NEAR(s.p50_ms, 50.0, 50.0 * 0.2);
  EXPECT_NEAR(s.p99_ms, 99.0, 99.0 * 0.2);
  EXPECT_LE(s.p99_ms, s.max_ms);
  EXPECT_DOUBLE_EQ(h.TakeMaxMs(), 0.0) << "TakeMaxMs resets";
}

TEST(LatencyHistogramTest, EmptyIntervalIsAllZero) {
  LatencyHistogram h;
  h.Record(absl::Milliseconds(3));
  const LatencyHistogram::Counts now = h.Read();
  const LatencySummary s = LatencyHistogram::Summarize(now, now, 0);
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p50_ms, 0);
  EXPECT_EQ(s.p99_ms, 0);
}

}  // namespace
}  // namespace retryd::engine
