#include "server/engine/worker/backoff.h"

#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

BackoffOptions Options(int64_t initial_ms, double multiplier, int64_t max_ms) {
  BackoffOptions o;
  o.initial_ms = initial_ms;
  o.multiplier = multiplier;
  o.max_ms = max_ms;
  return o;
}

TEST(BackoffTest, CapGrowsExponentiallyThenSaturates) {
  const BackoffOptions o = Options(100, 2.0, 1000);
  EXPECT_EQ(Backoff::CapMs(o, 1), 100);
  EXPECT_EQ(Backoff::CapMs(o, 2), 200);
  EXPECT_EQ(Backoff::CapMs(o, 3), 400);
  EXPECT_EQ(Backoff::CapMs(o, 4), 800);
  EXPECT_EQ(Backoff::CapMs(o, 5), 1000);
  EXPECT_EQ(Backoff::CapMs(o, 6), 1000);
  EXPECT_EQ(Backoff::CapMs(o, 50), 1000);
}

TEST(BackoffTest, DefaultOptions) {
  const BackoffOptions o;  // 100 ms, x2, 60 s.
  EXPECT_EQ(Backoff::CapMs(o, 1), 100);
  EXPECT_EQ(Backoff::CapMs(o, 10), 51200);
  EXPECT_EQ(Backoff::CapMs(o, 11), 60000);
}

TEST(BackoffTest, FractionalMultiplierTruncates) {
  const BackoffOptions o = Options(100, 1.5, 10000);
  EXPECT_EQ(Backoff::CapMs(o, 2), 150);
  EXPECT_EQ(Backoff::CapMs(o, 3), 225);
  EXPECT_EQ(Backoff::CapMs(o, 4), 337);  // 337.5
}

TEST(BackoffTest, MultiplierOneIsConstant) {
  const BackoffOptions o = Options(250, 1.0, 10000);
  EXPECT_EQ(Backoff::CapMs(o, 1), 250);
  EXPECT_EQ(Backoff::CapMs(o, 1000), 250);
}

TEST(BackoffTest, AttemptBelowOneIsTreatedAsOne) {
  const BackoffOptions o = Options(100, 2.0, 1000);
  EXPECT_EQ(Backoff::CapMs(o, 0), 100);
  EXPECT_EQ(Backoff::CapMs(o, -5), 100);
  EXPECT_EQ(Backoff::CapMs(o, std::numeric_limits<int>::min()), 100);
}

TEST(BackoffTest, HugeExponentsSaturateAtMax) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  // 2^1023 is finite, 2^1024 overflows to inf; both must give max_ms.
  EXPECT_EQ(Backoff::CapMs(Options(100, 2.0, 60000), 1024), 60000);
  EXPECT_EQ(Backoff::CapMs(Options(100, 2.0, 60000), 1025), 60000);
  EXPECT_EQ(Backoff::CapMs(Options(100, 2.0, 60000), 1026), 60000);
  EXPECT_EQ(Backoff::CapMs(Options(100, 2.0, 60000), std::numeric_limits<int>::max()), 60000);
  EXPECT_EQ(Backoff::CapMs(Options(1, 1e300, 60000), 3), 60000);
  // Caps near INT64_MAX must not wrap negative when converted back.
  EXPECT_EQ(Backoff::CapMs(Options(kMax, 2.0, kMax), 1), kMax);
  EXPECT_EQ(Backoff::CapMs(Options(kMax / 2, 2.0, kMax), 2), kMax);
  EXPECT_EQ(Backoff::CapMs(Options(1, 2.0, kMax), 64), kMax);
  EXPECT_EQ(Backoff::CapMs(Options(1, 2.0, kMax), 63), int64_t{1} << 62);
  EXPECT_EQ(Backoff::CapMs(Options(1, 2.0, kMax), std::numeric_limits<int>::max()), kMax);
}

TEST(BackoffTest, InvalidOptionsNeverGiveNegativeOrNonsense) {
  const double kInf = std::numeric_limits<double>::infinity();
  const double kNaN = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Backoff::CapMs(Options(100, kNaN, 1000), 5), 100);
  EXPECT_EQ(Backoff::CapMs(Options(100, kInf, 1000), 5), 100);
  EXPECT_EQ(Backoff::CapMs(Options(100, 0.5, 1000), 5), 100);
  EXPECT_EQ(Backoff::CapMs(Options(100, -2.0, 1000), 2), 100);
  EXPECT_EQ(Backoff::CapMs(Options(-100, 2.0, 1000), 3), 0);
  EXPECT_EQ(Backoff::CapMs(Options(100, 2.0, -1), 3), 0);
  EXPECT_EQ(Backoff::CapMs(Options(5000, 2.0, 1000), 1), 1000);

  Backoff zero(Options(0, 2.0, 1000), 1);
  for (int i = 1; i < 10; ++i) EXPECT_EQ(zero.DelayMs(i), 0);
}

TEST(BackoffTest, DelayIsWithinZeroAndCap) {
  const BackoffOptions o = Options(100, 2.0, 1000);
  Backoff b(o, 12345);
  for (int attempt = 1; attempt <= 8; ++attempt) {
    const int64_t cap = Backoff::CapMs(o, attempt);
    for (int i = 0; i < 2000; ++i) {
      const int64_t d = b.DelayMs(attempt);
      ASSERT_GE(d, 0) << "attempt " << attempt;
      ASSERT_LE(d, cap) << "attempt " << attempt;
    }
  }
}

TEST(BackoffTest, JitterCoversTheWholeRange) {
  // Full jitter: with a cap of 3 every value in [0, 3], both ends included,
  // shows up in a few thousand draws.
  Backoff b(Options(3, 2.0, 1000), 7);
  std::set<int64_t> seen;
  for (int i = 0; i < 4000; ++i) seen.insert(b.DelayMs(1));
  EXPECT_THAT(seen, ::testing::ElementsAre(0, 1, 2, 3));
}

TEST(BackoffTest, JitterMeanIsAboutHalfTheCap) {
  Backoff b(Options(1000, 2.0, 60000), 99);
  const int kDraws = 20000;
  double sum = 0;
  for (int i = 0; i < kDraws; ++i) sum += static_cast<double>(b.DelayMs(1));
  // Uniform on [0, 1000]: mean 500, standard error ~2; 20 is ~10 sigma.
  EXPECT_NEAR(sum / kDraws, 500.0, 20.0);
}

TEST(BackoffTest, SameSeedSameSequence) {
  const BackoffOptions o = Options(100, 2.0, 60000);
  Backoff a(o, 42);
  Backoff b(o, 42);
  std::vector<int64_t> sa, sb;
  for (int i = 1; i <= 200; ++i) {
    sa.push_back(a.DelayMs(1 + i % 12));
    sb.push_back(b.DelayMs(1 + i % 12));
  }
  EXPECT_EQ(sa, sb);
}

TEST(BackoffTest, DifferentSeedsDiffer) {
  const BackoffOptions o = Options(100, 2.0, 60000);
  Backoff a(o, 1);
  Backoff b(o, 2);
  std::vector<int64_t> sa, sb;
  for (int i = 0; i < 50; ++i) {
    sa.push_back(a.DelayMs(10));
    sb.push_back(b.DelayMs(10));
  }
  EXPECT_NE(sa, sb);
}

TEST(BackoffTest, DelayAtHugeAttemptIsBoundedByMax) {
  Backoff b(Options(100, 2.0, 60000), 3);
  for (int i = 0; i < 1000; ++i) {
    const int64_t d = b.DelayMs(std::numeric_limits<int>::max());
    ASSERT_GE(d, 0);
    ASSERT_LE(d, 60000);
  }
}

}  // namespace
}  // namespace retryd::engine
