#include "tests/support/outcomes.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "retryd/v1/config.pb.h"
#include "server/kafka/producer.h"
#include "server/kafka/topics.h"
#include "server/processors/simulate.h"
#include "tests/support/wait_for.h"

namespace retryd::testing {

// perm- fails permanently, flaky- fails twice then succeeds, doomed- always
// fails retriably, everything else succeeds.
std::unique_ptr<engine::Processor> TestProcessor(uint32_t latency_ms) {
  retryd::v1::SimulateConfig config;
  config.set_seed(7);
  config.set_latency_ms(latency_ms);
  auto* perm = config.add_rule();
  perm->set_key_prefix("perm-");
  perm->set_permanent(true);
  auto* flaky = config.add_rule();
  flaky->set_key_prefix("flaky-");
  flaky->set_fail_attempts(2);
  auto* doomed = config.add_rule();
  doomed->set_key_prefix("doomed-");
  doomed->set_fail_attempts(1000);
  return std::make_unique<SimulateProcessor>(config);
}

std::vector<std::string> MixedKeys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) {
    const char* kind = i % 13 == 0 ? "perm-" : i % 7 == 0 ? "flaky-" : "ok-";
    keys.push_back(absl::StrCat(kind, i));
  }
  return keys;
}

std::multiset<std::string> Keys(const std::vector<Record>& records) {
  std::multiset<std::string> keys;
  for (const Record& r : records) keys.insert(r.key.value_or("<null>"));
  return keys;
}

// Keys among `keys` that are in neither the output nor the DLQ topic.
int OutOfOrder(const std::vector<Record>& output) {
  std::map<std::pair<int32_t, std::string>, int64_t> last;  // (output p, input p) -> offset
  int out_of_order = 0;
  for (const Record& r : output) {
    const auto slot = std::make_pair(r.partition, HeaderValue(r, "retryd-original-partition"));
    const int64_t offset = std::stoll(HeaderValue(r, "retryd-original-offset"));
    auto [it, inserted] = last.emplace(slot, offset);
    if (!inserted) {
      if (offset < it->second) ++out_of_order;
      it->second = std::max(it->second, offset);
    }
  }
  return out_of_order;
}

std::vector<std::string> KeysOutOfOrder(const std::vector<Record>& output) {
  // Per key (and input partition), the input offsets in the order their
  // first copies reached the output.
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> firsts;
  std::set<std::pair<std::string, int64_t>> seen;  // (input partition, offset)
  for (const Record& r : output) {
    const std::string partition = HeaderValue(r, "retryd-original-partition");
    const int64_t offset = std::stoll(HeaderValue(r, "retryd-original-offset"));
    if (!seen.emplace(partition, offset).second) continue;
    firsts[{partition, r.key.value_or("<null>")}].push_back(offset);
  }
  std::vector<std::string> out_of_order;
  for (const auto& [key, offsets] : firsts) {
    if (!std::is_sorted(offsets.begin(), offsets.end())) out_of_order.push_back(key.second);
  }
  return out_of_order;
}

int64_t LostRecords(const std::vector<Record>& input, const std::vector<Record>& output,
                    const std::vector<Record>& dlq) {
  std::set<std::pair<int32_t, int64_t>> done;
  for (const std::vector<Record>* topic : {&output, &dlq}) {
    for (const Record& r : *topic) {
      done.emplace(std::stoi(HeaderValue(r, "retryd-original-partition")),
                   std::stoll(HeaderValue(r, "retryd-original-offset")));
    }
  }
  int64_t lost = 0;
  for (const Record& r : input) lost += done.contains({r.partition, r.offset}) ? 0 : 1;
  return lost;
}

std::vector<std::string> MissingKeys(const TestTopics& topics,
                                     const std::vector<std::string>& keys) {
  std::multiset<std::string> done = Keys(ReadAll(topics.output));
  done.merge(Keys(ReadAll(topics.dlq)));
  std::vector<std::string> missing;
  for (const std::string& k : keys) {
    if (!done.contains(k)) missing.push_back(k);
  }
  return missing;
}

// Waits until every key has an outcome and nothing is in flight. Counts
// distinct keys, not records: after a rebalance or a fault some records are
// processed twice, and a count of records would let a test stop the engine
// before the last keys were done. On timeout, says which keys are missing.
::testing::AssertionResult WaitForOutcomes(const engine::Engine& engine, const TestTopics& topics,
                                           const std::vector<std::string>& keys,
                                           absl::Duration timeout) {
  std::vector<std::string> missing = keys;
  const bool done = WaitFor(
      [&] {
        // Cheap necessary condition first: each key needs at least one outcome.
        const engine::EngineTotals t = engine.Totals();
        if (t.in_flight != 0 || static_cast<size_t>(t.succeeded + t.dead_lettered) < keys.size()) {
          return false;
        }
        missing = MissingKeys(topics, keys);
        return missing.empty();
      },
      absl::Seconds(120));
  if (done) return ::testing::AssertionSuccess();
  // Where the missing records are, for whoever debugs this.
  const engine::EngineTotals t = engine.Totals();
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  failure << "after 120 s, " << missing.size() << " keys have no outcome (engine: consumed "
          << t.consumed << ", succeeded " << t.succeeded << ", dead-lettered " << t.dead_lettered
          << ", sent to retry " << t.sent_to_retry << ", in flight " << t.in_flight << "):";
  const std::vector<Record> input = ReadAll(topics.input);
  const std::multiset<std::string> retried = Keys(ReadAll(topics.retry));
  for (size_t i = 0; i < missing.size() && i < 10; ++i) {
    failure << " " << missing[i];
    for (const Record& r : input) {
      if (r.key == missing[i]) failure << " (input " << r.partition << "@" << r.offset << ")";
    }
    failure << " [" << retried.count(missing[i]) << "x in the retry topic]";
  }
  return failure;
}

// Every perm- key is in the DLQ and every other key in the output, and
// nowhere else. Duplicates are allowed (rebalances and faults redo work);
// their number is printed under `label`.
void ExpectAllDoneOnTheFirstAttempt(const TestTopics& topics,
                                    const std::vector<std::string>& keys) {
  const std::vector<Record> output = ReadAll(topics.output);
  EXPECT_EQ(Keys(output), std::multiset<std::string>(keys.begin(), keys.end()));
  for (const Record& r : output) {
    EXPECT_EQ(HeaderValue(r, "retryd-attempt"), "1") << r.key.value_or("<null>");
  }
  EXPECT_TRUE(ReadAll(topics.dlq).empty());
  EXPECT_TRUE(ReadAll(topics.retry).empty());
}

void ExpectEachKeyWhereItBelongs(const TestTopics& topics, const std::vector<std::string>& keys,
                                 const std::string& label) {
  std::set<std::string> want_output, want_dlq;
  for (const std::string& k : keys)
    (absl::StartsWith(k, "perm-") ? want_dlq : want_output).insert(k);
  const std::multiset<std::string> output = Keys(ReadAll(topics.output));
  const std::multiset<std::string> dlq = Keys(ReadAll(topics.dlq));
  EXPECT_EQ(std::set<std::string>(output.begin(), output.end()), want_output);
  EXPECT_EQ(std::set<std::string>(dlq.begin(), dlq.end()), want_dlq);
  std::cout << label << ": duplicates in output " << output.size() - want_output.size()
            << ", in DLQ " << dlq.size() - want_dlq.size() << "\n";
}

std::unique_ptr<engine::Engine> StartEngine(const engine::EngineOptions& options,
                                            std::unique_ptr<engine::Processor> processor) {
  if (processor == nullptr) processor = TestProcessor();
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::move(processor));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return nullptr;
  absl::Status started = (*engine)->Start();
  EXPECT_TRUE(started.ok()) << started;
  return started.ok() ? *std::move(engine) : nullptr;
}

void ProduceRetryRecord(const std::string& topic, int32_t partition, const std::string& key,
                        const engine::RetryMetadata& meta) {
  kafka::ProducerOptions options;
  options.bootstrap_servers = BootstrapServers();
  options.properties = ClientProperties();
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer = kafka::Producer::Create(options);
  ASSERT_TRUE(producer.ok()) << producer.status();
  OutgoingRecord r;
  r.topic = topic;
  r.partition = partition;
  r.key = key;
  r.value = absl::StrCat("v-", key);
  r.headers = engine::WithRetryHeaders({}, meta);
  absl::Mutex mu;
  absl::Status delivery = absl::UnknownError("not delivered");
  ASSERT_TRUE((*producer)
                  ->Produce(r,
                            [&](absl::Status s) {
                              absl::MutexLock lock(&mu);
                              delivery = std::move(s);
                            })
                  .ok());
  ASSERT_TRUE((*producer)->Flush(absl::Seconds(60)).ok());
  (*producer)->Close(absl::Seconds(1));
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(delivery.ok()) << delivery;
}

std::map<int32_t, int64_t> CommittedOffsets(const std::string& group_id, const std::string& topic) {
  absl::StatusOr<std::unique_ptr<kafka::GroupLagProbe>> probe =
      kafka::GroupLagProbe::Create(BootstrapServers(), ClientProperties(), group_id, topic);
  EXPECT_TRUE(probe.ok()) << probe.status();
  if (!probe.ok()) return {};
  absl::StatusOr<std::map<int32_t, int64_t>> committed = (*probe)->Committed(absl::Seconds(30));
  EXPECT_TRUE(committed.ok()) << committed.status();
  return committed.ok() ? *std::move(committed) : std::map<int32_t, int64_t>{};
}

}  // namespace retryd::testing
