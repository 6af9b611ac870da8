// Key order (Ordering::kKey) against the mock cluster: records of one key
// complete in input order across the primary and the retry threads, while
// other keys flow; judged by a separate reader of the output topic.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "retryd/v1/config.pb.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/processor.h"
#include "server/engine/stats/thread_stats.h"
#include "server/processors/simulate.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::CreateTopics;
using ::retryd::testing::HeaderValue;
using ::retryd::testing::KeysOutOfOrder;
using ::retryd::testing::LostRecords;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ProduceRecords;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::TestTopics;
using ::retryd::testing::WaitFor;

constexpr absl::Duration kDone = absl::Seconds(120);

// `records` records over `keys` keys, round after round ("key-0", "key-1",
// ..., "key-0", ...), so each key's records are spread over the input.
std::vector<std::string> RoundsOfKeys(int records, int keys) {
  std::vector<std::string> out;
  out.reserve(records);
  for (int i = 0; i < records; ++i) out.push_back(absl::StrCat("key-", i % keys));
  return out;
}

// Fails 10 % of attempts retriably, each decided by the record and the
// attempt alone: the same workload fails the same way in every mode.
std::unique_ptr<engine::Processor> TenPercentFlaky() {
  retryd::v1::SimulateConfig config;
  config.set_seed(11);
  config.set_latency_ms(0);
  config.set_transient_failure_rate(0.1);
  return std::make_unique<SimulateProcessor>(config);
}

struct WorkloadRun {
  std::vector<std::string> out_of_order;  // Keys.
  int64_t lost = -1;
  engine::EngineTotals totals;
};

// Runs the 10 %-flaky workload (20,000 records over 500 keys, 4 retry
// threads) in `ordering` until every input record has an outcome; retries
// wait `backoff_ms` (the test default when 0).
WorkloadRun RunFlakyWorkload(engine::Ordering ordering, int64_t backoff_ms = 0) {
  const TestTopics topics = CreateTopics(absl::StrCat("key-", engine::OrderingName(ordering)), 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = ordering;
  options.retry.threads = 4;
  options.retry.max_attempts = 6;
  if (backoff_ms > 0)
    options.retry.backoff = {.initial_ms = backoff_ms, .multiplier = 1.0, .max_ms = backoff_ms};
  ProduceKeys(topics.input, RoundsOfKeys(20000, 500));
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TenPercentFlaky());
  WorkloadRun run;
  if (engine == nullptr) return run;
  const std::vector<Record> input = ReadAll(topics.input);
  const bool done = WaitFor(
      [&] {
        const engine::EngineTotals t = engine->Totals();
        if (t.in_flight != 0 || t.succeeded + t.dead_lettered < 20000) return false;
        return LostRecords(input, ReadAll(topics.output), ReadAll(topics.dlq)) == 0;
      },
      kDone);
  EXPECT_TRUE(done) << engine::OrderingName(ordering) << ": not every record reached an outcome";
  engine->Stop();
  const std::vector<Record> output = ReadAll(topics.output);
  run.out_of_order = KeysOutOfOrder(output);
  run.lost = LostRecords(input, output, ReadAll(topics.dlq));
  run.totals = engine->Totals();
  return run;
}

TEST(KeyOrderTest, EachKeyCompletesInInputOrderWhileRetryThreadsRunInParallel) {
  const WorkloadRun key = RunFlakyWorkload(engine::Ordering::kKey);
  EXPECT_EQ(key.lost, 0);
  EXPECT_TRUE(key.out_of_order.empty())
      << key.out_of_order.size() << " keys out of order, e.g. " << key.out_of_order.front();
  // The mechanism was engaged: records failed, went to the retry topic, and
  // later records of their keys followed them there unprocessed.
  EXPECT_GT(key.totals.sent_to_retry, 1000);
  EXPECT_GT(key.totals.followed, 0);

  // The same workload unordered reorders keys: the check above can fail.
  // Its retries wait a second, so a retried record comes back after the
  // next records of its key (500 records later) however slowly the primary
  // runs (ThreadSanitizer), not only when it runs fast.
  const WorkloadRun unordered = RunFlakyWorkload(engine::Ordering::kUnordered, /*backoff_ms=*/1000);
  EXPECT_EQ(unordered.lost, 0);
  EXPECT_GT(unordered.out_of_order.size(), 10u);
  EXPECT_EQ(unordered.totals.followed, 0);
}

// Fails the first attempt of every record of a flaky- key; holds every
// later attempt until Release(), then succeeds. Other keys succeed at once.
class HeldRetries : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override {
    if (!absl::StartsWith(record.key.value_or(""), "flaky-")) return engine::Outcome::Ok();
    if (attempt == 1) return engine::Outcome::Retriable("flaky");
    released_.WaitForNotificationWithTimeout(absl::Seconds(60));
    return engine::Outcome::Ok();
  }
  void Release() { released_.Notify(); }

 private:
  absl::Notification released_;
};

TEST(KeyOrderTest, HealthyKeysAreNotHeldUpByFlakyOnes) {
  const TestTopics topics = CreateTopics("key-healthy", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kKey;
  options.retry.threads = 4;
  std::vector<std::string> keys;
  for (int round = 0; round < 10; ++round) {
    for (int k = 0; k < 500; ++k) keys.push_back(absl::StrCat(k % 10 == 0 ? "flaky-" : "ok-", k));
  }
  ProduceKeys(topics.input, keys);
  auto processor = std::make_unique<HeldRetries>();
  HeldRetries* retries = processor.get();
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(processor));
  ASSERT_NE(engine, nullptr);

  // Every healthy record is done while no flaky record's retry has ended.
  auto healthy_done = [&] {
    int64_t healthy = 0;
    for (const Record& r : ReadAll(topics.output)) {
      if (absl::StartsWith(r.key.value_or(""), "ok-")) ++healthy;
    }
    return healthy >= 4500;
  };
  // And every record of a flaky key read: the first failed, the rest followed.
  const bool done =
      WaitFor([&] { return healthy_done() && engine->Totals().followed >= 450; }, kDone);
  const std::vector<Record> early = ReadAll(topics.output);
  const engine::ParkedKeysSummary parked = engine->ParkedKeys();
  const engine::EngineTotals held = engine->Totals();
  retries->Release();
  ASSERT_TRUE(done) << "healthy keys were held up";
  for (const Record& r : early) {
    EXPECT_FALSE(absl::StartsWith(r.key.value_or(""), "flaky-")) << "a flaky record was done";
  }
  EXPECT_EQ(parked.keys, 50);
  EXPECT_EQ(parked.records, 500);  // Each flaky key's ten records.
  EXPECT_EQ(held.followed, 450);   // All but the first of each flaky key.

  const std::vector<Record> input = ReadAll(topics.input);
  ASSERT_TRUE(WaitFor(
      [&] { return LostRecords(input, ReadAll(topics.output), ReadAll(topics.dlq)) == 0; }, kDone));
  // Released on acknowledgement: every parked key goes once its records are done.
  EXPECT_TRUE(WaitFor([&] { return engine->ParkedKeys().keys == 0; }, kDone));
  engine->Stop();
  EXPECT_TRUE(KeysOutOfOrder(ReadAll(topics.output)).empty());
}

// Waits until every record of `input` has an outcome in `topics`; then no
// record of `engines` is in flight.
bool AllDone(const TestTopics& topics, const std::vector<Record>& input,
             const std::vector<engine::Engine*>& engines) {
  return WaitFor(
      [&] {
        for (engine::Engine* engine : engines) {
          if (engine->Totals().in_flight != 0) return false;
        }
        return LostRecords(input, ReadAll(topics.output), ReadAll(topics.dlq)) == 0;
      },
      kDone);
}

// Fails the first attempt of every record of a flaky- key, and its later
// attempts too until Release(); other keys succeed at once.
class FailingUntilReleased : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override {
    if (!absl::StartsWith(record.key.value_or(""), "flaky-")) return engine::Outcome::Ok();
    if (attempt == 1 || !released_.HasBeenNotified()) return engine::Outcome::Retriable("not yet");
    return engine::Outcome::Ok();
  }
  void Release() { released_.Notify(); }

 private:
  absl::Notification released_;
};

TEST(KeyOrderTest, SwitchingToKeyOrderAtRuntimeParksTheKeysInTheRetryTopic) {
  const TestTopics topics = CreateTopics("key-switch", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 2;
  options.retry.max_attempts = 1000;
  // Retry threads read (and send back) their failing records often, so
  // many are on their way back to the retry topic when the switch comes.
  options.kafka_properties["fetch.wait.max.ms"] = "100";
  std::vector<std::string> first, second;
  for (int k = 0; k < 200; ++k) {
    first.push_back(absl::StrCat(k % 4 == 0 ? "flaky-" : "ok-", k));
    second.push_back(first.back());
  }
  ProduceKeys(topics.input, first);
  auto processor = std::make_unique<FailingUntilReleased>();
  FailingUntilReleased* failing = processor.get();
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(processor));
  ASSERT_NE(engine, nullptr);
  // Every flaky record is in the retry topic, failing again and again.
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().sent_to_retry >= 100; }, kDone));

  absl::StatusOr<engine::SetOrderingResult> switched =
      engine->SetOrderingMode(engine::Ordering::kKey, false, absl::Now() + kDone);
  ASSERT_TRUE(switched.ok()) << switched.status();
  EXPECT_EQ(switched->ordering, engine::Ordering::kKey);
  // Every flaky key, those whose record a retry thread was sending back to
  // the retry topic at that very moment included.
  EXPECT_EQ(switched->parked_keys, 50);
  EXPECT_EQ(engine->ordering(), engine::Ordering::kKey);

  // Each parked key's second record follows the first through the retry
  // topic.
  ProduceKeys(topics.input, second);
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().followed >= switched->parked_keys; }, kDone));
  failing->Release();
  const std::vector<Record> input = ReadAll(topics.input);
  ASSERT_TRUE(AllDone(topics, input, {engine.get()}));
  EXPECT_TRUE(WaitFor([&] { return engine->ParkedKeys().keys == 0; }, kDone));
  const std::vector<std::string> out_of_order = KeysOutOfOrder(ReadAll(topics.output));
  EXPECT_TRUE(out_of_order.empty()) << out_of_order.size() << " keys out of order";

  switched = engine->SetOrderingMode(engine::Ordering::kUnordered, false, absl::Now() + kDone);
  ASSERT_TRUE(switched.ok()) << switched.status();
  EXPECT_EQ(engine->ordering(), engine::Ordering::kUnordered);
  // drain_retries belongs to a switch to IN_ORDER only.
  EXPECT_EQ(engine->SetOrderingMode(engine::Ordering::kKey, true).status().code(),
            absl::StatusCode::kInvalidArgument);
  engine->Stop();
}

// Fails every attempt of a flaky- record until Release(); other keys
// succeed. The first retry attempt of a flaky- record waits inside the call
// until LetGo() (Holding() tells it waits), then fails.
class RetryHeldAcrossTheSwitch : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override {
    if (!absl::StartsWith(record.key.value_or(""), "flaky-")) return engine::Outcome::Ok();
    if (attempt > 1) {
      retries_.fetch_add(1);
      if (!holding_.HasBeenNotified()) {
        holding_.Notify();
        let_go_.WaitForNotificationWithTimeout(absl::Seconds(60));
      }
    }
    return released_.HasBeenNotified() ? engine::Outcome::Ok()
                                       : engine::Outcome::Retriable("not yet");
  }
  bool Holding() { return holding_.WaitForNotificationWithTimeout(kDone); }
  void LetGo() { let_go_.Notify(); }
  void Release() { released_.Notify(); }
  int64_t retries() const { return retries_.load(); }

 private:
  absl::Notification holding_, let_go_, released_;
  std::atomic<int64_t> retries_{0};
};

// A retry thread in the middle of a call when key order comes on: the
// record it fails again stays where it is in the retry topic, parked, and
// the key's next record follows it. (Sent back to the retry topic instead,
// the record would be committed past at its old place, its key released
// while it is still there, and the key's next record would overtake it.)
TEST(KeyOrderTest, ARecordFailingAgainAsKeyOrderComesOnStaysParked) {
  const TestTopics topics = CreateTopics("key-switch-held", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.max_attempts = 1000;
  options.kafka_properties["fetch.wait.max.ms"] = "100";
  auto records = [&](const std::string& value) {
    std::vector<OutgoingRecord> out;
    for (const char* key : {"flaky-0", "ok-1"}) {
      OutgoingRecord r;
      r.topic = topics.input;
      r.partition = 0;
      r.key = key;
      r.value = value;
      out.push_back(std::move(r));
    }
    return out;
  };
  ProduceRecords(records("first"));
  auto processor = std::make_unique<RetryHeldAcrossTheSwitch>();
  RetryHeldAcrossTheSwitch* held = processor.get();
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(processor));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(held->Holding());

  absl::StatusOr<engine::SetOrderingResult> switched =
      engine->SetOrderingMode(engine::Ordering::kKey, false, absl::Now() + kDone);
  ASSERT_TRUE(switched.ok()) << switched.status();
  EXPECT_EQ(switched->parked_keys, 1);
  held->LetGo();
  // Many attempts later, past several commits and sweeps of the parked
  // keys (every 2 s), the key is still parked.
  const int64_t retries = held->retries();
  ASSERT_TRUE(WaitFor([&] { return held->retries() >= retries + 30; }, kDone));
  EXPECT_EQ(engine->ParkedKeys().keys, 1);

  ProduceRecords(records("second"));
  // ok-1's second record is done once the primary has read flaky-0's.
  auto second_of_ok = [&] {
    for (const Record& r : ReadAll(topics.output)) {
      if (r.key == "ok-1" && r.value == "second") return true;
    }
    return false;
  };
  ASSERT_TRUE(WaitFor(second_of_ok, kDone));
  EXPECT_EQ(engine->Totals().followed, 1);
  held->Release();
  const std::vector<Record> input = ReadAll(topics.input);
  ASSERT_TRUE(AllDone(topics, input, {engine.get()}));
  engine->Stop();
  const std::vector<std::string> out_of_order = KeysOutOfOrder(ReadAll(topics.output));
  EXPECT_TRUE(out_of_order.empty()) << out_of_order.size() << " keys out of order";
}

// Fails a record whose value is "poison" every time; the rest succeed.
class PoisonValue : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int) override {
    return record.value == "poison" ? engine::Outcome::Retriable("poisoned")
                                    : engine::Outcome::Ok();
  }
};

TEST(KeyOrderTest, DeadLetterRecordFreesAParkedKey) {
  const TestTopics topics = CreateTopics("key-stuck", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kKey;
  options.retry.max_attempts = 1000;
  std::vector<OutgoingRecord> records;
  for (const char* value : {"poison", "after-1", "after-2"}) {
    OutgoingRecord r;
    r.topic = topics.input;
    r.partition = 0;
    r.key = "k";
    r.value = value;
    records.push_back(std::move(r));
  }
  ProduceRecords(records);
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::make_unique<PoisonValue>());
  ASSERT_NE(engine, nullptr);

  // The poison record is retried in place by a retry thread; the two after
  // it followed it there and wait behind it, PARKED.
  auto parked_behind = [&] {
    int parked = 0;
    for (const engine::InFlightRecord& r : engine->ListInFlight(10, absl::Now() + kDone).records) {
      if (r.state == engine::InFlightState::kParked && r.key == "k") ++parked;
    }
    return parked;
  };
  ASSERT_TRUE(WaitFor([&] { return parked_behind() == 2; }, kDone));
  EXPECT_EQ(engine->ParkedKeys().keys, 1);
  EXPECT_TRUE(ReadAll(topics.output).empty());

  absl::StatusOr<int> freed = engine->DeadLetterRecord({topics.input, 0, 0}, absl::Now() + kDone);
  ASSERT_TRUE(freed.ok()) << freed.status();
  ASSERT_TRUE(WaitFor([&] { return ReadAll(topics.output).size() >= 2; }, kDone));
  const std::vector<Record> output = ReadAll(topics.output);
  EXPECT_EQ(output[0].value, "after-1");
  EXPECT_EQ(output[1].value, "after-2");
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].value, "poison");
  EXPECT_TRUE(absl::StrContains(HeaderValue(dlq[0], "retryd-error"), "by an operator"));
  EXPECT_TRUE(WaitFor([&] { return engine->ParkedKeys().keys == 0; }, kDone));
  engine->Stop();
}

// A restart mid-run: the engine that follows has none of the first one's
// memory of parked keys; it learns them from the retry topic.
TEST(KeyOrderTest, KeyOrderHoldsAcrossARestartMidRun) {
  const TestTopics topics = CreateTopics("key-restart", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kKey;
  options.retry.threads = 2;
  options.retry.max_attempts = 6;
  // Long enough that many keys are parked when the first engine stops.
  options.retry.backoff = {.initial_ms = 500, .multiplier = 2.0, .max_ms = 2000};
  ProduceKeys(topics.input, RoundsOfKeys(10000, 500));

  std::unique_ptr<engine::Engine> first = StartEngine(options, TenPercentFlaky());
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(WaitFor([&] { return first->Totals().succeeded >= 5000; }, kDone));
  first->Stop();
  const int64_t parked_at_stop = first->ParkedKeys().keys;

  std::unique_ptr<engine::Engine> second = StartEngine(options, TenPercentFlaky());
  ASSERT_NE(second, nullptr);
  // It learned what the first left parked before it processed anything;
  // the records that come now for those keys follow the parked ones.
  ASSERT_TRUE(WaitFor([&] { return second->ParkedKeys().keys > 0; }, kDone));
  ProduceKeys(topics.input, RoundsOfKeys(10000, 500));
  const std::vector<Record> input = ReadAll(topics.input);
  ASSERT_TRUE(AllDone(topics, input, {second.get()}));
  second->Stop();
  EXPECT_GT(parked_at_stop, 0);
  EXPECT_GT(second->Totals().followed, 0);
  const std::vector<std::string> out_of_order = KeysOutOfOrder(ReadAll(topics.output));
  EXPECT_TRUE(out_of_order.empty()) << out_of_order.size() << " keys out of order";
}

// Two engines share the groups, as two processes do: each has its own
// memory of parked keys, and Kafka is all they share. Partitions move from
// one to the other mid-run; records parked by one are retried by the
// other's retry threads.
TEST(KeyOrderTest, TwoEnginesSharingTheGroupsKeepKeyOrder) {
  const TestTopics topics = CreateTopics("key-two", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kKey;
  options.retry.threads = 2;
  options.retry.max_attempts = 6;
  // The same keys in both halves: the second half's records follow keys
  // that the first half parked, whichever engine reads them.
  const std::vector<std::string> keys = RoundsOfKeys(20000, 500);
  ProduceKeys(topics.input, std::vector<std::string>(keys.begin(), keys.begin() + 10000));

  std::unique_ptr<engine::Engine> a = StartEngine(options, TenPercentFlaky());
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitFor([&] { return a->Totals().sent_to_retry >= 200; }, kDone));
  std::unique_ptr<engine::Engine> b = StartEngine(options, TenPercentFlaky());
  ASSERT_NE(b, nullptr);
  // The second half only once B has its share of the input partitions (and
  // A gave up the rest): B consumes part of it however fast A is.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto primary_partitions = [](const engine::Engine& e) {
          size_t n = 0;
          for (const auto& t : e.Threads()) {
            if (t->role() == engine::ThreadRole::kPrimary) n += t->partitions().size();
          }
          return n;
        };
        const size_t in_b = primary_partitions(*b);
        return in_b > 0 && in_b + primary_partitions(*a) == 4;
      },
      kDone));
  ProduceKeys(topics.input, std::vector<std::string>(keys.begin() + 10000, keys.end()));
  const std::vector<Record> input = ReadAll(topics.input);
  ASSERT_EQ(input.size(), keys.size());
  ASSERT_TRUE(AllDone(topics, input, {a.get(), b.get()}));
  // Each engine's parked keys are released, also those whose records the
  // other engine's retry threads completed (seen through the retry group's
  // commits).
  EXPECT_TRUE(
      WaitFor([&] { return a->ParkedKeys().keys == 0 && b->ParkedKeys().keys == 0; }, kDone))
      << a->ParkedKeys().keys << " and " << b->ParkedKeys().keys << " keys still parked";
  a->Stop();
  b->Stop();
  EXPECT_GT(a->Totals().consumed, 0);
  EXPECT_GT(b->Totals().consumed, 0);
  const std::vector<std::string> out_of_order = KeysOutOfOrder(ReadAll(topics.output));
  EXPECT_TRUE(out_of_order.empty()) << out_of_order.size() << " keys out of order";
}

}  // namespace
}  // namespace retryd
