// Hand-offs that Kafka will not take: a record too large to produce, a topic
// that is gone, a producer that hit a fatal error, produce errors that outlast
// librdkafka's own retries. What a user sees: where the records end up, the
// group's committed offset, the threads' state and last error.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "retryd/v1/config.pb.h"
#include "server/engine/api/engine.h"
#include "server/engine/handoff/hand_offs.h"
#include "server/engine/handoff/record_buffers.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/stats/thread_stats.h"
#include "server/kafka/producer.h"
#include "server/kafka/topics.h"
#include "server/processors/simulate.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::BootstrapServers;
using ::retryd::testing::Broker;
using ::retryd::testing::ClientProperties;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::HeaderValue;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;

// Kafka protocol API key and error codes.
constexpr int16_t kProduce = 0;
constexpr int kNotLeader = 6;
constexpr int kRequestTimedOut = 7;
constexpr int kUnknownTopicOrPartition = 3;
constexpr int kUnknownProducerId = 59;

class AcceptAll : public engine::Processor {
 public:
  engine::Outcome Process(const Record&, int) override { return engine::Outcome::Ok(); }
};

// Accepts every record, all but "first" only once Open() is called (or a
// minute has passed): what the test sets up before then meets the engine's
// hand-offs of those records, however soon the engine fetched them.
class AcceptAfterFirst : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int) override {
    if (record.key != "first") open_.WaitForNotificationWithTimeout(absl::Seconds(60));
    return engine::Outcome::Ok();
  }
  void Open() { open_.Notify(); }

 private:
  absl::Notification open_;
};

// Records of `topic` the group `group` has not committed, asked of the
// cluster as an operator's tool would (without joining the group).
int64_t UncommittedRecords(const std::string& group, const std::string& topic) {
  absl::StatusOr<std::unique_ptr<kafka::GroupLagProbe>> probe =
      kafka::GroupLagProbe::Create(BootstrapServers(), ClientProperties(), group, topic);
  EXPECT_TRUE(probe.ok()) << probe.status();
  if (!probe.ok()) return -1;
  absl::StatusOr<int64_t> lag = (*probe)->Measure(absl::Seconds(10));
  EXPECT_TRUE(lag.ok()) << lag.status();
  return lag.ok() ? *lag : -1;
}

std::shared_ptr<const engine::ThreadStats> Primary(const engine::Engine& engine) {
  for (const auto& s : engine.Threads()) {
    if (s->role() == engine::ThreadRole::kPrimary) return s;
  }
  return nullptr;
}

std::vector<std::string> Keys(const std::vector<Record>& records) {
  std::vector<std::string> keys;
  for (const Record& r : records) keys.push_back(r.key.value_or("<null>"));
  return keys;
}

// A hand-off Kafka acknowledged comes back to its worker (FreeDone): the
// object is kept for the next Emit, and its record's buffers for the next
// record read. What a reused hand-off sends carries nothing of the one before.
TEST(HandOffTest, AHandOffDoneWithIsUsedAgainAndItsBuffersKeptForTheNextRead) {
  const testing::TestTopics topics = CreateTopics("spare", /*partitions=*/1);
  const engine::EngineOptions options = TestEngineOptions(topics);
  kafka::ProducerOptions producer_options;
  producer_options.bootstrap_servers = BootstrapServers();
  producer_options.properties = ClientProperties();
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer =
      kafka::Producer::Create(producer_options);
  ASSERT_TRUE(producer.ok()) << producer.status();
  engine::KeyParking parking;
  auto mailbox = std::make_shared<engine::HandOffMailbox>(1, engine::ThreadRole::kPrimary,
                                                          /*resume_below=*/100, &parking);
  const std::shared_ptr<kafka::Producer> shared(*std::move(producer));
  engine::HandOffs hand_offs(options, shared, mailbox);
  engine::RecordBuffers buffers;
  auto tracker = std::make_shared<engine::CompletionTracker>();

  auto emit = [&](int64_t offset, std::optional<std::string> key, std::string value,
                  Headers headers) {
    ASSERT_TRUE(tracker->Begin(offset));
    engine::HandOff h;
    h.kind = engine::HandOffKind::kOutput;
    h.tracker = tracker;
    h.offset = offset;
    h.origin.original_topic = topics.input;
    h.origin.original_offset = offset;
    h.origin.attempt = 1;
    h.record.topic = topics.output;
    h.record.partition = 0;
    h.record.key = std::move(key);
    h.record.value = std::move(value);
    h.record.headers = std::move(headers);
    hand_offs.Emit(std::move(h), /*in_order=*/false);
  };
  // Acknowledged, and back with this "worker" (the report passes the hand-off
  // back after it has counted it acknowledged).
  auto back = [&](size_t spare) {
    return WaitFor(
        [&] {
          hand_offs.FreeDone(buffers);
          return mailbox->in_flight.load() == 0 && hand_offs.spare() == spare;
        },
        absl::Seconds(30));
  };

  emit(0, std::string(40, 'k'), std::string(500, 'a'), {{"first", "1"}, {"second", "2"}});
  EXPECT_EQ(hand_offs.spare(), 0u);
  ASSERT_TRUE(back(1));
  EXPECT_EQ(buffers.buffers(), 3u);  // The key, the value and the header list.

  // The next read gets them; the next Emit the object.
  Record read;
  buffers.Prepare(read);
  ASSERT_TRUE(read.value.has_value());
  EXPECT_GE(read.value->capacity(), 40u);
  EXPECT_EQ(buffers.buffers(), 0u);
  emit(1, std::nullopt, "b", {});
  EXPECT_EQ(hand_offs.spare(), 0u);
  ASSERT_TRUE(back(1));
  EXPECT_EQ(tracker->CommitOffset(), 2);
  shared->Close(absl::Seconds(10));

  std::vector<Record> out = ReadAll(topics.output);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].key, std::nullopt);
  EXPECT_EQ(out[1].value, "b");
  EXPECT_EQ(HeaderValue(out[1], std::string(engine::kOriginalOffsetHeader)), "1");
  for (const Header& h : out[1].headers) {
    EXPECT_TRUE(absl::StartsWith(h.key, "retryd-")) << h.key << " is the record's before";
  }
}

TEST(HandOffTest, RecordTooLargeToProduceIsDeadLetteredCutToFit) {
  const testing::TestTopics topics = CreateTopics("oversize", 1);
  // The broker takes it; retryd's producer, with librdkafka's default
  // message.max.bytes of 1,000,000 (headers counted), cannot send it on.
  kafka::ProducerOptions big_options;
  big_options.bootstrap_servers = BootstrapServers();
  big_options.properties = ClientProperties();
  big_options.properties = {{"message.max.bytes", "2000000"}};
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer = kafka::Producer::Create(big_options);
  ASSERT_TRUE(producer.ok()) << producer.status();
  OutgoingRecord big;
  big.topic = topics.input;
  big.key = "big";
  big.value = std::string(1000100, 'x');
  big.headers = {{"h-app", "kept if it fits"}};
  absl::Notification acked;
  absl::Status delivered;
  ASSERT_TRUE((*producer)
                  ->Produce(big,
                            [&](absl::Status s) {
                              delivered = s;
                              acked.Notify();
                            })
                  .ok());
  ASSERT_TRUE(acked.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(delivered.ok()) << delivered;
  (*producer)->Close(absl::Seconds(5));
  std::vector<std::string> small;
  for (int i = 0; i < 10; ++i) small.push_back(absl::StrCat("small-", i));
  ProduceKeys(topics.input, small);

  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 0;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::make_unique<AcceptAll>());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return UncommittedRecords(options.group_id, topics.input) == 0; },
                      absl::Seconds(60)))
      << "committed offset never reached the end; last error: " << Primary(*engine)->last_error();
  EXPECT_TRUE(engine->ThreadFailure().ok()) << engine->ThreadFailure();
  engine->Stop();

  EXPECT_EQ(Keys(ReadAll(topics.output)), small);
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(dlq.size(), 1u);
  const Record& dead = dlq[0];
  EXPECT_EQ(dead.key, "big");
  ASSERT_TRUE(dead.value.has_value());
  EXPECT_LT(dead.value->size(), 1000000u);
  EXPECT_GT(dead.value->size(), 990000u);
  EXPECT_EQ(*dead.value, std::string(dead.value->size(), 'x'));
  EXPECT_EQ(HeaderValue(dead, "h-app"), "kept if it fits");
  EXPECT_EQ(HeaderValue(dead, std::string(engine::kTruncatedHeader)),
            absl::StrCat("original key=3 value=1000100 headers=1; kept key=3 value=",
                         dead.value->size(), " headers=1"));
  EXPECT_EQ(HeaderValue(dead, std::string(engine::kOriginalTopicHeader)), topics.input);
  EXPECT_EQ(HeaderValue(dead, std::string(engine::kOriginalPartitionHeader)), "0");
  EXPECT_EQ(HeaderValue(dead, std::string(engine::kOriginalOffsetHeader)), "0");
  EXPECT_EQ(HeaderValue(dead, std::string(engine::kAttemptHeader)), "1");
  EXPECT_THAT(HeaderValue(dead, std::string(engine::kErrorHeader)),
              HasSubstr("output record refused by Kafka"));
  EXPECT_THAT(HeaderValue(dead, std::string(engine::kErrorHeader)), HasSubstr("too large"));
}

// The mock cannot delete a topic: its metadata says the output topic is
// unknown, and produce requests fail with UNKNOWN_TOPIC_OR_PART.
TEST(HandOffTest, DeletedOutputTopicFailsTheThreadWithoutCommittingPastIt) {
  const testing::TestTopics topics = CreateTopics("deleted", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 0;
  options.kafka_properties["message.timeout.ms"] = "3000";
  // The producer learns of the topic's error from a periodic refresh.
  options.kafka_properties["topic.metadata.refresh.interval.ms"] = "1000";
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::make_unique<AcceptAll>());
  ASSERT_NE(engine, nullptr);
  std::vector<std::string> before, after;
  for (int i = 0; i < 5; ++i) before.push_back(absl::StrCat("before-", i));
  for (int i = 0; i < 5; ++i) after.push_back(absl::StrCat("after-", i));
  ProduceKeys(topics.input, before);
  ASSERT_TRUE(WaitFor([&] { return UncommittedRecords(options.group_id, topics.input) == 0; },
                      absl::Seconds(60)));

  Broker().SetTopicError(topics.output, kUnknownTopicOrPartition);
  Broker().PushRequestErrors(kProduce, std::vector<int>(50, kUnknownTopicOrPartition));
  ProduceKeys(topics.input, after);  // Ahead of the injected errors: none of its own.
  ASSERT_TRUE(WaitFor([&] { return Primary(*engine)->state() == engine::ThreadState::kFailed; },
                      absl::Seconds(60)))
      << "state " << engine::ThreadStateName(Primary(*engine)->state()) << ", last error "
      << Primary(*engine)->last_error();
  Broker().ClearRequestErrors(kProduce);
  Broker().SetTopicError(topics.output, 0);

  EXPECT_THAT(Primary(*engine)->last_error(), HasSubstr(topics.output));
  EXPECT_THAT(engine->ThreadFailure().message(), HasSubstr("failed"));
  // Nothing past the first record whose output was lost is committed.
  EXPECT_EQ(UncommittedRecords(options.group_id, topics.input), 5);
  engine->Stop();
}

// A produce that times out once and then meets UNKNOWN_PRODUCER_ID is one
// librdkafka cannot retry without risking duplicates or reordering: it raises
// a fatal error and the idempotent producer is finished. The thread commits
// nothing past the record whose hand-off was lost, rewinds to its commit,
// and hands that record and the next off again through a new producer.
TEST(HandOffTest, FatalProducerErrorRewindsToTheCommitAndGoesOnThroughANewProducer) {
  const testing::TestTopics topics = CreateTopics("fatal", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 0;
  auto processor = std::make_unique<AcceptAfterFirst>();
  AcceptAfterFirst* gate = processor.get();
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(processor));
  ASSERT_NE(engine, nullptr);
  ProduceKeys(topics.input, {"first"});
  ASSERT_TRUE(WaitFor([&] { return UncommittedRecords(options.group_id, topics.input) == 0; },
                      absl::Seconds(60)));

  // The errors must meet the engine's hand-off of "second", not this
  // producer's writes: they are pushed once those are acknowledged, and the
  // engine hands "second" off only after that.
  ProduceKeys(topics.input, {"second", "third"});
  Broker().PushRequestErrors(kProduce, {kRequestTimedOut, kUnknownProducerId});
  gate->Open();
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().producer_rewinds >= 1; }, absl::Seconds(60)))
      << "state " << engine::ThreadStateName(Primary(*engine)->state()) << ", last error "
      << Primary(*engine)->last_error();
  ASSERT_TRUE(WaitFor([&] { return UncommittedRecords(options.group_id, topics.input) == 0; },
                      absl::Seconds(60)));
  Broker().ClearRequestErrors(kProduce);

  // The fatal error was the broker's, not one raised for a test.
  EXPECT_THAT(Primary(*engine)->last_error(), HasSubstr("fatal"));
  EXPECT_THAT(Primary(*engine)->last_error(), Not(HasSubstr("test_fatal_error")));
  EXPECT_TRUE(engine->ThreadFailure().ok()) << engine->ThreadFailure();
  EXPECT_EQ(engine->producer_replacements(), 1);
  EXPECT_EQ(engine->Totals().producer_rewinds, 1);
  std::vector<std::string> output = Keys(ReadAll(topics.output));
  std::sort(output.begin(), output.end());
  // "second" may be there twice: its first hand-off may have been written
  // before the producer gave it up.
  output.erase(std::unique(output.begin(), output.end()), output.end());
  EXPECT_EQ(output, (std::vector<std::string>{"first", "second", "third"}));
  engine->Stop();
}

// Produce errors last longer than message.timeout.ms: librdkafka gives the
// records up and the worker sends them again itself. In order, a re-sent
// record must still land before the records that followed it.
TEST(HandOffTest, ResentHandOffsKeepPartitionOrderInOrderMode) {
  const testing::TestTopics topics = CreateTopics("resend", 2);
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) keys.push_back(absl::StrCat("k-", i));
  ProduceKeys(topics.input, keys);

  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  options.kafka_properties["message.timeout.ms"] = "1000";
  // See BrokerFaultsLoseNothing: the mock does not check sequence numbers.
  options.kafka_properties["max.in.flight.requests.per.connection"] = "1";
  // 5 ms a record: records keep coming while the errors last.
  v1::SimulateConfig slow;
  slow.set_latency_ms(5);
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<SimulateProcessor>(slow));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().consumed >= 20; }, absl::Seconds(60)));
  // Each error costs librdkafka a retry backoff (100 ms): about 3 s of
  // failures, three times message.timeout.ms.
  Broker().PushRequestErrors(kProduce, std::vector<int>(30, kNotLeader));
  ASSERT_TRUE(WaitFor([&] { return UncommittedRecords(options.group_id, topics.input) == 0; },
                      absl::Seconds(90)));
  Broker().ClearRequestErrors(kProduce);
  const std::string last_error = Primary(*engine)->last_error();
  engine->Stop();

  // The engine's own re-send ran: librdkafka gave records up on timeout.
  EXPECT_THAT(last_error, HasSubstr("timed out"));
  // Records of one input partition spread over the output's partitions by
  // key. Within each output partition, an input partition's records read as
  // in order with replays: a record sent again is followed again by those
  // that had got in ahead of it, as after a restart. So the last copy of
  // each record comes in offset order (a re-sent record merely moved behind
  // later ones would break that).
  std::map<std::pair<int32_t, std::string>, std::vector<int64_t>> offsets;
  const std::vector<Record> output = ReadAll(topics.output);
  std::set<std::pair<std::string, int64_t>> seen;
  int64_t copies = 0;
  for (auto r = output.rbegin(); r != output.rend(); ++r) {
    const std::string source = HeaderValue(*r, std::string(engine::kOriginalPartitionHeader));
    const int64_t offset = std::stoll(HeaderValue(*r, std::string(engine::kOriginalOffsetHeader)));
    if (seen.insert({source, offset}).second) {
      offsets[{r->partition, source}].push_back(offset);
    } else {
      ++copies;
    }
  }
  std::cout << "resend: " << copies << " records replayed in the output\n";
  for (auto& [where, list] : offsets) std::reverse(list.begin(), list.end());
  size_t total = 0;
  for (const auto& [where, list] : offsets) {
    total += list.size();
    EXPECT_TRUE(std::is_sorted(list.begin(), list.end()))
        << "input partition " << where.second << " out of order in output partition "
        << where.first;
  }
  EXPECT_EQ(total, keys.size());
}

}  // namespace
}  // namespace retryd
