// The engine end to end against the mock cluster over loopback: every record
// reaches exactly one outcome, retry records carry their headers, in-order
// mode keeps order, broker faults lose nothing.
#include "server/engine/api/engine.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "retryd/v1/config.pb.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/stats/thread_stats.h"
#include "server/processors/simulate.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::AllAssigned;
using ::retryd::testing::Broker;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::ExpectEachKeyWhereItBelongs;
using ::retryd::testing::HeaderValue;
using ::retryd::testing::Keys;
using ::retryd::testing::MixedKeys;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::TestProcessor;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WaitForOutcomes;
using ::testing::HasSubstr;

TEST(EngineTest, EveryRecordReachesExactlyOneOutcome) {
  const testing::TestTopics topics = CreateTopics("mixed");
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 2;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  // With the groups settled first, a clean run has no rebalance and so no
  // duplicate: every record must reach exactly one outcome, once.
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 3); }, absl::Seconds(60)));

  const std::vector<std::string> keys = MixedKeys(5000);
  ProduceKeys(topics.input, keys);
  const std::vector<Record> input = ReadAll(topics.input);
  ASSERT_EQ(input.size(), keys.size());
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();

  std::multiset<std::string> want_output, want_dlq;
  for (const std::string& k : keys)
    (absl::StartsWith(k, "perm-") ? want_dlq : want_output).insert(k);
  const std::vector<Record> output = ReadAll(topics.output);
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  EXPECT_EQ(Keys(output), want_output);
  EXPECT_EQ(Keys(dlq), want_dlq);

  std::map<std::string, const Record*> by_key;
  for (const Record& r : input) by_key[*r.key] = &r;
  for (const Record& r : dlq) {
    const Record& original = *by_key.at(*r.key);
    EXPECT_EQ(r.value, original.value);
    EXPECT_EQ(engine::StripRetrydHeaders(r.headers), original.headers) << *r.key;
    absl::StatusOr<engine::RetryMetadata> meta = engine::ParseRetryHeaders(r.headers);
    ASSERT_TRUE(meta.ok()) << meta.status();
    EXPECT_EQ(meta->original_topic, topics.input);
    EXPECT_EQ(meta->original_partition, original.partition);
    EXPECT_EQ(meta->original_offset, original.offset);
    EXPECT_EQ(meta->original_timestamp_ms, original.timestamp_ms);
    EXPECT_EQ(meta->attempt, 1);
    EXPECT_THAT(meta->error, HasSubstr("permanent"));
  }
  for (const Record& r : output) {
    const Record& original = *by_key.at(*r.key);
    EXPECT_EQ(r.value, original.value);
    EXPECT_EQ(engine::StripRetrydHeaders(r.headers), original.headers);
    EXPECT_EQ(HeaderValue(r, "retryd-original-offset"), absl::StrCat(original.offset));
    EXPECT_EQ(HeaderValue(r, "retryd-attempt"), absl::StartsWith(*r.key, "flaky-") ? "3" : "1");
  }
  // The retry topic saw only flaky records: attempts 2 and 3 of each.
  std::multiset<std::string> want_retry;
  for (const std::string& k : keys) {
    if (absl::StartsWith(k, "flaky-")) want_retry.insert({k, k});
  }
  EXPECT_EQ(Keys(ReadAll(topics.retry)), want_retry);

  const engine::EngineTotals totals = engine->Totals();
  EXPECT_EQ(totals.consumed, static_cast<int64_t>(keys.size()));
  EXPECT_EQ(totals.dead_lettered, static_cast<int64_t>(want_dlq.size()));
  EXPECT_EQ(totals.sent_to_retry, static_cast<int64_t>(want_retry.size()));
}

TEST(EngineTest, BackPressureLosesAndRepeatsNothing) {
  const testing::TestTopics topics = CreateTopics("pressure");
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  // Far below the records in flight at full speed: threads keep hitting the
  // limit, waiting for acks and pausing their partitions.
  options.max_in_flight = 8;
  options.retry.max_threads = 2;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 3); }, absl::Seconds(60)));
  const std::vector<std::string> keys = MixedKeys(3000);
  ProduceKeys(topics.input, keys);
  auto backpressure_waits = [&] {
    int64_t n = 0;
    for (const auto& s : engine->Threads()) n += s->counters.Read().backpressure_waits;
    return n;
  };
  // Back-pressure engaged: a thread hit the limit and waited.
  ASSERT_TRUE(WaitFor([&] { return backpressure_waits() > 0; }, absl::Seconds(60)));
  // A retry-group rebalance while threads pause and resume under pressure.
  absl::StatusOr<std::vector<int>> started =
      engine->StartRetryThreads(1, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_TRUE(engine->StopRetryThreadsById(*started, /*graceful=*/true).ok());
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  std::cout << "back-pressure: " << backpressure_waits() << " waits at the limit\n";
  engine->Stop();

  std::multiset<std::string> want_output, want_dlq;
  for (const std::string& k : keys)
    (absl::StartsWith(k, "perm-") ? want_dlq : want_output).insert(k);
  EXPECT_EQ(Keys(ReadAll(topics.output)), want_output);
  EXPECT_EQ(Keys(ReadAll(topics.dlq)), want_dlq);
}

// Fails the first attempt of every record carrying a "fail-once" header,
// whatever its key and value (null ones included); succeeds otherwise.
class FailOnceByHeader : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override {
    for (const Header& h : record.headers) {
      if (h.key == "fail-once" && attempt == 1) return engine::Outcome::Retriable("fail-once");
    }
    return engine::Outcome::Ok();
  }
};

// Kafka tells a null key, value or header value from an empty one; so does
// retryd, on the primary path and through the retry topic: every record
// reaches the output with the fields it was written with.
TEST(EngineTest, NullAndEmptyFieldsSurviveBothPaths) {
  const testing::TestTopics topics = CreateTopics("nulls");
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<FailOnceByHeader>());
  ASSERT_NE(engine, nullptr);

  struct Case {
    std::optional<std::string> key, value;
    bool fail_once;
  };
  const std::vector<Case> cases = {
      {std::nullopt, std::nullopt, false},
      {std::nullopt, std::nullopt, true},
      {std::nullopt, "v", false},
      {std::nullopt, "v", true},
      {"", std::nullopt, false},
      {"", std::nullopt, true},
      {"", "", false},
      {"", "", true},
  };
  std::vector<OutgoingRecord> records;
  for (size_t i = 0; i < cases.size(); ++i) {
    OutgoingRecord r;
    r.topic = topics.input;
    r.partition = static_cast<int32_t>(i % 2);
    r.key = cases[i].key;
    r.value = cases[i].value;
    // "case" tells the records apart, as neither key nor value can.
    r.headers = {{"case", absl::StrCat(i)}, {"h-null", std::nullopt}, {"h-empty", ""}};
    if (cases[i].fail_once) r.headers.push_back({"fail-once", std::nullopt});
    records.push_back(std::move(r));
  }
  testing::ProduceRecords(records);

  std::map<std::string, Record> output;  // By "case".
  ASSERT_TRUE(WaitFor(
      [&] {
        for (Record& r : ReadAll(topics.output)) output[HeaderValue(r, "case")] = std::move(r);
        return output.size() == cases.size();
      },
      absl::Seconds(60)))
      << output.size() << " of " << cases.size() << " records reached the output";
  engine->Stop();
  EXPECT_TRUE(ReadAll(topics.dlq).empty());

  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("case ", i));
    const Record& r = output.at(absl::StrCat(i));
    EXPECT_EQ(r.key, cases[i].key);
    EXPECT_EQ(r.value, cases[i].value);
    EXPECT_EQ(HeaderValue(r, std::string(engine::kAttemptHeader)), cases[i].fail_once ? "2" : "1");
    std::map<std::string, std::optional<std::string>> user_headers;
    for (const Header& h : r.headers) {
      if (!absl::StartsWith(h.key, "retryd-")) user_headers[h.key] = h.value;
    }
    EXPECT_EQ(user_headers.at("h-null"), std::nullopt);
    EXPECT_EQ(user_headers.at("h-empty"), std::optional<std::string>(""));
    if (cases[i].fail_once) {
      EXPECT_EQ(user_headers.at("fail-once"), std::nullopt);
    }
  }
}

// A worker reads each record into the buffers of records it is done with
// (RecordBuffers). A round of large records with many headers goes through
// first; the records after it, smaller, with fewer headers or null fields,
// are read into its buffers and must come out exactly as they were written:
// nothing of a record before shows through.
TEST(EngineTest, RecordsReadIntoReusedBuffersCarryNothingOfTheRecordsBefore) {
  const testing::TestTopics topics = CreateTopics("reuse", /*partitions=*/1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<FailOnceByHeader>());
  ASSERT_NE(engine, nullptr);

  auto user_headers = [](const Headers& headers) {
    Headers user;
    for (const Header& h : headers) {
      if (!absl::StartsWith(h.key, "retryd-")) user.push_back(h);
    }
    return user;
  };
  std::map<std::string, OutgoingRecord> written;  // By "case".
  auto write_round = [&](int round, int count, auto shape) {
    std::vector<OutgoingRecord> records;
    for (int i = 0; i < count; ++i) {
      OutgoingRecord r;
      r.topic = topics.input;
      r.partition = 0;
      r.headers = {{"case", absl::StrCat(round, "-", i)}};
      shape(i, r);
      written[r.headers[0].value.value()] = r;
      records.push_back(std::move(r));
    }
    testing::ProduceRecords(records);
  };
  std::map<std::string, Record> output;  // By "case".
  auto await_output = [&]() {
    return WaitFor(
        [&] {
          for (Record& r : ReadAll(topics.output)) output[HeaderValue(r, "case")] = std::move(r);
          return output.size() == written.size();
        },
        absl::Seconds(60));
  };

  write_round(0, 300, [](int i, OutgoingRecord& r) {
    r.key = std::string(200, static_cast<char>('a' + i % 26));
    r.value = std::string(2000, static_cast<char>('A' + i % 26));
    for (int h = 0; h < 6; ++h) {
      r.headers.push_back({absl::StrCat("wide-header-name-", h), std::string(100, 'h')});
    }
  });
  // Round 0's hand-offs are acknowledged: their buffers are there for round 1.
  ASSERT_TRUE(await_output()) << output.size() << " of " << written.size();
  // In rounds, each read once the one before is out: whatever a round
  // leaves behind, the next one is read into.
  for (int round = 1; round <= 5; ++round) {
    write_round(round, 60, [](int i, OutgoingRecord& r) {
      switch (i % 6) {
        case 0:
          r.key = "k";
          r.value = "short";
          break;
        case 1:
          r.key = std::nullopt;
          r.value = std::string(40, 'x');
          break;
        case 2:
          r.key = std::string(30, 'y');
          r.value = std::nullopt;
          break;
        case 3:
          r.key = "";
          r.value = "";
          r.headers.push_back({"h-null", std::nullopt});
          break;
        case 4:
          r.key = std::string(20, 'z');
          r.value = std::string(3000, 'w');
          r.headers.push_back({"fail-once", std::nullopt});
          break;
        default:
          r.key = absl::StrCat("key-", i);
          r.value = absl::StrCat("value-", i);
          break;
      }
    });
    ASSERT_TRUE(await_output()) << output.size() << " of " << written.size();
  }
  engine->Stop();
  EXPECT_TRUE(ReadAll(topics.dlq).empty());

  for (const auto& [name, w] : written) {
    SCOPED_TRACE(name);
    const Record& r = output.at(name);
    EXPECT_EQ(r.key, w.key);
    EXPECT_EQ(r.value, w.value);
    EXPECT_EQ(user_headers(r.headers), w.headers);
  }
}

TEST(EngineTest, ExhaustedAndMalformedRetryRecordsAreDeadLettered) {
  const testing::TestTopics topics = CreateTopics("doomed");
  ProduceKeys(topics.input, {"doomed-1", "doomed-2", "ok-1"});
  // A record on the retry topic that retryd did not write.
  ProduceKeys(topics.retry, {"stray-1"});

  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.max_attempts = 3;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, {"doomed-1", "doomed-2", "ok-1", "stray-1"}));
  engine->Stop();

  std::map<std::string, Record> dlq;
  for (Record& r : ReadAll(topics.dlq)) dlq[*r.key] = std::move(r);
  ASSERT_EQ(dlq.size(), 3u);
  for (const char* key : {"doomed-1", "doomed-2"}) {
    absl::StatusOr<engine::RetryMetadata> meta = engine::ParseRetryHeaders(dlq.at(key).headers);
    ASSERT_TRUE(meta.ok()) << meta.status();
    EXPECT_EQ(meta->attempt, 3);
    EXPECT_THAT(meta->error, HasSubstr("gave up after attempt 3 of 3"));
    EXPECT_GT(meta->first_failure_ms, 0);
  }
  const Record& stray = dlq.at("stray-1");
  EXPECT_EQ(stray.value, "v-stray-1");
  EXPECT_THAT(HeaderValue(stray, "retryd-error"),
              HasSubstr("malformed retry record " + topics.retry));
  EXPECT_THAT(HeaderValue(stray, "retryd-error"), HasSubstr("missing header retryd-attempt"));
  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>{"ok-1"});
}

// Fails "lasting-" records at every attempt, each time with another error
// and error reason, and "reasoned-" records for good, with a reason.
class ReasonedProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override {
    if (absl::StartsWith(record.key.value_or(""), "lasting-")) {
      engine::Outcome o = engine::Outcome::Retriable(absl::StrCat("failure of attempt ", attempt));
      o.error_reason = absl::StrCat("test.example.com/ATTEMPT_", attempt);
      return o;
    }
    if (absl::StartsWith(record.key.value_or(""), "reasoned-")) {
      engine::Outcome o = engine::Outcome::Permanent("quota used up");
      o.error_reason = "billing.example.com/QUOTA_EXCEEDED";
      return o;
    }
    return engine::Outcome::Ok();
  }
};

// What a dead letter tells of the record: its first error (carried through
// the retry topic to the retry thread that gave up), its last error and
// reason, when and by which thread it was dead-lettered.
TEST(EngineTest, DeadLettersSayTheFirstErrorTheLastReasonWhenAndByWhom) {
  const testing::TestTopics topics = CreateTopics("told");
  ProduceKeys(topics.input, {"lasting-1", "reasoned-1", "ok-1"});
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.max_attempts = 3;
  options.instance_name = "engine-test";
  const int64_t started_ms = absl::ToUnixMillis(absl::Now());
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<ReasonedProcessor>());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, {"lasting-1", "reasoned-1", "ok-1"}));
  const int64_t done_ms = absl::ToUnixMillis(absl::Now());
  std::set<std::string> primaries;
  std::set<std::string> retriers;
  for (const std::shared_ptr<const engine::ThreadStats>& t : engine->Threads()) {
    (t->role() == engine::ThreadRole::kRetry ? retriers : primaries)
        .insert(absl::StrCat("engine-test/thread-", t->id()));
  }
  engine->Stop();

  std::map<std::string, Record> dlq;
  for (Record& r : ReadAll(topics.dlq)) dlq[*r.key] = std::move(r);
  ASSERT_EQ(dlq.size(), 2u);

  const Record& lasting = dlq.at("lasting-1");
  absl::StatusOr<engine::RetryMetadata> meta = engine::ParseRetryHeaders(lasting.headers);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->first_error, "failure of attempt 1");
  EXPECT_EQ(meta->error, "failure of attempt 3 (gave up after attempt 3 of 3)");
  EXPECT_EQ(meta->error_reason, "test.example.com/ATTEMPT_3");
  int64_t dead_lettered_ms = std::stoll(HeaderValue(lasting, "retryd-dead-lettered-ms"));
  EXPECT_GE(dead_lettered_ms, meta->first_failure_ms);
  EXPECT_GE(dead_lettered_ms, started_ms);
  EXPECT_LE(dead_lettered_ms, done_ms);
  EXPECT_THAT(retriers, ::testing::Contains(HeaderValue(lasting, "retryd-dead-lettered-by")));

  const Record& reasoned = dlq.at("reasoned-1");
  meta = engine::ParseRetryHeaders(reasoned.headers);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->error, "permanent failure: quota used up");
  EXPECT_EQ(meta->first_error, meta->error);  // Its first failure was its last.
  EXPECT_EQ(HeaderValue(reasoned, "retryd-error-reason"), "billing.example.com/QUOTA_EXCEEDED");
  dead_lettered_ms = std::stoll(HeaderValue(reasoned, "retryd-dead-lettered-ms"));
  EXPECT_GE(dead_lettered_ms, started_ms);
  EXPECT_LE(dead_lettered_ms, done_ms);
  EXPECT_THAT(primaries, ::testing::Contains(HeaderValue(reasoned, "retryd-dead-lettered-by")));
}

TEST(EngineTest, InOrderKeepsPartitionOrderWithFlakyRecords) {
  const testing::TestTopics topics = CreateTopics("inorder");
  std::vector<std::string> keys;
  for (int i = 0; i < 900; ++i) {
    keys.push_back(absl::StrCat(i % 50 == 0 ? "perm-" : i % 9 == 0 ? "flaky-" : "ok-", i));
  }
  ProduceKeys(topics.input, keys);

  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();

  const std::vector<Record> output = ReadAll(topics.output);
  std::multiset<std::string> want_output, want_dlq;
  for (const std::string& k : keys)
    (absl::StartsWith(k, "perm-") ? want_dlq : want_output).insert(k);
  EXPECT_EQ(Keys(output), want_output);
  EXPECT_EQ(Keys(ReadAll(topics.dlq)), want_dlq);
  EXPECT_TRUE(ReadAll(topics.retry).empty()) << "in order, nothing goes to the retry topic";

  // Completion order per input partition: output records produced from one
  // input partition appear in input offset order in each output partition.
  std::map<std::pair<int32_t, std::string>, int64_t> last;  // (output p, input p) -> offset
  int flaky_seen = 0;
  for (const Record& r : output) {
    const auto slot = std::make_pair(r.partition, HeaderValue(r, "retryd-original-partition"));
    const int64_t offset = std::stoll(HeaderValue(r, "retryd-original-offset"));
    auto [it, inserted] = last.emplace(slot, offset);
    if (!inserted) {
      EXPECT_LT(it->second, offset) << "out of order at " << *r.key;
      it->second = offset;
    }
    if (absl::StartsWith(*r.key, "flaky-")) {
      ++flaky_seen;
      EXPECT_EQ(HeaderValue(r, "retryd-attempt"), "3");
    }
  }
  EXPECT_EQ(flaky_seen, 100 - 2);  // i % 9 == 0 below 900, less those that are i % 50 == 0.
}

TEST(EngineTest, BrokerFaultsLoseNothing) {
  const testing::TestTopics topics = CreateTopics("faults");
  const std::vector<std::string> keys = MixedKeys(3000);
  ProduceKeys(topics.input, keys);

  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 2;
  // The mock does not check an idempotent producer's sequence numbers: with
  // several batches in flight, it stores a later batch while an earlier one
  // failed, and librdkafka then counts the failed batch as written because a
  // later one was (its "implicit ack", sound only where the broker checks
  // sequences, as Kafka does). One request in flight per connection keeps
  // the produce errors below from losing records on the mock alone.
  options.kafka_properties["max.in.flight.requests.per.connection"] = "1";
  // 1 ms per record keeps the run going while the faults hit.
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor(1));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().consumed >= 300; }, absl::Seconds(60)));

  // Kafka protocol API keys and retriable error codes.
  constexpr int16_t kProduce = 0, kFetch = 1, kOffsetCommit = 8;
  constexpr int kNotLeader = 6, kRequestTimedOut = 7, kNotCoordinator = 16;
  kafka::EmbeddedBroker& broker = Broker();
  broker.PushRequestErrors(kProduce, {kNotLeader, kRequestTimedOut, kNotLeader, kRequestTimedOut});
  broker.PushRequestErrors(kFetch, {kNotLeader, kRequestTimedOut, kNotLeader});
  broker.PushRequestErrors(kOffsetCommit, {kNotCoordinator, kRequestTimedOut, kNotCoordinator});
  // Broker 2 is down for a window of the run: until 300 more records were
  // consumed (from partitions other brokers lead) or 5 s passed, whichever
  // comes first. Either way the run must then finish with nothing lost.
  const int64_t before = engine->Totals().consumed;
  ASSERT_TRUE(broker.SetBrokerDown(2).ok());
  const bool progressed_while_down =
      WaitFor([&] { return engine->Totals().consumed >= before + 300; }, absl::Seconds(5));
  ASSERT_TRUE(broker.SetBrokerUp(2).ok());
  std::cout << "faults: progress while broker 2 was down: "
            << (progressed_while_down ? "yes" : "no") << "\n";

  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();
  broker.ClearRequestErrors(kProduce);
  broker.ClearRequestErrors(kFetch);
  broker.ClearRequestErrors(kOffsetCommit);

  ExpectEachKeyWhereItBelongs(topics, keys, "faults");
}

// Fetches answered OFFSET_OUT_OF_RANGE, as a stale leader answers (a node
// resumed after a pause, whose log is behind): librdkafka 2.0.2 resets the
// partition to its beginning (auto.offset.reset earliest) and reads it
// again. The consumer seeks back to where it was, since the log reaches
// there. Mid-run, and at the start of a second run in the group, whose
// first fetch is at the offsets the first one committed at its graceful
// stop: every record is written once.
TEST(EngineTest, AnOutOfRangeFetchDoesNotReadThePartitionAgain) {
  const testing::TestTopics topics = CreateTopics("out-of-range");
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) keys.push_back(absl::StrCat("ok-", i));
  ProduceKeys(topics.input, keys);

  engine::EngineOptions options = TestEngineOptions(topics);
  // The primary alone fetches, so every error below reaches its fetches.
  options.retry.threads = 0;
  constexpr int16_t kFetch = 1;
  constexpr int kOffsetOutOfRange = 1;
  kafka::EmbeddedBroker& broker = Broker();
  const std::vector<int> errors(3, kOffsetOutOfRange);
  {
    // 1 ms per record keeps the run going while the errors hit.
    std::unique_ptr<engine::Engine> first = StartEngine(options, TestProcessor(1));
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(WaitFor([&] { return first->Totals().consumed >= 600; }, absl::Seconds(60)));
    broker.PushRequestErrors(kFetch, errors);
    ASSERT_TRUE(WaitFor([&] { return first->Totals().consumed >= 1200; }, absl::Seconds(60)));
    first->Stop();
  }
  // Any error left would fail the test's own reads (nothing else fetches
  // while the engines run).
  broker.ClearRequestErrors(kFetch);
  const size_t after_first = ReadAll(topics.output).size();
  ASSERT_LT(after_first, keys.size()) << "the first run did everything: the second proves nothing";

  broker.PushRequestErrors(kFetch, errors);
  std::unique_ptr<engine::Engine> second = StartEngine(options, TestProcessor(1));
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(WaitFor(
      [&] { return second->Totals().consumed >= static_cast<int64_t>(keys.size() - after_first); },
      absl::Seconds(60)));
  broker.ClearRequestErrors(kFetch);
  ASSERT_TRUE(
      WaitFor([&] { return ReadAll(topics.output).size() >= keys.size(); }, absl::Seconds(60)));
  second->Stop();

  // The second run read on from the first one's commits: nothing twice.
  EXPECT_EQ(second->Totals().consumed, static_cast<int64_t>(keys.size() - after_first));
  EXPECT_EQ(ReadAll(topics.output).size(), keys.size());
}

// Retry threads join and leave their group while records flow: every
// rebalance revokes partitions with hand-offs in flight, and a stop without
// grace abandons a thread's uncommitted work. Another thread must redo it.
TEST(EngineTest, RetryThreadsComingAndGoingMidRunLoseNothing) {
  const testing::TestTopics topics = CreateTopics("scaling");
  const std::vector<std::string> keys = MixedKeys(4000);
  ProduceKeys(topics.input, keys);

  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_threads = 4;
  // 3 ms per record keeps the primary busy while the retry group changes.
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor(3));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().sent_to_retry >= 50; }, absl::Seconds(60)));

  const absl::StatusOr<std::vector<int>> started =
      engine->StartRetryThreads(2, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(started.ok()) << started.status();
  const int64_t consumed_mid_run = engine->Totals().consumed;
  const absl::StatusOr<std::vector<int>> graceful = engine->StopRetryThreads(1, true);
  ASSERT_TRUE(graceful.ok()) << graceful.status();
  const absl::StatusOr<std::vector<int>> abrupt = engine->StopRetryThreads(1, false);
  ASSERT_TRUE(abrupt.ok()) << abrupt.status();
  std::cout << "scaling: " << consumed_mid_run << " of " << keys.size()
            << " consumed when the retry group changed\n";

  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();

  ExpectEachKeyWhereItBelongs(topics, keys, "scaling");
}

}  // namespace
}  // namespace retryd
