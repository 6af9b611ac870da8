#include "server/dlq/dead_letters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "server/common/error_reason.h"
#include "server/engine/handoff/retry_headers.h"

namespace retryd::dlq {
namespace {

using ::testing::ElementsAre;

engine::RetryMetadata Meta() {
  engine::RetryMetadata m;
  m.attempt = 3;
  m.due_ms = 1'700'000'001'000;
  m.first_failure_ms = 1'700'000'000'000;
  m.original_topic = "orders";
  m.original_partition = 2;
  m.original_offset = 41;
  m.original_timestamp_ms = 1'699'999'999'000;
  m.original_timestamp_type = TimestampType::kLogAppendTime;
  m.error = "UNAVAILABLE: card declined";
  m.first_error = "DEADLINE_EXCEEDED: slow";
  m.error_reason = "shop.example/FRAUD";
  return m;
}

Record RetrydDeadLetter(std::string key = "order-7", Headers own = {{"trace", "t1"}}) {
  Record r;
  r.topic = "orders.dlq";
  r.partition = 1;
  r.offset = 99;
  r.timestamp_ms = 1'700'000'002'000;
  r.key = std::move(key);
  r.value = "0123456789";
  r.headers = engine::WithDeadLetterHeaders(own, Meta(), {1'700'000'002'000, "pod-a/thread-3"});
  return r;
}

TEST(DecodeDeadLetterTest, EveryRetrydFieldAndTheOwnHeaders) {
  const DeadLetter d = DecodeDeadLetter(RetrydDeadLetter(), 4);
  EXPECT_EQ(d.partition, 1);
  EXPECT_EQ(d.offset, 99);
  EXPECT_EQ(d.key, "order-7");
  EXPECT_EQ(d.value, "0123");   // Cut to max_value_bytes...
  EXPECT_EQ(d.value_size, 10);  // ...its whole size kept.
  EXPECT_EQ(d.original_topic, "orders");
  EXPECT_EQ(d.original_partition, 2);
  EXPECT_EQ(d.original_offset, 41);
  EXPECT_EQ(d.attempts, 3);
  EXPECT_EQ(d.first_failure_unix_ms, 1'700'000'000'000);
  EXPECT_EQ(d.error, "UNAVAILABLE: card declined");
  EXPECT_EQ(d.first_error, "DEADLINE_EXCEEDED: slow");
  EXPECT_EQ(d.error_reason, "shop.example/FRAUD");
  EXPECT_EQ(d.dead_lettered_unix_ms, 1'700'000'002'000);
  EXPECT_EQ(d.dead_lettered_by, "pod-a/thread-3");
  EXPECT_EQ(d.redrive_count, 0);
  EXPECT_TRUE(d.decode_error.empty());
  ASSERT_EQ(d.headers.size(), 1u);
  EXPECT_EQ(d.headers[0].key, "trace");
}

TEST(DecodeDeadLetterTest, ARecordWithoutRetrydHeadersSaysWhy) {
  Record r;
  r.partition = 0;
  r.offset = 5;
  r.key = std::nullopt;
  r.value = std::nullopt;
  r.headers = {{"kafka_dlt-exception-message", "boom"}};
  const DeadLetter d = DecodeDeadLetter(r, 1024);
  EXPECT_TRUE(d.key_null);
  EXPECT_TRUE(d.value_null);
  EXPECT_EQ(d.decode_error, "missing header retryd-attempt");
  // Only filters on the key and partitions can select it.
  DeadLetterFilter by_partition;
  by_partition.partitions.push_back(0);
  EXPECT_TRUE(Matches(by_partition, d));
  DeadLetterFilter by_topic;
  by_topic.original_topic = "orders";
  EXPECT_FALSE(Matches(by_topic, d));
}

TEST(MatchesTest, EachFieldNarrows) {
  const DeadLetter d = DecodeDeadLetter(RetrydDeadLetter(), 1024);
  auto matches = [&](auto set) {
    DeadLetterFilter f;
    set(f);
    return Matches(f, d);
  };
  EXPECT_TRUE(matches([](DeadLetterFilter&) {}));
  EXPECT_TRUE(matches([](auto& f) { f.key_prefix = "order-"; }));
  EXPECT_FALSE(matches([](auto& f) { f.key_prefix = "vip-"; }));
  EXPECT_TRUE(matches([](auto& f) { f.error_contains = "declined"; }));
  EXPECT_TRUE(matches([](auto& f) { f.error_contains = "slow"; }));  // The first error.
  EXPECT_FALSE(matches([](auto& f) { f.error_contains = "stock"; }));
  EXPECT_TRUE(matches([](auto& f) { f.reason = "FRAUD"; }));
  EXPECT_TRUE(matches([](auto& f) { f.reason = "shop.example/FRAUD"; }));
  EXPECT_FALSE(matches([](auto& f) { f.reason = "other.example/FRAUD"; }));
  EXPECT_FALSE(matches([](auto& f) { f.reason = "FRAU"; }));
  EXPECT_TRUE(matches([](auto& f) { f.original_topic = "orders"; }));
  EXPECT_FALSE(matches([](auto& f) { f.original_topic = "payments"; }));
  EXPECT_TRUE(matches([](auto& f) { f.original_partition = 2; }));
  EXPECT_FALSE(matches([](auto& f) { f.original_partition = 0; }));
  EXPECT_TRUE(matches([](auto& f) { f.first_failure_from_unix_ms = 1'700'000'000'000; }));
  EXPECT_FALSE(matches([](auto& f) { f.first_failure_from_unix_ms = 1'700'000'000'001; }));
  EXPECT_FALSE(matches([](auto& f) { f.first_failure_to_unix_ms = 1'700'000'000'000; }));
  EXPECT_TRUE(matches([](auto& f) { f.first_failure_to_unix_ms = 1'700'000'000'001; }));
  EXPECT_TRUE(matches([](auto& f) {
    f.min_attempts = 3;
    f.max_attempts = 3;
  }));
  EXPECT_FALSE(matches([](auto& f) { f.min_attempts = 4; }));
  EXPECT_FALSE(matches([](auto& f) { f.max_attempts = 2; }));
  EXPECT_TRUE(matches([](auto& f) { f.partitions.push_back(1); }));
  EXPECT_FALSE(matches([](auto& f) { f.partitions.push_back(0); }));
}

TEST(ValidateFilterTest, RefusesWhatCannotSelect) {
  auto reason = [](auto set) {
    DeadLetterFilter f;
    set(f);
    return ReasonOf(ValidateFilter(f));
  };
  EXPECT_EQ(reason([](DeadLetterFilter&) {}), "");
  EXPECT_EQ(reason([](auto& f) { f.original_partition = -1; }), "INVALID_FIELD");
  EXPECT_EQ(reason([](auto& f) {
              f.first_failure_from_unix_ms = 10;
              f.first_failure_to_unix_ms = 10;
            }),
            "INVALID_FIELD");
  EXPECT_EQ(reason([](auto& f) {
              f.min_attempts = 3;
              f.max_attempts = 2;
            }),
            "INVALID_FIELD");
  EXPECT_EQ(reason([](auto& f) { f.partitions.push_back(-2); }), "INVALID_FIELD");
  DeadLetterFilter f;
  f.partitions.push_back(4);
  EXPECT_FALSE(FilterPartitions(f, 4).ok());
  f.partitions.clear();
  f.partitions.push_back(3);
  f.partitions.push_back(1);
  f.partitions.push_back(3);
  EXPECT_THAT(*FilterPartitions(f, 4), ElementsAre(1, 3));
  EXPECT_THAT(*FilterPartitions(DeadLetterFilter(), 3), ElementsAre(0, 1, 2));
}

TEST(PageTokenTest, RoundTripsAndRefusesForgeries) {
  ListCursor cursor;
  cursor.partitions[0] = {5, 9};
  cursor.partitions[3] = {7, 7};  // Read to its end: left out.
  const std::string token = EncodePageToken(cursor);
  ASSERT_FALSE(token.empty());
  absl::StatusOr<ListCursor> back = DecodePageToken(token);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->partitions.size(), 1u);
  EXPECT_EQ(back->partitions[0].next, 5);
  EXPECT_EQ(back->partitions[0].end, 9);
  cursor.partitions[0].next = 9;
  EXPECT_EQ(EncodePageToken(cursor), "");  // Done: no more pages.
  for (const char* bad : {"nope", "", "YzE7MDo5OjU", "eDE7MDoxOjI"}) {
    EXPECT_EQ(ReasonOf(DecodePageToken(bad).status()), "INVALID_FIELD") << bad;
  }
}

std::optional<std::string> HeaderOf(const OutgoingRecord& r, std::string_view key) {
  std::optional<std::string> out;
  for (const Header& h : r.headers) {
    if (h.key == key) out = h.value;
  }
  return out;
}

// A dead letter as Spring Kafka's DeadLetterPublishingRecoverer writes it:
// the original headers, then the exception's, then the origin's (binary).
Record SpringDeadLetter() {
  Record r;
  r.topic = "orders.DLT";
  r.partition = 0;
  r.offset = 12;
  r.timestamp_ms = 1'700'000'003'000;
  r.key = "order-9";
  r.value = "payload";
  r.headers = {{"trace", "t9"},
               {"kafka_dlt-exception-fqcn", "org.springframework.kafka.ListenerExecutionFailed"},
               {"kafka_dlt-exception-message", "Listener failed; card declined"},
               {"kafka_dlt-exception-stacktrace", "...\n\tat com.example.Listener"},
               {"kafka_dlt-original-topic", "orders"},
               {"kafka_dlt-original-partition", std::string("\x00\x00\x00\x03", 4)},
               {"kafka_dlt-original-offset", std::string("\x00\x00\x00\x00\x00\x00\x01\x02", 8)},
               {"kafka_dlt-original-timestamp", std::string("\x00\x00\x01\x8B\xCF\xE5\x68\x00", 8)},
               {"kafka_dlt-original-timestamp-type", "CreateTime"},
               {"kafka_dlt-original-consumer-group", "shop"}};
  return r;
}

TEST(DecodeDeadLetterTest, RetrydsOwnSaySo) {
  EXPECT_EQ(DecodeDeadLetter(RetrydDeadLetter(), 0).dialect, "retryd");
}

TEST(DecodeDeadLetterTest, SpringsHeadersGiveTheOrigin) {
  const DeadLetter d = DecodeDeadLetter(SpringDeadLetter(), 1024);
  EXPECT_TRUE(d.decode_error.empty()) << d.decode_error;
  EXPECT_EQ(d.dialect, "spring");
  EXPECT_EQ(d.original_topic, "orders");
  EXPECT_EQ(d.original_partition, 3);
  EXPECT_EQ(d.original_offset, 258);
  EXPECT_EQ(d.original_timestamp_unix_ms, 1'700'000'000'000);
  EXPECT_EQ(d.error, "Listener failed; card declined");
  EXPECT_EQ(d.attempts, 0);  // Spring does not say.
  // Its headers are not repeated as the record's own.
  ASSERT_EQ(d.headers.size(), 1u);
  EXPECT_EQ(d.headers[0].key, "trace");
  DeadLetterFilter by_origin;
  by_origin.original_topic = "orders";
  by_origin.error_contains = "declined";
  EXPECT_TRUE(Matches(by_origin, d));
}

TEST(DecodeDeadLetterTest, StreamsAndKip1191HeadersGiveTheOrigin) {
  Record streams = SpringDeadLetter();
  streams.headers = {{"__streams.errors.exception", "java.lang.IllegalStateException"},
                     {"__streams.errors.message", std::nullopt},
                     {"__streams.errors.stacktrace", "java.lang.IllegalStateException\n"},
                     {"__streams.errors.topic", "payments"},
                     {"__streams.errors.partition", "7"},
                     {"__streams.errors.offset", "1234"}};
  DeadLetter d = DecodeDeadLetter(streams, 1024);
  EXPECT_TRUE(d.decode_error.empty()) << d.decode_error;
  EXPECT_EQ(d.dialect, "streams");
  EXPECT_EQ(d.original_topic, "payments");
  EXPECT_EQ(d.original_partition, 7);
  EXPECT_EQ(d.original_offset, 1234);
  // Streams gives the dead letter the failed record's timestamp.
  EXPECT_EQ(d.original_timestamp_unix_ms, 1'700'000'003'000);
  EXPECT_EQ(d.error, "java.lang.IllegalStateException");  // No message: the class.
  EXPECT_EQ(d.headers.size(), 0u);

  Record kip = SpringDeadLetter();
  kip.headers = {{"h", "v"},
                 {"__dlq.errors.topic", "jobs"},
                 {"__dlq.errors.partition", "0"},
                 {"__dlq.errors.offset", "5"},
                 {"__dlq.errors.group", "workers"},
                 {"__dlq.errors.delivery.count", "5"},
                 {"__dlq.errors.message", "Offset delivery count exceeded the threshold."}};
  d = DecodeDeadLetter(kip, 1024);
  EXPECT_TRUE(d.decode_error.empty()) << d.decode_error;
  EXPECT_EQ(d.dialect, "kip1191");
  EXPECT_EQ(d.original_topic, "jobs");
  EXPECT_EQ(d.original_offset, 5);
  EXPECT_EQ(d.original_timestamp_unix_ms, -1);
  EXPECT_EQ(d.attempts, 5);
  EXPECT_EQ(d.error, "Offset delivery count exceeded the threshold.");
  ASSERT_EQ(d.headers.size(), 1u);
  EXPECT_EQ(d.headers[0].key, "h");
}

TEST(DecodeDeadLetterTest, MalformedDialectHeadersAreNamed) {
  Record r = SpringDeadLetter();
  r.headers[5].value = std::string("\x03", 1);  // kafka_dlt-original-partition
  const DeadLetter d = DecodeDeadLetter(r, 1024);
  EXPECT_EQ(d.dialect, "spring");
  EXPECT_EQ(d.decode_error,
            "header kafka_dlt-original-partition is not a 4-byte big-endian integer: 1 bytes");
  DeadLetterFilter by_origin;
  by_origin.original_topic = "orders";
  EXPECT_FALSE(Matches(by_origin, d));
}

TEST(DecodeDeadLetterTest, RetrydsOwnComeFirst) {
  // A retryd dead letter that also carries Spring's headers reads as retryd's.
  Record r = RetrydDeadLetter();
  for (const Header& h : SpringDeadLetter().headers) r.headers.push_back(h);
  const DeadLetter d = DecodeDeadLetter(r, 1024);
  EXPECT_EQ(d.dialect, "retryd");
  EXPECT_EQ(d.original_partition, 2);
}

TEST(RedriveRecordTest, AForeignDeadLetterStartsOverAtItsOrigin) {
  Record dead = SpringDeadLetter();
  dead.headers.push_back({"retryd-redrive-count", "1"});  // Redriven once, dead-lettered again.
  const DeadLetter d = DecodeDeadLetter(dead, 1024);
  ASSERT_EQ(d.dialect, "spring");
  EXPECT_EQ(d.redrive_count, 1);
  for (bool reset : {false, true}) {
    const OutgoingRecord out = RedriveRecord(dead, d, {"", reset, "orders.retry"}, "orders.DLT", 5);
    EXPECT_EQ(out.topic, "orders");
    EXPECT_EQ(out.partition, 3);
    EXPECT_EQ(out.key, dead.key);
    EXPECT_EQ(out.value, dead.value);
    EXPECT_THAT(out.headers, ElementsAre(Header{"trace", "t9"},
                                         Header{"retryd-redriven-from", "orders.DLT/0@12"},
                                         Header{"retryd-redrive-count", "2"}));
  }
  const OutgoingRecord named = RedriveRecord(dead, d, {"audit", false, "r"}, "orders.DLT", 5);
  EXPECT_EQ(named.topic, "audit");
  EXPECT_EQ(named.partition, -1);
  EXPECT_EQ(named.headers.size(), 3u);
  EXPECT_EQ(HeaderOf(named, "kafka_dlt-original-topic"), std::nullopt);
}

TEST(RedriveRecordTest, ToTheOriginAsNew) {
  const Record dead = RetrydDeadLetter();
  const DeadLetter d = DecodeDeadLetter(dead, 1024);
  const OutgoingRecord out =
      RedriveRecord(dead, d, {"", /*reset_attempts=*/true, "orders.retry"}, "orders.dlq", 5);
  EXPECT_EQ(out.topic, "orders");
  EXPECT_EQ(out.partition, 2);
  EXPECT_EQ(out.key, dead.key);
  EXPECT_EQ(out.value, dead.value);
  EXPECT_EQ(HeaderOf(out, "trace"), "t1");
  EXPECT_EQ(HeaderOf(out, "retryd-attempt"), std::nullopt);
  EXPECT_EQ(HeaderOf(out, "retryd-redriven-from"), "orders.dlq/1@99");
  EXPECT_EQ(HeaderOf(out, "retryd-redrive-count"), "1");
}

TEST(RedriveRecordTest, ToTheOriginWithTheAttemptsItUsedGoesThroughTheRetryTopic) {
  Record dead = RetrydDeadLetter();
  dead.headers.push_back({"retryd-redrive-count", "1"});
  const DeadLetter d = DecodeDeadLetter(dead, 1024);
  EXPECT_EQ(d.redrive_count, 1);
  const OutgoingRecord out =
      RedriveRecord(dead, d, {"", /*reset_attempts=*/false, "orders.retry"}, "orders.dlq", 777);
  EXPECT_EQ(out.topic, "orders.retry");
  EXPECT_EQ(out.partition, -1);
  absl::StatusOr<engine::RetryMetadata> m = engine::ParseRetryHeaders(out.headers);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->attempt, 4);  // One more than the three it made.
  EXPECT_EQ(m->due_ms, 777);
  EXPECT_EQ(m->original_topic, "orders");
  EXPECT_EQ(m->original_offset, 41);
  EXPECT_EQ(m->first_error, "DEADLINE_EXCEEDED: slow");
  // Not in DeadLetter, read again from the record.
  EXPECT_EQ(m->original_timestamp_type, TimestampType::kLogAppendTime);
  EXPECT_EQ(HeaderOf(out, "retryd-redrive-count"), "2");
  // The lineage appears once.
  EXPECT_EQ(std::count_if(out.headers.begin(), out.headers.end(),
                          [](const Header& h) { return h.key == "retryd-redrive-count"; }),
            1);
}

TEST(RedriveRecordTest, ToAnotherTopicKeepsOrStripsTheRetryState) {
  const Record dead = RetrydDeadLetter();
  const DeadLetter d = DecodeDeadLetter(dead, 1024);
  const OutgoingRecord kept = RedriveRecord(dead, d, {"audit", false, "r"}, "orders.dlq", 1);
  EXPECT_EQ(kept.topic, "audit");
  EXPECT_EQ(kept.partition, -1);
  EXPECT_EQ(HeaderOf(kept, "retryd-error-reason"), "shop.example/FRAUD");
  const OutgoingRecord stripped = RedriveRecord(dead, d, {"audit", true, "r"}, "orders.dlq", 1);
  EXPECT_EQ(HeaderOf(stripped, "retryd-error-reason"), std::nullopt);
  EXPECT_EQ(HeaderOf(stripped, "trace"), "t1");
  EXPECT_EQ(HeaderOf(stripped, "retryd-redrive-count"), "1");
}

TEST(RedriveRecordTest, RedrivenFromReadsBackWhereItCameFrom) {
  const Record dead = RetrydDeadLetter();
  const DeadLetter d = DecodeDeadLetter(dead, 1024);
  const OutgoingRecord out = RedriveRecord(dead, d, {"audit", false, "r"}, "orders.dlq", 1);
  Record landed;
  landed.topic = out.topic;
  landed.headers = out.headers;
  EXPECT_EQ(RedrivenFrom(landed, "orders.dlq"), std::make_pair(int32_t{1}, int64_t{99}));
  EXPECT_EQ(RedrivenFrom(landed, "orders"), std::nullopt);    // Another topic's.
  EXPECT_EQ(RedrivenFrom(dead, "orders.dlq"), std::nullopt);  // Never redriven.
  landed.headers = {{"retryd-redriven-from", "orders.dlq/x@7"}};
  EXPECT_EQ(RedrivenFrom(landed, "orders.dlq"), std::nullopt);
}

}  // namespace
}  // namespace retryd::dlq
