// The engine with an asynchronous processor (one that keeps calls in flight,
// as the grpc processor does) against the mock cluster: calls overlap within
// the configured limit, in order keeps one call per partition and the output
// order, a downstream outage pauses intake without spending attempts, and a
// record refused on its own account is still judged.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/processor.h"
#include "server/engine/stats/thread_stats.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::AllAssigned;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::HeaderValue;
using ::retryd::testing::Keys;
using ::retryd::testing::OutOfOrder;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WaitForOutcomes;

// An asynchronous processor run by its own pool of threads. Each call takes
// a latency drawn from the record's offset (so calls end out of order) and
// then decides by key:
//   refused-  always "unavailable", judged permanent once the downstream is
//             known to answer others;
//   new-      OK, with a replacement value and headers;
//   anything else OK, unless the downstream is set down: then unavailable
//             (and its channel is reported not ready).
// It observes what a downstream would: calls in progress at once, overall
// and per partition, and calls made while it was down.
class ScriptedAsyncProcessor : public engine::Processor {
 public:
  ScriptedAsyncProcessor(int max_calls, int threads) : max_calls_(max_calls) {
    for (int i = 0; i < threads; ++i) pool_.emplace_back([this] { Serve(); });
  }
  ~ScriptedAsyncProcessor() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& t : pool_) t.join();
  }

  engine::Outcome Process(const Record&, int) override { return engine::Outcome::Ok(); }
  bool asynchronous() const override { return true; }
  int max_concurrent_calls() const override { return max_calls_; }

  void Start(const Record& record, const engine::AttemptInfo& info,
             std::shared_ptr<engine::Cancellation> cancel, engine::ProcessDone done) override {
    absl::MutexLock lock(&mu_);
    jobs_.push_back({record, info, std::move(cancel), std::move(done)});
  }

  // As a client of a real downstream would: while it is down, its channel
  // is not ready.
  engine::DownstreamHealth health() const override {
    absl::MutexLock lock(&mu_);
    engine::DownstreamHealth health;
    health.channel = down_ ? engine::DownstreamHealth::Channel::kNotReady
                           : engine::DownstreamHealth::Channel::kReady;
    return health;
  }

  void SetDown(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }
  int peak_calls() const {
    absl::MutexLock lock(&mu_);
    return peak_;
  }
  int peak_calls_per_partition() const {
    absl::MutexLock lock(&mu_);
    return peak_per_partition_;
  }
  int calls_while_down() const {
    absl::MutexLock lock(&mu_);
    return calls_while_down_;
  }

 private:
  struct Job {
    Record record;
    engine::AttemptInfo info;
    std::shared_ptr<engine::Cancellation> cancel;
    engine::ProcessDone done;
  };

  void Serve() {
    for (;;) {
      Job job;
      bool down = false;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); };
        mu_.Await(absl::Condition(&ready));
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        down = down_;
        if (down) ++calls_while_down_;
        peak_ = std::max(peak_, ++running_);
        peak_per_partition_ =
            std::max(peak_per_partition_, ++running_per_partition_[job.record.partition]);
      }
      // The call's work.
      absl::SleepFor(absl::Milliseconds(1 + job.record.offset % 7));
      const std::string key = job.record.key.value_or("");
      engine::Outcome outcome = engine::Outcome::Ok();
      if (absl::StartsWith(key, "refused-")) {
        outcome = engine::Outcome::Unavailable("PERMISSION_DENIED: not for you",
                                               engine::Outcome::Kind::kPermanent);
      } else if (down) {
        outcome = engine::Outcome::Unavailable("UNAVAILABLE: connection refused",
                                               engine::Outcome::Kind::kRetriable);
      } else if (absl::StartsWith(key, "new-")) {
        outcome.value = std::optional<std::string>(absl::StrCat("NEW:", *job.record.value));
        outcome.headers = Headers{{"made-by", "scripted"}};
      }
      {
        absl::MutexLock lock(&mu_);
        --running_;
        --running_per_partition_[job.record.partition];
      }
      std::move(job.done)(std::move(outcome));
    }
  }

  const int max_calls_;
  mutable absl::Mutex mu_;  // Guards the fields below.
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int32_t, int> running_per_partition_ ABSL_GUARDED_BY(mu_);
  int peak_per_partition_ ABSL_GUARDED_BY(mu_) = 0;
  int calls_while_down_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> pool_;  // Last: started once the rest exists.
};

std::vector<std::string> NumberedKeys(const std::string& prefix, int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(prefix, i));
  return keys;
}

// Runs an engine over `options` with a ScriptedAsyncProcessor (8 calls per
// thread) until every key of `keys` has its outcome, then stops it. The
// stopped engine goes to `engine`, keeping the processor (`downstream`) alive
// for the test to question.
void RunToTheEnd(const engine::EngineOptions& options, const testing::TestTopics& topics,
                 const std::vector<std::string>& keys, std::unique_ptr<engine::Engine>& engine,
                 ScriptedAsyncProcessor*& downstream) {
  auto processor = std::make_unique<ScriptedAsyncProcessor>(8, 16);
  downstream = processor.get();
  engine = StartEngine(options, std::move(processor));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();
}

TEST(AsyncProcessorTest, InOrderOverlapsCallsAcrossPartitionsOnly) {
  const testing::TestTopics topics = CreateTopics("async-inorder", 4);
  const std::vector<std::string> keys = NumberedKeys("ok-", 1200);
  ProduceKeys(topics.input, keys);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  std::unique_ptr<engine::Engine> engine;
  ScriptedAsyncProcessor* downstream = nullptr;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(options, topics, keys, engine, downstream));

  EXPECT_GT(downstream->peak_calls(), 1) << "calls of different partitions overlap";
  EXPECT_EQ(downstream->peak_calls_per_partition(), 1) << "in order: one call per partition";
  const std::vector<Record> output = ReadAll(topics.output);
  EXPECT_EQ(Keys(output), std::multiset<std::string>(keys.begin(), keys.end()));
  EXPECT_EQ(OutOfOrder(output), 0);
}

TEST(AsyncProcessorTest, UnorderedUsesEveryCallSlotAndReorders) {
  const testing::TestTopics topics = CreateTopics("async-unordered", 4);
  const std::vector<std::string> keys = NumberedKeys("ok-", 1200);
  ProduceKeys(topics.input, keys);
  std::unique_ptr<engine::Engine> engine;
  ScriptedAsyncProcessor* downstream = nullptr;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(TestEngineOptions(topics), topics, keys, engine, downstream));

  // One primary thread: never more than its 8 slots, and more than one
  // call per partition at once.
  EXPECT_LE(downstream->peak_calls(), 8);
  EXPECT_GT(downstream->peak_calls_per_partition(), 1);
  const std::vector<Record> output = ReadAll(topics.output);
  EXPECT_EQ(Keys(output), std::multiset<std::string>(keys.begin(), keys.end()));
  // What in order rules out, and the check above would catch.
  EXPECT_GT(OutOfOrder(output), 0);
}

TEST(AsyncProcessorTest, ReplacementValueAndHeadersReachTheOutput) {
  const testing::TestTopics topics = CreateTopics("async-replace", 2);
  const std::vector<std::string> keys = {"new-1", "ok-2"};
  ProduceKeys(topics.input, keys);
  engine::EngineOptions options = TestEngineOptions(topics);
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<ScriptedAsyncProcessor>(4, 4));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();
  std::map<std::string, Record> by_key;
  for (Record& r : ReadAll(topics.output)) by_key[*r.key] = std::move(r);
  ASSERT_EQ(by_key.size(), 2u);
  EXPECT_EQ(by_key["new-1"].value, "NEW:v-new-1");
  EXPECT_EQ(HeaderValue(by_key["new-1"], "made-by"), "scripted");
  EXPECT_EQ(HeaderValue(by_key["new-1"], "retryd-original-topic"), topics.input);
  EXPECT_EQ(by_key["ok-2"].value, "v-ok-2");
  EXPECT_EQ(HeaderValue(by_key["ok-2"], "made-by"), "");
}

TEST(AsyncProcessorTest, DownstreamOutagePausesIntakeAndSpendsNoAttempt) {
  const testing::TestTopics topics = CreateTopics("async-outage", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  // One attempt in all: a record whose call counted as a failed attempt
  // would be dead-lettered at once.
  options.retry.max_attempts = 1;
  options.downstream = {.outage_after = 3, .probe_initial_ms = 50, .probe_max_ms = 200};
  auto processor = std::make_unique<ScriptedAsyncProcessor>(4, 8);
  ScriptedAsyncProcessor* downstream = processor.get();
  downstream->SetDown(true);
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(processor));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 4); }, absl::Seconds(60)));

  const std::vector<std::string> keys = NumberedKeys("ok-", 2000);
  ProduceKeys(topics.input, keys);
  // Taken for down, and stays down through several probes.
  ASSERT_TRUE(WaitFor([&] { return engine->downstream().down; }, absl::Seconds(30)));
  ASSERT_TRUE(WaitFor([&] { return downstream->calls_while_down() >= 20; }, absl::Seconds(30)));
  EXPECT_TRUE(engine->downstream().down);
  // Every thread stops fetching (all its partitions paused) while it lasts.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const auto& t : engine->Threads()) {
          if (t->state() != engine::ThreadState::kWaitingDownstream) return false;
        }
        return true;
      },
      absl::Seconds(30)));
  // Intake paused: nowhere near one call per record, and no record was
  // judged, so nothing reached any topic.
  EXPECT_LT(engine->Totals().processed, 200);
  EXPECT_EQ(engine->Totals().failed_attempts, 0);
  EXPECT_GT(engine->Totals().unavailable, 0);

  downstream->SetDown(false);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  EXPECT_FALSE(engine->downstream().down);
  EXPECT_GE(engine->downstream().outages, 1);
  engine->Stop();
  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>(keys.begin(), keys.end()));
  EXPECT_TRUE(ReadAll(topics.dlq).empty());
  EXPECT_TRUE(ReadAll(topics.retry).empty());
}

TEST(AsyncProcessorTest, RecordRefusedAloneIsJudgedByItsFallback) {
  const testing::TestTopics topics = CreateTopics("async-refused", 2);
  std::vector<std::string> keys = NumberedKeys("ok-", 300);
  keys.push_back("refused-1");
  ProduceKeys(topics.input, keys);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.downstream = {.outage_after = 3, .probe_initial_ms = 50, .probe_max_ms = 200};
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<ScriptedAsyncProcessor>(4, 8));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();
  std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(Keys(dlq), std::multiset<std::string>{"refused-1"});
  EXPECT_NE(HeaderValue(dlq[0], "retryd-error").find("PERMISSION_DENIED: not for you"),
            std::string::npos);
  EXPECT_EQ(engine->downstream().outages, 0) << "one record refused is not an outage";
}

}  // namespace
}  // namespace retryd
