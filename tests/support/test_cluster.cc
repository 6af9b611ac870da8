#include "tests/support/test_cluster.h"

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/common/logging.h"
#include "server/engine/stats/thread_stats.h"
#include "server/kafka/producer.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

#ifndef RETRYD_KAFKA_FIXTURE_FILE
#define RETRYD_KAFKA_FIXTURE_FILE ""
#endif

namespace retryd::testing {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

[[noreturn]] void Die(const std::string& why) {
  ADD_FAILURE() << why;
  std::fprintf(stderr, "test_cluster: %s\n", why.c_str());
  std::abort();
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

// A real cluster's bootstrap, properties and what this process made on it.
struct RealKafka {
  std::string bootstrap;
  std::map<std::string, std::string> properties;
  std::string prefix;  // Of every topic this process makes there.

  absl::Mutex mu;
  std::set<std::string> topics ABSL_GUARDED_BY(mu);
  std::set<std::string> groups ABSL_GUARDED_BY(mu);
};

RealKafka* LoadRealKafka() {
  auto* real = new RealKafka;  // Lives until the process exits.
  real->bootstrap = Env("RETRYD_TEST_KAFKA");
  std::string file = Env("RETRYD_TEST_KAFKA_FILE");
  if (file.empty()) file = RETRYD_KAFKA_FIXTURE_FILE;
  if (real->bootstrap.empty() && !file.empty()) real->bootstrap = ReadWhole(file);
  if (real->bootstrap.empty()) {
    Die(
        absl::StrCat("RETRYD_TEST_BROKER=kafka, but no cluster: set RETRYD_TEST_KAFKA=host:port, "
                     "or run through ctest (-L kafka), whose fixture writes its broker's "
                     "bootstrap to ",
                     file.empty() ? "RETRYD_TEST_KAFKA_FILE" : file));
  }
  if (const std::string path = Env("RETRYD_TEST_KAFKA_PROPERTIES"); !path.empty()) {
    std::ifstream in(path);
    if (!in) Die(absl::StrCat("cannot read RETRYD_TEST_KAFKA_PROPERTIES=", path));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const absl::string_view text = absl::StripAsciiWhitespace(line);
      if (text.empty() || text[0] == '#') continue;
      const size_t eq = text.find('=');
      if (eq == absl::string_view::npos || eq == 0) {
        Die(absl::StrCat(path, ":", n, ": expected key=value"));
      }
      real->properties[std::string(absl::StripAsciiWhitespace(text.substr(0, eq)))] =
          std::string(absl::StripAsciiWhitespace(text.substr(eq + 1)));
    }
  }
  std::random_device seed;
  real->prefix = absl::StrCat("retryd-test-", getpid(), "-", seed() % 1000000, "-");
  return real;
}

RealKafka* Real() {
  static RealKafka* real = OnRealKafka() ? LoadRealKafka() : nullptr;
  return real;
}

// An Admin API call's result event, or null after `timeout`.
using EventPtr = std::unique_ptr<rd_kafka_event_t, void (*)(rd_kafka_event_t*)>;

// Deletes what this process made on the real cluster: its groups first
// (a group's offsets would outlive its topics), then its topics. Best
// effort: a leftover is reported, not a failure.
void DeleteWhatWasMade() {
  RealKafka* real = Real();
  std::vector<std::string> topics, groups;
  {
    absl::MutexLock lock(&real->mu);
    topics.assign(real->topics.begin(), real->topics.end());
    groups.assign(real->groups.begin(), real->groups.end());
  }
  if (topics.empty() && groups.empty()) return;
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", real->bootstrap.c_str(), errstr, sizeof(errstr));
  for (const auto& [key, value] : real->properties) {
    rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof(errstr));
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk == nullptr) {
    std::fprintf(stderr, "test_cluster: could not delete the test's topics: %s\n", errstr);
    rd_kafka_conf_destroy(conf);
    return;
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  auto wait = [&](const char* what) {
    EventPtr event(rd_kafka_queue_poll(queue, 30000), rd_kafka_event_destroy);
    if (event == nullptr) {
      std::fprintf(stderr, "test_cluster: %s: no answer in 30 s\n", what);
    } else if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "test_cluster: %s: %s\n", what,
                   rd_kafka_event_error_string(event.get()));
    }
  };
  if (!groups.empty()) {
    std::vector<rd_kafka_DeleteGroup_t*> requests;
    for (const std::string& g : groups) requests.push_back(rd_kafka_DeleteGroup_new(g.c_str()));
    rd_kafka_DeleteGroups(rk, requests.data(), requests.size(), nullptr, queue);
    wait("deleting the test's groups");
    rd_kafka_DeleteGroup_destroy_array(requests.data(), requests.size());
  }
  if (!topics.empty()) {
    std::vector<rd_kafka_DeleteTopic_t*> requests;
    for (const std::string& t : topics) requests.push_back(rd_kafka_DeleteTopic_new(t.c_str()));
    rd_kafka_DeleteTopics(rk, requests.data(), requests.size(), nullptr, queue);
    wait("deleting the test's topics");
    rd_kafka_DeleteTopic_destroy_array(requests.data(), requests.size());
  }
  rd_kafka_queue_destroy(queue);
  rd_kafka_destroy(rk);
}

void CreateRealTopics(const std::vector<std::string>& topics, int partitions) {
  RealKafka* real = Real();
  {
    absl::MutexLock lock(&real->mu);
    if (real->topics.empty() && real->groups.empty()) std::atexit(DeleteWhatWasMade);
    real->topics.insert(topics.begin(), topics.end());
  }
  kafka::NewTopicSpec spec;
  spec.partitions = partitions;  // Replication factor: min(3, brokers).
  absl::StatusOr<kafka::CreatedTopics> created = kafka::CreateMissingTopics(
      real->bootstrap, real->properties, {}, topics, spec, absl::Seconds(60));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_EQ(created->topics.size(), topics.size()) << "some topics existed already";
}

void NoteRealGroup(const std::string& group) {
  RealKafka* real = Real();
  absl::MutexLock lock(&real->mu);
  if (real->topics.empty() && real->groups.empty()) std::atexit(DeleteWhatWasMade);
  real->groups.insert(group);
}

}  // namespace

bool OnRealKafka() {
  static const bool real = [] {
    const std::string broker = Env("RETRYD_TEST_BROKER");
    if (broker == "kafka") return true;
    if (!broker.empty() && broker != "mock") {
      Die(absl::StrCat("RETRYD_TEST_BROKER=", broker, ": expected mock or kafka"));
    }
    return false;
  }();
  return real;
}

kafka::EmbeddedBroker& Broker() {
  if (OnRealKafka()) {
    Die("this test injects faults into the mock cluster, so it runs only there "
        "(RETRYD_TEST_BROKER=kafka names a real cluster)");
  }
  static kafka::EmbeddedBroker* broker = [] {
    absl::StatusOr<std::unique_ptr<kafka::EmbeddedBroker>> b = kafka::EmbeddedBroker::Start(3);
    if (!b.ok()) Die(absl::StrCat("could not start the mock cluster: ", b.status().ToString()));
    return b->release();  // Lives until the process exits.
  }();
  return *broker;
}

const std::string& BootstrapServers() {
  return OnRealKafka() ? Real()->bootstrap : Broker().bootstrap_servers();
}

const std::map<std::string, std::string>& ClientProperties() {
  static const std::map<std::string, std::string> none;
  return OnRealKafka() ? Real()->properties : none;
}

TestTopics CreateTopics(const std::string& name, int partitions) {
  static std::atomic<int> counter{0};
  const std::string base =
      absl::StrCat(OnRealKafka() ? Real()->prefix : "", name, "-", counter.fetch_add(1));
  TestTopics t{base, base + ".retry", base + ".dlq", base + ".done"};
  if (OnRealKafka()) {
    CreateRealTopics({t.input, t.retry, t.dlq, t.output}, partitions);
    return t;
  }
  for (const std::string& topic : {t.input, t.retry, t.dlq, t.output}) {
    absl::Status s = Broker().CreateTopic(topic, partitions, 3);
    EXPECT_TRUE(s.ok()) << s;
  }
  return t;
}

engine::EngineOptions TestEngineOptions(const TestTopics& topics) {
  engine::EngineOptions o;
  o.bootstrap_servers = BootstrapServers();
  o.group_id = absl::StrCat(topics.input, "-group");
  if (OnRealKafka()) {
    NoteRealGroup(o.group_id);
    NoteRealGroup(o.group_id + ".retry");
  }
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
  o.kafka_properties = ClientProperties();
  // Faster group joins and failure detection. The mock cluster holds every
  // rebalance for the members' session timeout (less a second); 6 s is
  // also the shortest a real broker takes by default
  // (group.min.session.timeout.ms).
  o.kafka_properties["session.timeout.ms"] = "6000";
  o.kafka_properties["heartbeat.interval.ms"] = "500";
  // A refresh a second, so that the clients of a real cluster learn its
  // new topics and partitions soon. On the mock, which has its topics
  // before any client starts, librdkafka's own 5 minutes rather than
  // retryd's 5 s: librdkafka 2.0.2 rejoins the group when a periodic
  // refresh lands while the group's leader waits for the metadata it
  // assigns from, and the mock holds each rejoin for five seconds. The
  // slower the machine, the longer that wait and the likelier a refresh
  // within it: at one a second, a few such rejoins in a row keep a group
  // unassigned past a test's 30 s bound. Leaders that move are learnt from
  // the errors they cause, whatever the interval.
  o.kafka_properties["topic.metadata.refresh.interval.ms"] = OnRealKafka() ? "1000" : "300000";
  // RETRYD_KAFKA_DEBUG=cgrp,fetch,... turns on librdkafka's debug contexts.
  // The lines come at debug level, so that level is switched on too.
  if (const std::string debug = Env("RETRYD_KAFKA_DEBUG"); !debug.empty()) {
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
  options.bootstrap_servers = BootstrapServers();
  options.properties = ClientProperties();
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
      kafka::ReadTopic(BootstrapServers(), ClientProperties(), topic, absl::Seconds(60));
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

bool AllAssigned(const engine::Engine& engine, size_t partitions) {
  std::map<engine::ThreadRole, size_t> assigned;
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
