#include "server/common/log_throttle.h"

#include "gtest/gtest.h"

namespace retryd {
namespace {

TEST(LogThrottleTest, OneLinePerIntervalWithTheCountHeldBack) {
  LogThrottle throttle(absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t held_back = -1;
  ASSERT_TRUE(throttle.Allow(t0, &held_back)) << "the first line always goes out";
  EXPECT_EQ(held_back, 0);

  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(throttle.Allow(t0 + absl::Milliseconds(100 * i), &held_back));
  }
  EXPECT_FALSE(throttle.Allow(t0 + absl::Milliseconds(999), &held_back));

  held_back = -1;
  ASSERT_TRUE(throttle.Allow(t0 + absl::Seconds(1), &held_back));
  EXPECT_EQ(held_back, 6);
  // The interval counts from the last line let through, not from the first.
  EXPECT_FALSE(throttle.Allow(t0 + absl::Milliseconds(1500), &held_back));
  ASSERT_TRUE(throttle.Allow(t0 + absl::Seconds(2), &held_back));
  EXPECT_EQ(held_back, 1);
}

TEST(LogThrottleTest, QuietPeriodsCountNothing) {
  LogThrottle throttle(absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t held_back = -1;
  ASSERT_TRUE(throttle.Allow(t0, &held_back));
  ASSERT_TRUE(throttle.Allow(t0 + absl::Minutes(5), &held_back));
  EXPECT_EQ(held_back, 0);
}

}  // namespace
}  // namespace retryd
