#include "server/engine/partition_state.h"

#include "gtest/gtest.h"

namespace retryd {
namespace {

TEST(PartitionStateTest, RoundTrips) {
  const InPlaceRetry retry{
      .offset = 41, .attempt = 3, .first_failure_ms = 1700000000000, .due_ms = 1700000005000};
  const std::string encoded = EncodeInPlaceRetry(retry);
  EXPECT_EQ(encoded,
            "retryd/1 offset=41 attempt=3 first-failure-ms=1700000000000 due-ms=1700000005000");
  EXPECT_EQ(DecodeInPlaceRetry(encoded), retry);
}

TEST(PartitionStateTest, IgnoresWhatItDidNotWrite) {
  EXPECT_EQ(DecodeInPlaceRetry(""), std::nullopt);
  EXPECT_EQ(DecodeInPlaceRetry("some other tool's metadata"), std::nullopt);
  EXPECT_EQ(DecodeInPlaceRetry("retryd/1 offset=1 attempt=2"), std::nullopt);
  EXPECT_EQ(DecodeInPlaceRetry("retryd/1 offset=x attempt=2 first-failure-ms=0 due-ms=0"),
            std::nullopt);
  EXPECT_EQ(DecodeInPlaceRetry("retryd/1 offset=-1 attempt=2 first-failure-ms=0 due-ms=0"),
            std::nullopt);
  EXPECT_EQ(DecodeInPlaceRetry("retryd/1 offset=1 attempt=0 first-failure-ms=0 due-ms=0"),
            std::nullopt);
  EXPECT_EQ(DecodeInPlaceRetry("retryd/1 offset=1 attempt=2 first-failure-ms=0 bogus=0"),
            std::nullopt);
  EXPECT_EQ(DecodeInPlaceRetry("retryd/2 offset=1 attempt=2 first-failure-ms=0 due-ms=0"),
            std::nullopt);
}

}  // namespace
}  // namespace retryd
