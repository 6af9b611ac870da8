// FitDeadLetter: the dead-letter form of a record Kafka refused as it was.
#include "server/engine/handoff/dead_letter_fit.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/engine/handoff/retry_headers.h"

namespace retryd::engine {
namespace {

std::string ValueOf(const OutgoingRecord& r, std::string_view key) {
  for (const Header& h : r.headers) {
    if (h.key == key) return h.value.value_or("<null>");
  }
  return "<absent>";
}

OutgoingRecord DeadLetter(size_t value_bytes) {
  RetryMetadata m;
  m.attempt = 3;
  m.original_topic = "orders";
  m.original_partition = 2;
  m.original_offset = 41;
  m.error = "output record refused by Kafka (too large)";
  OutgoingRecord r;
  r.topic = "orders.dlq";
  r.key = "key-1";
  r.value = std::string(value_bytes, 'v');
  r.headers = WithRetryHeaders({{"a", "1"}, {"b", std::nullopt}}, m);
  return r;
}

TEST(FitDeadLetterTest, CutsTheValueToFitAndSaysSo) {
  const OutgoingRecord fitted = FitDeadLetter(DeadLetter(1000100), 1000000);
  EXPECT_LE(RecordWireSize(fitted), 1000000u);
  EXPECT_EQ(fitted.topic, "orders.dlq");
  EXPECT_EQ(fitted.key, "key-1");
  ASSERT_TRUE(fitted.value.has_value());
  EXPECT_GT(fitted.value->size(), 998000u);
  // Original headers first, in order, then the retryd ones, then the mark.
  ASSERT_GE(fitted.headers.size(), 3u);
  EXPECT_EQ(fitted.headers[0].key, "a");
  EXPECT_EQ(fitted.headers[1].key, "b");
  EXPECT_EQ(fitted.headers[1].value, std::nullopt);
  EXPECT_EQ(fitted.headers.back().key, kTruncatedHeader);
  EXPECT_EQ(ValueOf(fitted, kTruncatedHeader),
            absl::StrCat("original key=5 value=1000100 headers=2; kept key=5 value=",
                         fitted.value->size(), " headers=2"));
  EXPECT_EQ(ValueOf(fitted, kOriginalOffsetHeader), "41");
  EXPECT_EQ(ValueOf(fitted, kErrorHeader), "output record refused by Kafka (too large)");
}

TEST(FitDeadLetterTest, KeepsTheRetrydHeadersWhenLittleElseFits) {
  OutgoingRecord big = DeadLetter(50000);
  big.key = std::string(20000, 'k');
  const OutgoingRecord fitted = FitDeadLetter(big, 16 * 1024);
  EXPECT_LE(RecordWireSize(fitted), 16u * 1024);
  EXPECT_EQ(fitted.key, std::nullopt);  // Does not fit: left out.
  EXPECT_EQ(ValueOf(fitted, kOriginalTopicHeader), "orders");
  EXPECT_EQ(ValueOf(fitted, kAttemptHeader), "3");
  EXPECT_EQ(ValueOf(fitted, "a"), "1");
  ASSERT_TRUE(fitted.value.has_value());
  EXPECT_EQ(ValueOf(fitted, kTruncatedHeader),
            absl::StrCat("original key=20000 value=50000 headers=2; kept key=null value=",
                         fitted.value->size(), " headers=2"));
}

TEST(FitDeadLetterTest, FittingAgainStartsFromTheNewRecordWithoutStackingMarks) {
  const OutgoingRecord once = FitDeadLetter(DeadLetter(5000), 3000);
  const OutgoingRecord twice = FitDeadLetter(once, 2000);
  int marks = 0;
  for (const auto& h : twice.headers) marks += h.key == kTruncatedHeader ? 1 : 0;
  EXPECT_EQ(marks, 1);
  EXPECT_LE(RecordWireSize(twice), 2000u);
}

TEST(FitDeadLetterTest, NullValueStaysNull) {
  OutgoingRecord r = DeadLetter(0);
  r.value.reset();
  const OutgoingRecord fitted = FitDeadLetter(r, 100000);
  EXPECT_EQ(fitted.value, std::nullopt);
  EXPECT_EQ(ValueOf(fitted, kTruncatedHeader),
            "original key=5 value=null headers=2; kept key=5 value=null headers=2");
}

}  // namespace
}  // namespace retryd::engine
