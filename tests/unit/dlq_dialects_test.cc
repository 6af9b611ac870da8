#include "server/engine/handoff/dlq_dialects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/engine/handoff/dead_letter_fit.h"
#include "server/engine/handoff/hand_offs.h"
#include "server/engine/handoff/retry_headers.h"

namespace retryd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// The dead-letter record's retry state the dialects describe.
RetryMetadata Meta() {
  RetryMetadata m;
  m.attempt = 4;
  m.original_topic = "orders";
  m.original_partition = 3;
  m.original_offset = 258;                      // 0x0102
  m.original_timestamp_ms = 1'700'000'000'000;  // 0x0000018BCFE56800
  m.original_timestamp_type = TimestampType::kCreateTime;
  m.error = "UNAVAILABLE: card declined";
  return m;
}

// Keys and values in order; a null value reads as "<null>".
std::vector<std::pair<std::string, std::string>> Pairs(const Headers& headers) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Header& h : headers) out.emplace_back(h.key, h.value.value_or("<null>"));
  return out;
}

// A record of orders/2@41, timestamped 900, as its primary thread holds it.
HeldRecord Held() {
  HeldRecord held;
  held.source = {"orders", 2};
  held.record.topic = "orders";
  held.record.partition = 2;
  held.record.offset = 41;
  held.record.timestamp_ms = 900;
  held.record.timestamp_type = TimestampType::kCreateTime;
  return held;
}

constexpr char kTrace[] =
    "retryd.ProcessingFailure: UNAVAILABLE: card declined\n\tat retryd(orders-3@258, 4 attempts)\n";

TEST(DlqDialectsTest, SpringAsDeadLetterPublishingRecovererWritesThem) {
  EXPECT_THAT(
      Pairs(DialectHeaders(DeadLetterDialect::kSpring, Meta(), "shop")),
      ElementsAre(
          Pair("kafka_dlt-exception-fqcn", "retryd.ProcessingFailure"),
          Pair("kafka_dlt-exception-cause-fqcn", "retryd.ProcessingFailure"),
          Pair("kafka_dlt-exception-message", "UNAVAILABLE: card declined"),
          Pair("kafka_dlt-exception-stacktrace", kTrace),
          Pair("kafka_dlt-original-topic", "orders"),
          Pair("kafka_dlt-original-partition", std::string("\x00\x00\x00\x03", 4)),
          Pair("kafka_dlt-original-offset", std::string("\x00\x00\x00\x00\x00\x00\x01\x02", 8)),
          Pair("kafka_dlt-original-timestamp", std::string("\x00\x00\x01\x8B\xCF\xE5\x68\x00", 8)),
          Pair("kafka_dlt-original-timestamp-type", "CreateTime"),
          Pair("kafka_dlt-original-consumer-group", "shop")));
}

TEST(DlqDialectsTest, SpringWithoutTimestampOrGroup) {
  RetryMetadata m = Meta();
  m.original_timestamp_ms = -1;
  m.original_timestamp_type = TimestampType::kNone;
  const Headers h = DialectHeaders(DeadLetterDialect::kSpring, m, "");
  ASSERT_EQ(h.size(), 9u);  // No consumer group.
  EXPECT_EQ(h[7].key, "kafka_dlt-original-timestamp");
  EXPECT_EQ(*h[7].value, std::string(8, '\xFF'));  // Java's -1L.
  EXPECT_EQ(*h[8].value, "NoTimestampType");
}

// Spring writes the consumer record's timestampType(); retryd keeps the one
// librdkafka gave it through the retry topic (retryd-original-timestamp-type).
TEST(DlqDialectsTest, SpringNamesTheOriginalTimestampType) {
  RetryMetadata m = Meta();
  m.original_timestamp_type = TimestampType::kLogAppendTime;
  Headers h = DialectHeaders(DeadLetterDialect::kSpring, m, "shop");
  EXPECT_EQ(*h[8].value, "LogAppendTime");
  absl::StatusOr<RetryMetadata> read = ParseDialectHeaders(h, DeadLetterDialect::kSpring, -1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->original_timestamp_type, TimestampType::kLogAppendTime);
  // One Kafka does not name reads as the default for its timestamp.
  h[8].value = "Sometime";
  read = ParseDialectHeaders(h, DeadLetterDialect::kSpring, -1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->original_timestamp_type, TimestampType::kCreateTime);
}

// A record read from a LogAppendTime topic, failed, retried and
// dead-lettered by a retry thread: the type rides through the retry topic.
TEST(DlqDialectsTest, LogAppendTimeSurvivesTheRetryTopic) {
  HeldRecord held = Held();
  held.record.timestamp_type = TimestampType::kLogAppendTime;
  held.last_error = "UNAVAILABLE";
  const HandOff retry = RetryHandOff(std::move(held), HandOffKind::kRetry, "orders.retry");
  absl::StatusOr<RetryMetadata> read = ParseRetryHeaders(retry.record.headers);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->original_timestamp_type, TimestampType::kLogAppendTime);

  // What a retry thread makes of it (Worker::HandleRetryRecord).
  HeldRecord again;
  again.source = {"orders.retry", 0};
  again.attempt = read->attempt;
  again.first_failure_ms = read->first_failure_ms;
  again.record.topic = read->original_topic;
  again.record.partition = read->original_partition;
  again.record.offset = read->original_offset;
  again.record.timestamp_ms = read->original_timestamp_ms;
  again.record.timestamp_type = read->original_timestamp_type;
  HandOff dead = DeadLetterHandOff(ThreadRole::kRetry, again, "still UNAVAILABLE", "orders.dlq",
                                   {5000, "thread-2"});
  const std::vector<DeadLetterDialect> spring = {DeadLetterDialect::kSpring};
  AddDialectHeaders(dead, spring, "shop");
  EXPECT_THAT(Pairs(dead.record.headers),
              ::testing::Contains(Pair("kafka_dlt-original-timestamp-type", "LogAppendTime")));
  EXPECT_THAT(Pairs(dead.record.headers),
              ::testing::Contains(Pair("retryd-original-timestamp-type", "LogAppendTime")));
}

// ExceptionHandlerUtils (kafka-streams 4.2) builds the dead letter with the
// failed record's timestamp; Spring leaves it to the producer, as retryd's
// own dead letters do. Streams on, its timestamp wins.
TEST(DlqDialectsTest, StreamsGivesTheDeadLetterTheOriginalTimestamp) {
  using D = DeadLetterDialect;
  const RetryMetadata m = Meta();
  EXPECT_EQ(DeadLetterTimestampMs({}, m), -1);
  EXPECT_EQ(DeadLetterTimestampMs(std::vector<D>{D::kSpring, D::kKip1191}, m), -1);
  EXPECT_EQ(DeadLetterTimestampMs(std::vector<D>{D::kStreams}, m), 1'700'000'000'000);
  EXPECT_EQ(DeadLetterTimestampMs(std::vector<D>{D::kSpring, D::kStreams}, m), 1'700'000'000'000);
  RetryMetadata none = m;
  none.original_timestamp_ms = -1;
  EXPECT_EQ(DeadLetterTimestampMs(std::vector<D>{D::kStreams}, none), -1);

  HeldRecord held = Held();
  held.record.value = std::string(2000, 'v');
  HandOff dead = DeadLetterHandOff(ThreadRole::kPrimary, held, "bad", "orders.dlq", {5000, "t"});
  EXPECT_EQ(dead.record.timestamp_ms, -1) << "retryd alone: the producer stamps it";
  AddDialectHeaders(dead, std::vector<D>{D::kSpring}, "shop");
  EXPECT_EQ(dead.record.timestamp_ms, -1);
  AddDialectHeaders(dead, std::vector<D>{D::kSpring, D::kStreams}, "shop");
  EXPECT_EQ(dead.record.timestamp_ms, 900);

  // Refused (by a dead-letter topic whose message.timestamp.before.max.ms
  // the old timestamp breaks, say): sent again stamped by the producer, whole
  // (not the smallest form, as a record refused as it was and no larger
  // than the limit would be).
  const HandOff fitted =
      FittedDeadLetter(std::move(dead), "Broker: Invalid timestamp", "orders.dlq", 50000,
                       {9000, "thread-7"}, std::vector<D>{D::kSpring, D::kStreams}, "shop");
  EXPECT_EQ(fitted.fit, 1);
  EXPECT_EQ(fitted.record.timestamp_ms, -1);
  EXPECT_EQ(fitted.record.value, held.record.value);
}

TEST(DlqDialectsTest, StreamsAsExceptionHandlerUtilsWritesThem) {
  EXPECT_THAT(
      Pairs(DialectHeaders(DeadLetterDialect::kStreams, Meta(), "shop")),
      ElementsAre(Pair("__streams.errors.exception", "retryd.ProcessingFailure"),
                  Pair("__streams.errors.message", "UNAVAILABLE: card declined"),
                  Pair("__streams.errors.stacktrace", kTrace),
                  Pair("__streams.errors.topic", "orders"), Pair("__streams.errors.partition", "3"),
                  Pair("__streams.errors.offset", "258")));
}

TEST(DlqDialectsTest, Kip1191AsTheShareGroupDeadLetterQueueWritesThem) {
  EXPECT_THAT(Pairs(DialectHeaders(DeadLetterDialect::kKip1191, Meta(), "shop")),
              ElementsAre(Pair("__dlq.errors.topic", "orders"), Pair("__dlq.errors.partition", "3"),
                          Pair("__dlq.errors.offset", "258"), Pair("__dlq.errors.group", "shop"),
                          Pair("__dlq.errors.delivery.count", "4"),
                          Pair("__dlq.errors.message", "UNAVAILABLE: card declined")));
  RetryMetadata many = Meta();
  many.attempt = 100000;  // A Java short at most.
  EXPECT_EQ(*DialectHeaders(DeadLetterDialect::kKip1191, many, "g")[4].value, "32767");
}

TEST(DlqDialectsTest, WithDialectHeadersAppendsInOrderAndReplacesNeverDuplicates) {
  const Headers own = {{"trace", "t1"}, {"kafka_dlt-original-topic", "older"}};
  const std::vector<DeadLetterDialect> both = {DeadLetterDialect::kStreams,
                                               DeadLetterDialect::kSpring};
  const Headers once = WithDialectHeaders(own, both, Meta(), "shop");
  ASSERT_EQ(once.size(), 1u + 6u + 10u);
  EXPECT_EQ(once[0].key, "trace");
  EXPECT_EQ(once[1].key, "__streams.errors.exception");
  EXPECT_EQ(once[7].key, "kafka_dlt-exception-fqcn");
  EXPECT_EQ(Pairs(WithDialectHeaders(once, both, Meta(), "shop")), Pairs(once));
  EXPECT_EQ(Pairs(WithDialectHeaders(own, {}, Meta(), "shop")), Pairs(own));
  const std::vector<DeadLetterDialect> twice = {DeadLetterDialect::kStreams,
                                                DeadLetterDialect::kStreams};
  EXPECT_EQ(WithDialectHeaders(own, twice, Meta(), "shop").size(), 2u + 6u);
}

TEST(DlqDialectsTest, EachDialectReadsBackWhatItWrote) {
  for (DeadLetterDialect d :
       {DeadLetterDialect::kSpring, DeadLetterDialect::kStreams, DeadLetterDialect::kKip1191}) {
    SCOPED_TRACE(std::string(DialectName(d)));
    const Headers h = DialectHeaders(d, Meta(), "shop");
    ASSERT_EQ(DetectDialect(h), d);
    absl::StatusOr<RetryMetadata> m = ParseDialectHeaders(h, d, 1'700'000'000'000);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->original_topic, "orders");
    EXPECT_EQ(m->original_partition, 3);
    EXPECT_EQ(m->original_offset, 258);
    EXPECT_EQ(m->error, "UNAVAILABLE: card declined");
    EXPECT_EQ(m->original_timestamp_ms, d == DeadLetterDialect::kKip1191 ? -1 : 1'700'000'000'000);
    EXPECT_EQ(m->attempt, d == DeadLetterDialect::kKip1191 ? 4 : 0);
    EXPECT_EQ(DialectFromName(DialectName(d)), d);
  }
}

TEST(DlqDialectsTest, MalformedHeadersAreNamed) {
  Headers h = DialectHeaders(DeadLetterDialect::kSpring, Meta(), "shop");
  h.push_back({"kafka_dlt-original-partition", std::string("\x00\x03", 2)});  // The last wins.
  EXPECT_EQ(ParseDialectHeaders(h, DeadLetterDialect::kSpring, 0).status().message(),
            "header kafka_dlt-original-partition is not a 4-byte big-endian integer: 2 bytes");
  h.pop_back();
  std::erase_if(h, [](const Header& x) { return x.key == "kafka_dlt-original-offset"; });
  EXPECT_EQ(ParseDialectHeaders(h, DeadLetterDialect::kSpring, 0).status().message(),
            "missing header kafka_dlt-original-offset");

  Headers streams = DialectHeaders(DeadLetterDialect::kStreams, Meta(), "");
  streams.push_back({"__streams.errors.partition", "x3"});
  EXPECT_EQ(ParseDialectHeaders(streams, DeadLetterDialect::kStreams, 0).status().message(),
            "header __streams.errors.partition is not a decimal integer: \"x3\"");
  Headers kip = DialectHeaders(DeadLetterDialect::kKip1191, Meta(), "");
  kip.push_back({"__dlq.errors.topic", std::nullopt});
  EXPECT_EQ(ParseDialectHeaders(kip, DeadLetterDialect::kKip1191, 0).status().message(),
            "header __dlq.errors.topic has a null value");
}

TEST(DlqDialectsTest, DetectedInOrderSpringStreamsKip1191) {
  EXPECT_EQ(DetectDialect({{"__dlq.errors.topic", "a"}, {"__streams.errors.topic", "b"}}),
            DeadLetterDialect::kStreams);
  EXPECT_EQ(DetectDialect({{"__streams.errors.topic", "b"}, {"kafka_dlt-original-topic", "c"}}),
            DeadLetterDialect::kSpring);
  // Detected by the original topic alone: an exception header is not enough.
  EXPECT_EQ(DetectDialect({{"kafka_dlt-exception-message", "boom"}}), std::nullopt);
}

// Every dead-letter path's record carries the dialects.
TEST(DlqDialectsTest, DeadLetterHandOffsCarryThem) {
  const std::vector<DeadLetterDialect> spring = {DeadLetterDialect::kSpring};
  HeldRecord held = Held();
  held.attempt = 3;
  HandOff dead = DeadLetterHandOff(ThreadRole::kPrimary, held, "permanent failure: bad",
                                   "orders.dlq", {5000, "thread-1"});
  AddDialectHeaders(dead, spring, "shop");
  absl::StatusOr<RetryMetadata> m =
      ParseDialectHeaders(dead.record.headers, DeadLetterDialect::kSpring, -1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->original_topic, "orders");
  EXPECT_EQ(m->original_partition, 2);
  EXPECT_EQ(m->original_offset, 41);
  EXPECT_EQ(m->original_timestamp_ms, 900);
  EXPECT_EQ(m->error, "permanent failure: bad");
  // retryd's own come first, and still parse.
  EXPECT_EQ(dead.record.headers.front().key, "retryd-attempt");
  EXPECT_TRUE(ParseRetryHeaders(dead.record.headers).ok());

  Record r;
  r.topic = "orders.retry";
  r.partition = 1;
  r.offset = 9;
  r.headers = {{"retryd-attempt", "zero"}};
  HandOff malformed = MalformedDeadLetterHandOff(r, "malformed", "orders.dlq", {1, "thread-0"});
  AddDialectHeaders(malformed, spring, "shop");
  m = ParseDialectHeaders(malformed.record.headers, DeadLetterDialect::kSpring, -1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->original_topic, "orders.retry");
  EXPECT_EQ(m->original_offset, 9);
  EXPECT_EQ(m->error, "malformed");

  HandOff refused;
  refused.kind = HandOffKind::kRetry;
  refused.origin = Meta();
  refused.origin.attempt = 5;
  refused.record.topic = "orders.retry";
  refused.record.value = std::string(100000, 'v');
  refused.record.headers = WithRetryHeaders({}, refused.origin);
  const HandOff fitted = FittedDeadLetter(std::move(refused), "too large", "orders.dlq", 50000,
                                          {9000, "thread-7"}, spring, "shop");
  m = ParseDialectHeaders(fitted.record.headers, DeadLetterDialect::kSpring, -1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->original_partition, 3);
  EXPECT_EQ(m->error, "UNAVAILABLE: card declined; retry record refused by Kafka (too large)");
  EXPECT_LE(RecordWireSize(fitted.record), 50000u);
}

}  // namespace
}  // namespace retryd::engine
