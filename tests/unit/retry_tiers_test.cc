// Tiered retry topics: which tier makes an attempt, the single-topic form as
// one tier, the checks and the look-ahead a tier's threads get.
#include "server/engine/steering/retry_tiers.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

using ::testing::HasSubstr;

RetryOptions ThreeTiers() {
  RetryOptions retry;
  retry.tiers = {{.topic = "fast", .delay_ms = 1000, .max_attempts = 2, .threads = -1},
                 {.topic = "mid", .delay_ms = 60000, .max_attempts = 1, .threads = 2},
                 {.topic = "slow", .delay_ms = 3600000, .max_attempts = 3, .threads = -1}};
  return retry;
}

TEST(RetryTiersTest, EachAttemptBelongsToItsTier) {
  const std::vector<RetryTier> tiers = ThreeTiers().tiers;
  EXPECT_EQ(TotalAttempts(tiers), 7);  // 1 + 2 + 1 + 3.
  // Attempt 1 is the primary's; a record failing it goes to the first tier.
  EXPECT_EQ(TierOfAttempt(tiers, 1), 0);
  EXPECT_EQ(TierOfAttempt(tiers, 2), 0);
  EXPECT_EQ(TierOfAttempt(tiers, 3), 0);
  EXPECT_EQ(TierOfAttempt(tiers, 4), 1);
  EXPECT_EQ(TierOfAttempt(tiers, 5), 2);
  EXPECT_EQ(TierOfAttempt(tiers, 7), 2);
  // Past the last (a redriven dead letter): the last tier.
  EXPECT_EQ(TierOfAttempt(tiers, 8), 2);
  EXPECT_EQ(TierOfAttempt(tiers, 1000), 2);
}

TEST(RetryTiersTest, TheSingleTopicFormIsOneBackoffTier) {
  RetryOptions retry;
  retry.topic = "orders.retry";
  retry.max_attempts = 5;
  retry.threads = 3;
  retry.lookahead = 700;
  retry.backoff.max_ms = 9000;
  ASSERT_TRUE(CheckTiers(retry).ok());
  NormalizeTiers(retry);
  ASSERT_EQ(retry.tiers.size(), 1u);
  EXPECT_EQ(retry.tiers[0].topic, "orders.retry");
  EXPECT_EQ(retry.tiers[0].delay_ms, 0);
  EXPECT_EQ(retry.tiers[0].max_attempts, 4);
  EXPECT_EQ(retry.max_attempts, 5) << "unchanged";
  EXPECT_FALSE(HasTiers(retry));
  EXPECT_EQ(TierReadAheadMs(retry.tiers[0]), -1) << "reads ahead retry.lookahead records";
  EXPECT_FALSE(TierIsFifo(retry.tiers[0]));
  EXPECT_EQ(TierMaxDelayMs(retry, retry.tiers[0]), 9000);
  EXPECT_EQ(TierStartThreads(retry, retry.tiers[0]), 3);
  EXPECT_EQ(TierOfAttempt(retry.tiers, 5), 0);

  // max_attempts 1: no retry at all, the one tier makes none.
  RetryOptions once;
  once.topic = "r";
  once.max_attempts = 1;
  NormalizeTiers(once);
  EXPECT_EQ(once.tiers[0].max_attempts, 0);
  EXPECT_EQ(once.max_attempts, 1);
}

TEST(RetryTiersTest, NormalizingTiersSetsTheTopicAndTheAttemptsInAll) {
  RetryOptions retry = ThreeTiers();
  retry.threads = 1;
  retry.max_attempts = 5;  // Whatever it was: the tiers say.
  ASSERT_TRUE(CheckTiers(retry).ok()) << CheckTiers(retry);
  NormalizeTiers(retry);
  EXPECT_TRUE(HasTiers(retry));
  EXPECT_EQ(retry.topic, "fast");
  EXPECT_EQ(retry.max_attempts, 7);
  // A fixed delay: records due beyond the read-ahead stay in Kafka, and a
  // partition's records are offered in order.
  EXPECT_EQ(TierReadAheadMs(retry.tiers[2]), kTierReadAheadMs);
  EXPECT_TRUE(TierIsFifo(retry.tiers[2]));
  EXPECT_EQ(TierMaxDelayMs(retry, retry.tiers[2]), 3600000);
  EXPECT_EQ(TierStartThreads(retry, retry.tiers[0]), 1);
  EXPECT_EQ(TierStartThreads(retry, retry.tiers[1]), 2);
  EXPECT_EQ(FindTier(retry.tiers, "mid"), 1);
  EXPECT_EQ(FindTier(retry.tiers, "none"), -1);
}

TEST(RetryTiersTest, BadTiersAreRefusedNamingTheTier) {
  auto error = [](auto change) {
    RetryOptions retry = ThreeTiers();
    change(retry);
    return std::string(CheckTiers(retry).message());
  };
  EXPECT_THAT(error([](RetryOptions& r) { r.tiers[1].topic = "fast"; }),
              HasSubstr("retry.tiers[1]: topic fast is named twice"));
  EXPECT_THAT(error([](RetryOptions& r) { r.tiers[2].delay_ms = 0; }),
              HasSubstr("retry.tiers[2]: delay_ms must be at least 1"));
  EXPECT_THAT(error([](RetryOptions& r) { r.tiers[0].max_attempts = 0; }),
              HasSubstr("retry.tiers[0]: max_attempts must be at least 1"));
  EXPECT_THAT(error([](RetryOptions& r) { r.tiers[0].topic = ""; }),
              HasSubstr("retry.tiers[0]: topic is empty"));
  EXPECT_THAT(error([](RetryOptions& r) { r.tiers[1].threads = 17; }),
              HasSubstr("retry.tiers[1]: threads must be between"));
  EXPECT_THAT(error([](RetryOptions& r) { r.tiers[2].max_attempts = 997; }),
              HasSubstr("at most 1000, got 1001"));
  EXPECT_THAT(error([](RetryOptions& r) { r.tiers.resize(kMaxRetryTiers + 1, r.tiers[0]); }),
              HasSubstr("at most 16"));
}

}  // namespace
}  // namespace retryd::engine
