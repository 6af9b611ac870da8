#include "server/engine/handoff/retry_headers.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Binary bytes, an embedded NUL and 0xff included, so nothing on the way
// treats header values as C strings or as text.
const std::string kBinary("a\0b\xff\xfe", 5);

RetryMetadata SampleMetadata() {
  RetryMetadata m;
  m.attempt = 3;
  m.due_ms = 1700000000123;
  m.first_failure_ms = 1700000000000;
  m.original_topic = "orders.v1_eu-west";
  m.original_partition = 7;
  m.original_offset = 123456789;
  m.original_timestamp_ms = 1699999999999;
  m.original_timestamp_type = TimestampType::kLogAppendTime;
  m.error = "timeout talking to billing";
  m.first_error = "connection reset by billing";
  m.error_reason = "billing.example.com/QUOTA_EXCEEDED";
  return m;
}

// Valid retry headers with nothing else.
Headers ValidHeaders() { return WithRetryHeaders({}, SampleMetadata()); }

void ExpectInvalid(const Headers& headers, const std::string& message) {
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(headers);
  ASSERT_FALSE(parsed.ok()) << "parsed a bad header set, expected: " << message;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), message);
}

Headers Without(Headers headers, std::string_view key) {
  std::erase_if(headers, [key](const Header& h) { return h.key == key; });
  return headers;
}

Headers WithValue(Headers headers, std::string_view key, std::optional<std::string> value) {
  int replaced = 0;
  for (Header& h : headers) {
    if (h.key == key) {
      h.value = value;
      ++replaced;
    }
  }
  EXPECT_EQ(replaced, 1) << key;
  return headers;
}

// Spelled out rather than built from the constants, so a renamed constant
// cannot silently change what is on the wire. std::string rather than
// std::string_view: Debian's Abseil has its own absl::string_view, which
// StrCat takes and std::string_view does not convert to.
const std::vector<std::string>& RequiredHeaders() {
  static const auto* kHeaders = new std::vector<std::string>{"retryd-attempt",
                                                             "retryd-due-ms",
                                                             "retryd-first-failure-ms",
                                                             "retryd-original-topic",
                                                             "retryd-original-partition",
                                                             "retryd-original-offset",
                                                             "retryd-original-timestamp-ms"};
  return *kHeaders;
}

const std::vector<std::string>& IntegerHeaders() {
  static const auto* kHeaders =
      new std::vector<std::string>{"retryd-attempt",          "retryd-due-ms",
                                   "retryd-first-failure-ms", "retryd-original-partition",
                                   "retryd-original-offset",  "retryd-original-timestamp-ms"};
  return *kHeaders;
}

TEST(RetryHeadersTest, HeaderNames) {
  EXPECT_EQ(kRetrydHeaderPrefix, "retryd-");
  EXPECT_EQ(kAttemptHeader, "retryd-attempt");
  EXPECT_EQ(kDueMsHeader, "retryd-due-ms");
  EXPECT_EQ(kFirstFailureMsHeader, "retryd-first-failure-ms");
  EXPECT_EQ(kOriginalTopicHeader, "retryd-original-topic");
  EXPECT_EQ(kOriginalPartitionHeader, "retryd-original-partition");
  EXPECT_EQ(kOriginalOffsetHeader, "retryd-original-offset");
  EXPECT_EQ(kOriginalTimestampMsHeader, "retryd-original-timestamp-ms");
  EXPECT_EQ(kOriginalTimestampTypeHeader, "retryd-original-timestamp-type");
  EXPECT_EQ(kErrorHeader, "retryd-error");
  EXPECT_EQ(kFirstErrorHeader, "retryd-first-error");
  EXPECT_EQ(kErrorReasonHeader, "retryd-error-reason");
  EXPECT_EQ(kDeadLetteredMsHeader, "retryd-dead-lettered-ms");
  EXPECT_EQ(kDeadLetteredByHeader, "retryd-dead-lettered-by");
}

TEST(RetryHeadersTest, WritesElevenHeadersAfterTheOriginals) {
  const Headers original = {{"trace-id", "abc"}, {"bin", kBinary}};
  const Headers out = WithRetryHeaders(original, SampleMetadata());
  EXPECT_THAT(out,
              ElementsAre(Header{"trace-id", "abc"}, Header{"bin", kBinary},
                          Header{"retryd-attempt", "3"}, Header{"retryd-due-ms", "1700000000123"},
                          Header{"retryd-first-failure-ms", "1700000000000"},
                          Header{"retryd-original-topic", "orders.v1_eu-west"},
                          Header{"retryd-original-partition", "7"},
                          Header{"retryd-original-offset", "123456789"},
                          Header{"retryd-original-timestamp-ms", "1699999999999"},
                          Header{"retryd-original-timestamp-type", "LogAppendTime"},
                          Header{"retryd-error", "timeout talking to billing"},
                          Header{"retryd-first-error", "connection reset by billing"},
                          Header{"retryd-error-reason", "billing.example.com/QUOTA_EXCEEDED"}));
}

TEST(RetryHeadersTest, UnknownFirstErrorAndReasonAreWrittenEmpty) {
  RetryMetadata m = SampleMetadata();
  m.first_error = "";
  m.error_reason = "";
  const Headers out = WithRetryHeaders({}, m);
  EXPECT_THAT(out, ::testing::Contains(Header{"retryd-first-error", ""}));
  EXPECT_THAT(out, ::testing::Contains(Header{"retryd-error-reason", ""}));
}

TEST(RetryHeadersTest, DeadLetterHeadersAddWhenAndByWhom) {
  const Headers original = {{"trace-id", "abc"}};
  const Headers out =
      WithDeadLetterHeaders(original, SampleMetadata(), {1700000000999, "pod-7/thread-2"});
  Headers expected = WithRetryHeaders(original, SampleMetadata());
  expected.push_back({"retryd-dead-lettered-ms", "1700000000999"});
  expected.push_back({"retryd-dead-lettered-by", "pod-7/thread-2"});
  EXPECT_EQ(out, expected);
  // Read back as retry state (a dead letter replayed into the retry topic),
  // the two are ignored, and written again are replaced.
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(out);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, SampleMetadata());
  EXPECT_EQ(WithRetryHeaders(out, SampleMetadata()), WithRetryHeaders(original, SampleMetadata()));
}

TEST(RetryHeadersTest, DeadLetteredByNamesInstanceAndThread) {
  EXPECT_EQ(DeadLetteredBy("retryd-5d8f-abc", 3), "retryd-5d8f-abc/thread-3");
  EXPECT_EQ(DeadLetteredBy("", 0), "thread-0");
}

TEST(RetryHeadersTest, RoundTripKeepsOriginalHeadersByteForByte) {
  const Headers original = {
      {"trace-id", "abc"},
      {"null", std::nullopt},  // A null value...
      {"empty", ""},           // ...is not an empty one.
      {"", "empty key"},
      {"bin", kBinary},
      {std::string("k\0\xff", 3), std::nullopt},
      {"trace-id", "second copy"},  // Duplicates of non-retryd keys stay.
      {"RETRYD-attempt", "99"},     // Keys are case-sensitive: not ours.
      {"retryd", "no dash"},
  };
  const RetryMetadata m = SampleMetadata();
  const Headers out = WithRetryHeaders(original, m);

  ASSERT_EQ(out.size(), original.size() + 11);
  EXPECT_TRUE(std::equal(original.begin(), original.end(), out.begin()));
  EXPECT_EQ(StripRetrydHeaders(out), original);

  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(out);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, m);
}

TEST(RetryHeadersTest, OldRetrydHeadersAreReplacedNotDuplicated) {
  // A record on its second trip: it carries the first trip's headers (and an
  // unknown retryd-* header from some other writer) among the originals.
  RetryMetadata first = SampleMetadata();
  first.attempt = 2;
  first.error = "first failure";
  Headers original = {{"a", "1"}};
  Headers trip1 = WithRetryHeaders(original, first);
  trip1.push_back({"retryd-future-field", "x"});
  trip1.push_back({"z", std::nullopt});

  RetryMetadata second = SampleMetadata();
  second.attempt = 3;
  second.error = "second failure";
  const Headers trip2 = WithRetryHeaders(trip1, second);

  EXPECT_EQ(StripRetrydHeaders(trip2), (Headers{{"a", "1"}, {"z", std::nullopt}}));
  EXPECT_EQ(std::count_if(trip2.begin(), trip2.end(),
                          [](const Header& h) { return h.key == "retryd-attempt"; }),
            1);
  EXPECT_EQ(trip2.size(), 2u + 11u);
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(trip2);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->attempt, 3);
  EXPECT_EQ(parsed->error, "second failure");
}

TEST(RetryHeadersTest, RoundTripOfExtremeValues) {
  RetryMetadata m;
  m.attempt = kMaxAttempt;
  m.due_ms = std::numeric_limits<int64_t>::max();
  m.first_failure_ms = 0;
  m.original_topic = std::string(kMaxTopicLength, 'x');
  m.original_partition = std::numeric_limits<int32_t>::max();
  m.original_offset = 0;
  m.original_timestamp_ms = -1;
  m.error = std::string("bin\0\xff err \xc3\xa9", 13);
  m.first_error = std::string("first\0\xff", 7);
  m.error_reason = std::string(kMaxErrorReasonBytes, 'r');
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(WithRetryHeaders({}, m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, m);

  RetryMetadata low = m;
  low.attempt = 1;
  low.due_ms = 0;
  low.original_partition = 0;
  low.original_offset = std::numeric_limits<int64_t>::max();
  low.original_timestamp_ms = 0;
  low.original_topic = "a";
  low.error = "";
  low.first_error = "";
  low.error_reason = "";
  parsed = ParseRetryHeaders(WithRetryHeaders({}, low));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, low);
}

TEST(RetryHeadersTest, HeaderOrderDoesNotMatter) {
  Headers headers = ValidHeaders();
  std::reverse(headers.begin(), headers.end());
  headers.insert(headers.begin() + 3, Header{"other", "x"});
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(headers);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, SampleMetadata());
}

TEST(RetryHeadersTest, UnknownRetrydHeadersAreIgnoredByParse) {
  Headers headers = ValidHeaders();
  headers.push_back({"retryd-future-field", std::nullopt});
  headers.push_back({"retryd-future-field", "twice"});
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(headers);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, SampleMetadata());
}

TEST(RetryHeadersTest, MissingErrorHeaderReadsAsEmpty) {
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(Without(ValidHeaders(), kErrorHeader));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->error, "");
  EXPECT_EQ(parsed->attempt, 3);
}

// A record written before retryd-original-timestamp-type,
// retryd-first-error and retryd-error-reason existed still parses: the
// errors read as empty, the type as CreateTime (a timestamp, as all an
// older retryd ever said of one).
TEST(RetryHeadersTest, RecordOfAnOlderWriterParsesWithEmptyFirstErrorAndReason) {
  Headers older = Without(Without(Without(ValidHeaders(), kFirstErrorHeader), kErrorReasonHeader),
                          kOriginalTimestampTypeHeader);
  ASSERT_EQ(older.size(), 8u);
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(older);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  RetryMetadata expected = SampleMetadata();
  expected.original_timestamp_type = TimestampType::kCreateTime;
  expected.first_error = "";
  expected.error_reason = "";
  EXPECT_EQ(*parsed, expected);
}

// Without a timestamp an older record's type is none, not CreateTime.
TEST(RetryHeadersTest, MissingTimestampTypeDefaultsByTheTimestamp) {
  Headers older = Without(ValidHeaders(), kOriginalTimestampTypeHeader);
  older = WithValue(older, kOriginalTimestampMsHeader, "-1");
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(older);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->original_timestamp_type, TimestampType::kNone);
  EXPECT_EQ(DefaultTimestampType(0), TimestampType::kCreateTime);
}

TEST(RetryHeadersTest, TimestampTypeIsOneOfKafkasNames) {
  for (auto [type, name] : {std::pair{TimestampType::kCreateTime, "CreateTime"},
                            std::pair{TimestampType::kLogAppendTime, "LogAppendTime"},
                            std::pair{TimestampType::kNone, "NoTimestampType"}}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(TimestampTypeName(type), name);
    EXPECT_EQ(TimestampTypeFromName(name), type);
    RetryMetadata m = SampleMetadata();
    m.original_timestamp_type = type;
    absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(WithRetryHeaders({}, m));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, m);
  }
  // Kafka's enum constant is not its name; case counts, as in Java's.
  for (const char* bad : {"LOG_APPEND_TIME", "logappendtime", "1", ""}) {
    ExpectInvalid(WithValue(ValidHeaders(), kOriginalTimestampTypeHeader, bad),
                  absl::StrCat("header retryd-original-timestamp-type is not CreateTime, "
                               "LogAppendTime or NoTimestampType: \"",
                               bad, "\""));
  }
  ExpectInvalid(WithValue(ValidHeaders(), kOriginalTimestampTypeHeader, std::nullopt),
                "header retryd-original-timestamp-type has a null value");
}

TEST(RetryHeadersTest, EmptyHeadersReportTheFirstMissingHeader) {
  ExpectInvalid({}, "missing header retryd-attempt");
}

TEST(RetryHeadersTest, EachRequiredHeaderMissing) {
  for (const std::string& name : RequiredHeaders()) {
    SCOPED_TRACE(name);
    ExpectInvalid(Without(ValidHeaders(), name), absl::StrCat("missing header ", name));
  }
}

TEST(RetryHeadersTest, EachHeaderNull) {
  std::vector<std::string> all = RequiredHeaders();
  all.insert(all.end(), {"retryd-error", "retryd-first-error", "retryd-error-reason"});
  for (const std::string& name : all) {
    SCOPED_TRACE(name);
    ExpectInvalid(WithValue(ValidHeaders(), name, std::nullopt),
                  absl::StrCat("header ", name, " has a null value"));
  }
}

TEST(RetryHeadersTest, EachHeaderDuplicated) {
  std::vector<std::string> all = RequiredHeaders();
  all.insert(all.end(), {"retryd-error", "retryd-first-error", "retryd-error-reason"});
  for (const std::string& name : all) {
    SCOPED_TRACE(name);
    Headers headers = ValidHeaders();
    const Header copy = *std::find_if(headers.begin(), headers.end(),
                                      [&name](const Header& h) { return h.key == name; });
    headers.push_back(copy);  // Even an identical copy is ambiguous.
    ExpectInvalid(headers, absl::StrCat("header ", name, " appears 2 times"));
    headers.push_back(copy);
    ExpectInvalid(headers, absl::StrCat("header ", name, " appears 3 times"));
  }
}

TEST(RetryHeadersTest, EachIntegerHeaderRejectsNonDecimalText) {
  const std::vector<std::string> bad = {
      "",     "+1",      " 1", "1 ",  "\t1", "1\n", "12x",   "x12",   "0x10",
      "1.5",  "1e3",     "-",  "--1", "-+1", "+",   "1,000", "1_000", std::string("1\0", 2),
      "\xff", "\xd9\xa1" /* Arabic-Indic 1 */};
  for (const std::string& name : IntegerHeaders()) {
    for (const std::string& value : bad) {
      SCOPED_TRACE(absl::StrCat(name, " = \"", absl::CHexEscape(value), "\""));
      ExpectInvalid(WithValue(ValidHeaders(), name, value),
                    absl::StrCat("header ", name, " is not a decimal integer: \"",
                                 absl::CHexEscape(value), "\""));
    }
  }
}

TEST(RetryHeadersTest, ErrorMessageQuotesOnlyAPrefixOfHugeValues) {
  const std::string value = "x" + std::string(10000, '9');
  absl::StatusOr<RetryMetadata> parsed =
      ParseRetryHeaders(WithValue(ValidHeaders(), kDueMsHeader, value));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            absl::StrCat("header retryd-due-ms is not a decimal integer: \"", value.substr(0, 64),
                         "\"..."));
}

TEST(RetryHeadersTest, EachIntegerHeaderRejectsValuesBeyond64Bits) {
  for (const std::string& name : IntegerHeaders()) {
    for (const std::string value :
         {"9223372036854775808", "-9223372036854775809", "99999999999999999999999"}) {
      SCOPED_TRACE(absl::StrCat(name, " = ", value));
      ExpectInvalid(WithValue(ValidHeaders(), name, value),
                    absl::StrCat("header ", name, " does not fit in 64 bits: \"", value, "\""));
    }
  }
}

TEST(RetryHeadersTest, LeadingZerosAndMinusZeroAreDecimal) {
  Headers headers = WithValue(ValidHeaders(), kAttemptHeader, "007");
  headers = WithValue(headers, kOriginalOffsetHeader, "-0");
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(headers);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->attempt, 7);
  EXPECT_EQ(parsed->original_offset, 0);
}

struct RangeCase {
  std::string header;
  std::string value;
  std::string message;
};

TEST(RetryHeadersTest, OutOfRangeValues) {
  const std::vector<RangeCase> cases = {
      {"retryd-attempt", "0", "header retryd-attempt is out of range: 0 (must be in [1, 1000000])"},
      {"retryd-attempt", "-1",
       "header retryd-attempt is out of range: -1 (must be in [1, 1000000])"},
      {"retryd-attempt", "1000001",
       "header retryd-attempt is out of range: 1000001 (must be in [1, "
       "1000000])"},
      {"retryd-attempt", "4294967297",  // Would wrap to 1 as a 32-bit int.
       "header retryd-attempt is out of range: 4294967297 (must be in [1, "
       "1000000])"},
      {"retryd-due-ms", "-1", "header retryd-due-ms is out of range: -1 (must be >= 0)"},
      {"retryd-due-ms", "-9223372036854775808",
       "header retryd-due-ms is out of range: -9223372036854775808 (must be >= "
       "0)"},
      {"retryd-first-failure-ms", "-1",
       "header retryd-first-failure-ms is out of range: -1 (must be >= 0)"},
      {"retryd-original-partition", "-1",
       "header retryd-original-partition is out of range: -1 (must be in [0, "
       "2147483647])"},
      {"retryd-original-partition", "2147483648",
       "header retryd-original-partition is out of range: 2147483648 (must be "
       "in "
       "[0, 2147483647])"},
      {"retryd-original-offset", "-1",
       "header retryd-original-offset is out of range: -1 (must be >= 0)"},
      {"retryd-original-timestamp-ms", "-2",
       "header retryd-original-timestamp-ms is out of range: -2 (must be >= "
       "-1)"},
  };
  for (const RangeCase& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.header, " = ", c.value));
    ExpectInvalid(WithValue(ValidHeaders(), c.header, c.value), c.message);
  }
}

TEST(RetryHeadersTest, BoundaryValuesAreAccepted) {
  Headers headers = WithValue(ValidHeaders(), kAttemptHeader, "1000000");
  headers = WithValue(headers, kOriginalPartitionHeader, "2147483647");
  headers = WithValue(headers, kOriginalTimestampMsHeader, "-1");
  headers = WithValue(headers, kDueMsHeader, "0");
  headers = WithValue(headers, kFirstFailureMsHeader, "9223372036854775807");
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(headers);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->attempt, 1000000);
  EXPECT_EQ(parsed->original_partition, 2147483647);
  EXPECT_EQ(parsed->original_timestamp_ms, -1);
  EXPECT_EQ(parsed->due_ms, 0);
  EXPECT_EQ(parsed->first_failure_ms, std::numeric_limits<int64_t>::max());
}

TEST(RetryHeadersTest, BadTopics) {
  const std::string too_long(kMaxTopicLength + 1, 'a');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "header retryd-original-topic is empty"},
      {too_long, "header retryd-original-topic is longer than 249 characters: 250"},
      {"a b",
       "header retryd-original-topic is not a valid topic name (only "
       "[A-Za-z0-9._-]): \"a b\""},
      {"orders/eu",
       "header retryd-original-topic is not a valid topic name (only "
       "[A-Za-z0-9._-]): \"orders/eu\""},
      {"t\xc3\xb3pico",
       "header retryd-original-topic is not a valid topic name (only "
       "[A-Za-z0-9._-]): \"t\\xc3\\xb3pico\""},
      {std::string("a\0b", 3),
       "header retryd-original-topic is not a valid topic name (only "
       "[A-Za-z0-9._-]): \"a\\x00\\x62\""},
      {"topic\n",
       "header retryd-original-topic is not a valid topic name (only "
       "[A-Za-z0-9._-]): \"topic\\n\""},
      {".", "header retryd-original-topic is not a valid topic name: \".\""},
      {"..", "header retryd-original-topic is not a valid topic name: \"..\""},
  };
  for (const auto& [topic, message] : cases) {
    SCOPED_TRACE(absl::CHexEscape(topic));
    ExpectInvalid(WithValue(ValidHeaders(), kOriginalTopicHeader, topic), message);
  }
}

TEST(RetryHeadersTest, GoodTopics) {
  for (const std::string& topic :
       {std::string("a"), std::string("..."), std::string("_-."),
        std::string("Orders.V2_eu-west-1"), std::string(kMaxTopicLength, 'Z')}) {
    SCOPED_TRACE(topic);
    absl::StatusOr<RetryMetadata> parsed =
        ParseRetryHeaders(WithValue(ValidHeaders(), kOriginalTopicHeader, topic));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->original_topic, topic);
  }
}

TEST(RetryHeadersTest, ReportsOneProblemDeterministically) {
  // Several problems at once. Presence, duplicates and nulls are checked for
  // every header first, then values, each pass in declaration order, so the
  // same record always gets the same dead-letter reason.
  Headers headers = WithValue(ValidHeaders(), "retryd-due-ms", "bad");
  headers = WithValue(headers, "retryd-original-topic", "");
  headers = WithValue(headers, "retryd-error", std::nullopt);
  headers = Without(headers, "retryd-original-offset");
  ExpectInvalid(headers, "missing header retryd-original-offset");
  headers.push_back({"retryd-original-offset", "1"});
  ExpectInvalid(headers, "header retryd-error has a null value");
  headers = WithValue(headers, "retryd-error", "");
  ExpectInvalid(headers, "header retryd-due-ms is not a decimal integer: \"bad\"");
  headers = WithValue(headers, "retryd-due-ms", "5");
  ExpectInvalid(headers, "header retryd-original-topic is empty");
  headers = WithValue(headers, "retryd-original-topic", "t");
  EXPECT_TRUE(ParseRetryHeaders(headers).ok());
}

TEST(RetryHeadersTest, FirstErrorAndReasonAreTruncatedLikeTheError) {
  RetryMetadata m = SampleMetadata();
  m.first_error = std::string(5000, 'f');
  m.error_reason = std::string(1000, 'r');
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(WithRetryHeaders({}, m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->first_error, std::string(kMaxErrorBytes, 'f'));
  EXPECT_EQ(parsed->error_reason, std::string(256, 'r'));
}

TEST(RetryHeadersTest, ErrorIsTruncatedTo1024Bytes) {
  RetryMetadata m = SampleMetadata();
  m.error = std::string(5000, 'e');
  absl::StatusOr<RetryMetadata> parsed = ParseRetryHeaders(WithRetryHeaders({}, m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->error, std::string(1024, 'e'));

  // A two-byte character straddling byte 1024 is dropped whole.
  m.error = std::string(1023, 'e') + "\xc3\xa9" + "tail";
  parsed = ParseRetryHeaders(WithRetryHeaders({}, m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->error, std::string(1023, 'e'));

  m.error = std::string(1024, 'e');
  parsed = ParseRetryHeaders(WithRetryHeaders({}, m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->error, m.error);
}

TEST(TruncateUtf8Test, ShortInputIsUnchanged) {
  EXPECT_EQ(TruncateUtf8("", 0), "");
  EXPECT_EQ(TruncateUtf8("", 10), "");
  EXPECT_EQ(TruncateUtf8("abc", 3), "abc");
  EXPECT_EQ(TruncateUtf8("\xe2\x82\xac", 3), "\xe2\x82\xac");
  EXPECT_EQ(TruncateUtf8(kBinary, 5), kBinary);
}

TEST(TruncateUtf8Test, AsciiIsCutAtTheLimit) {
  EXPECT_EQ(TruncateUtf8("abcdef", 4), "abcd");
  EXPECT_EQ(TruncateUtf8("abcdef", 0), "");
}

TEST(TruncateUtf8Test, NeverSplitsAMultiByteCharacter) {
  const std::string two = "\xc3\xa9";           // é
  const std::string three = "\xe2\x82\xac";     // €
  const std::string four = "\xf0\x9f\x98\x80";  // U+1F600
  for (const std::string& ch : {two, three, four}) {
    const std::string s = "ab" + ch + "cd";
    SCOPED_TRACE(absl::CHexEscape(s));
    // Every limit that falls inside the character drops all of it.
    for (size_t max = 2; max < 2 + ch.size(); ++max) {
      EXPECT_EQ(TruncateUtf8(s, max), "ab") << "max " << max;
    }
    EXPECT_EQ(TruncateUtf8(s, 2 + ch.size()), "ab" + ch);
    EXPECT_EQ(TruncateUtf8(s, 3 + ch.size()), "ab" + ch + "c");
  }
}

TEST(TruncateUtf8Test, ConsecutiveMultiByteCharacters) {
  const std::string s = "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac";  // €€€
  EXPECT_EQ(TruncateUtf8(s, 8), "\xe2\x82\xac\xe2\x82\xac");
  EXPECT_EQ(TruncateUtf8(s, 6), "\xe2\x82\xac\xe2\x82\xac");
  EXPECT_EQ(TruncateUtf8(s, 5), "\xe2\x82\xac");
  EXPECT_EQ(TruncateUtf8(s, 2), "");
}

TEST(TruncateUtf8Test, InvalidUtf8IsCutAtTheLimit) {
  // Not UTF-8 at all: there is no character to keep whole, and walking back
  // through a run of continuation bytes must not eat the whole string.
  EXPECT_EQ(TruncateUtf8(std::string(10, '\x80'), 7), std::string(7, '\x80'));
  EXPECT_EQ(TruncateUtf8(std::string(10, '\xff'), 7), std::string(7, '\xff'));
  EXPECT_EQ(TruncateUtf8(kBinary, 3), std::string("a\0b", 3));
  // A stray continuation byte after ASCII: cut where asked.
  EXPECT_EQ(TruncateUtf8("ab\x80\x80", 3), "ab\x80");
  // A two-byte lead followed by too many continuation bytes: the character
  // itself is complete, so the cut stays at the limit.
  EXPECT_EQ(TruncateUtf8("a\xc3\xa9\x80\x80", 3), "a\xc3\xa9");
  EXPECT_EQ(TruncateUtf8("a\xc3\xa9\x80\x80", 4), "a\xc3\xa9\x80");
}

TEST(StripRetrydHeadersTest, KeepsEverythingElseInOrder) {
  const Headers in = {{"retryd-attempt", "1"},
                      {"x", std::nullopt},
                      {"retryd-", "bare prefix"},
                      {"y", kBinary},
                      {"retryd-error", std::nullopt},
                      {"xretryd-attempt", "1"},
                      {"", ""}};
  EXPECT_EQ(StripRetrydHeaders(in),
            (Headers{{"x", std::nullopt}, {"y", kBinary}, {"xretryd-attempt", "1"}, {"", ""}}));
  EXPECT_TRUE(StripRetrydHeaders({}).empty());
}

TEST(StripRetrydHeadersTest, KeepsTheRedriveLineage) {
  const Headers in = {{"retryd-redriven-from", "orders.dlq/0@7"},
                      {"retryd-attempt", "3"},
                      {"x", "1"},
                      {"retryd-redrive-count", "2"}};
  EXPECT_EQ(StripRetrydHeaders(in), (Headers{{"retryd-redriven-from", "orders.dlq/0@7"},
                                             {"x", "1"},
                                             {"retryd-redrive-count", "2"}}));
  // Written again for a retry, the lineage stays once, the retry state is new.
  RetryMetadata m;
  m.original_topic = "orders";
  const Headers out = WithRetryHeaders(in, m);
  EXPECT_EQ(std::count_if(out.begin(), out.end(),
                          [](const Header& h) { return h.key == "retryd-redrive-count"; }),
            1);
  EXPECT_EQ(std::count_if(out.begin(), out.end(),
                          [](const Header& h) { return h.key == "retryd-attempt"; }),
            1);
}

TEST(SetHeaderTest, ReplacesEveryCopyAndAppends) {
  Headers h = {{"a", "1"}, {"k", "old1"}, {"b", std::nullopt}, {"k", std::nullopt}};
  SetHeader(h, "k", "new");
  EXPECT_EQ(h, (Headers{{"a", "1"}, {"b", std::nullopt}, {"k", "new"}}));
  SetHeader(h, "a", std::string("\0\xff", 2));
  EXPECT_EQ(h, (Headers{{"b", std::nullopt}, {"k", "new"}, {"a", std::string("\0\xff", 2)}}));
}

TEST(SetHeaderTest, AddsToEmpty) {
  Headers h;
  SetHeader(h, "retryd-attempt", "2");
  EXPECT_EQ(h, (Headers{{"retryd-attempt", "2"}}));
}

}  // namespace
}  // namespace retryd::engine
