#include "tests/support/test_cluster.h"

#include <atomic>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/common/logging.h"
#include "server/kafka/producer.h"
#include "server/kafka/topic_reader.h"

namespace retryd::testing {

kafka::EmbeddedBroker& Broker() {
  static kafka::EmbeddedBroker* broker = [] {
    absl::StatusOr<std::unique_ptr<kafka::EmbeddedBroker>> b = kafka::EmbeddedBroker::Start(3);
    if (!b.ok()) {
      ADD_FAILURE() << b.status();
      std::abort();
    }
    return b->release();  // Lives until the process exits.
  }();
  return *broker;
}

TestTopics CreateTopics(const std::string& name, int partitions) {
  static std::atomic<int> counter{0};
  const std::string base = absl::StrCat(name, "-", counter.fetch_add(1));
  TestTopics t{base, base + ".retry", base + ".dlq", base + ".done"};
  for (const std::string& topic : {t.input, t.retry, t.dlq, t.output}) {
    absl::Status s = Broker().CreateTopic(topic, partitions, 3);
    EXPECT_TRUE(s.ok()) << s;
  }
  return t;
}

EngineOptions TestEngineOptions(const TestTopics& topics) {
  EngineOptions o;
  o.bootstrap_servers = Broker().bootstrap_servers();
  o.group_id = absl::StrCat(topics.input, "-group");
  o.input_topics = {topics.input};
  o.output_topic = topics.output;
  o.dead_letter_topic = topics.dlq;
  o.retry.topic = topics.retry;
  o.retry.threads = 1;
  o.retry.max_attempts = 4;
  o.retry.backoff = {.initial_ms = 20, .multiplier = 2.0, .max_ms = 200};
  o.retry.seed = 42;
  o.commit_interval_ms = 200;
  o.shutdown_timeout_ms = 10000;
  // Faster group joins and failure detection on the mock cluster.
  o.kafka_properties = {{"session.timeout.ms", "6000"},
                        {"heartbeat.interval.ms", "500"},
                        {"topic.metadata.refresh.interval.ms", "1000"}};
  // RETRYD_KAFKA_DEBUG=cgrp,fetch,... turns on librdkafka's debug contexts.
  // The lines come at debug level, so that level is switched on too.
  if (const char* debug = std::getenv("RETRYD_KAFKA_DEBUG"); debug != nullptr && *debug != 0) {
    o.kafka_properties["debug"] = debug;
    SetMinLogLevel(LogLevel::kDebug);
  }
  return o;
}

void ProduceKeys(const std::string& topic, const std::vector<std::string>& keys) {
  std::vector<OutgoingRecord> records;
  records.reserve(keys.size());
  for (const std::string& key : keys) {
    OutgoingRecord r;
    r.topic = topic;
    r.key = key;
    r.value = absl::StrCat("v-", key);
    r.headers = {{"h-bin", std::string("\0\xff", 2)}, {"h-null", std::nullopt}};
    records.push_back(std::move(r));
  }
  ProduceRecords(records);
}

void ProduceRecords(const std::vector<OutgoingRecord>& records) {
  kafka::ProducerOptions options;
  options.bootstrap_servers = Broker().bootstrap_servers();
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer = kafka::Producer::Create(options);
  ASSERT_TRUE(producer.ok()) << producer.status();
  absl::Mutex mu;
  int failed = 0;
  for (const OutgoingRecord& r : records) {
    absl::Status s = (*producer)->Produce(r, [&](absl::Status delivered) {
      if (!delivered.ok()) {
        absl::MutexLock lock(&mu);
        ++failed;
      }
    });
    ASSERT_TRUE(s.ok()) << s;
  }
  ASSERT_TRUE((*producer)->Flush(absl::Seconds(60)).ok());
  (*producer)->Close(absl::Seconds(1));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(failed, 0);
}

std::vector<Record> ReadAll(const std::string& topic) {
  absl::StatusOr<std::vector<Record>> records =
      kafka::ReadTopic(Broker().bootstrap_servers(), {}, topic, absl::Seconds(60));
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *std::move(records) : std::vector<Record>{};
}

std::string HeaderValue(const Record& record, const std::string& name) {
  std::string value;
  for (const Header& h : record.headers) {
    if (h.key == name) value = h.value.value_or("");
  }
  return value;
}

bool AllAssigned(const Engine& engine, size_t partitions) {
  std::map<ThreadRole, size_t> assigned;
  for (const auto& stats : engine.Threads()) {
    const size_t n = stats->partitions().size();
    if (n == 0) return false;
    assigned[stats->role()] += n;
  }
  for (const auto& [role, n] : assigned) {
    if (n != partitions) return false;
  }
  return true;
}

}  // namespace retryd::testing
