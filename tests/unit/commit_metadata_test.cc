#include <algorithm>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/handoff/done_above.h"
#include "server/engine/ordering/in_place_retry.h"

namespace retryd::engine {
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

TEST(PartitionStateTest, DoneRangesRoundTripRelativeToTheCommit) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{1002, 1004}, {1006, 1006}};
  const std::string encoded = EncodeDoneAbove(1000, ranges);
  EXPECT_EQ(encoded, "retryd-done/1 offset=1000 2-4 6-6");
  EXPECT_EQ(DecodeDoneAbove(encoded, 1000), ranges);
  EXPECT_EQ(EncodeDoneAbove(1000, {}), "");
  // In-place metadata and done ranges never read as each other.
  EXPECT_EQ(DecodeInPlaceRetry(encoded), std::nullopt);
  EXPECT_TRUE(DecodeDoneAbove(EncodeInPlaceRetry({.offset = 3}), 3).empty());
}

TEST(PartitionStateTest, DoneRangesKeepToTheMetadataLimit) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t i = 0; i < 1000; ++i) ranges.emplace_back(100000 + 2 * i, 100000 + 2 * i);
  const std::string encoded = EncodeDoneAbove(99999, ranges);
  EXPECT_LE(encoded.size(), kMaxDoneMetadataBytes);
  const std::vector<std::pair<int64_t, int64_t>> decoded = DecodeDoneAbove(encoded, 99999);
  ASSERT_GT(decoded.size(), 50u);
  ASSERT_LT(decoded.size(), ranges.size());
  // The lowest ranges are kept; those left out are processed again.
  EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), ranges.begin()));
}

TEST(PartitionStateTest, DoneRangesOfAnotherOffsetOrMalformedAreIgnored) {
  const std::string encoded = EncodeDoneAbove(10, {{12, 13}});
  EXPECT_TRUE(DecodeDoneAbove(encoded, 11).empty()) << "written for another commit";
  EXPECT_TRUE(DecodeDoneAbove("retryd-done/1 offset=10", 10).empty());
  EXPECT_TRUE(DecodeDoneAbove("retryd-done/1 offset=10 0-2", 10).empty()) << "at the commit";
  EXPECT_TRUE(DecodeDoneAbove("retryd-done/1 offset=10 3-2", 10).empty());
  EXPECT_TRUE(DecodeDoneAbove("retryd-done/1 offset=10 4-5 2-3", 10).empty()) << "unordered";
  EXPECT_TRUE(DecodeDoneAbove("retryd-done/1 offset=10 2-x", 10).empty());
  EXPECT_TRUE(DecodeDoneAbove("retryd-done/2 offset=10 2-3", 10).empty());
  EXPECT_TRUE(DecodeDoneAbove("", 10).empty());
}

}  // namespace
}  // namespace retryd::engine
