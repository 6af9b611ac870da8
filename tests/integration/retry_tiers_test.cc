// Tiered retry topics end to end: a record moves through each tier at that
// tier's delay and is dead-lettered after the last; a tier with a long delay
// holds one waiting record per partition whatever its backlog; threads are
// started and stopped per tier. On the mock cluster, and on a real Kafka
// (label kafka).
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/error_reason.h"
#include "server/engine/api/engine.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/stats/thread_stats.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::CreateTopics;
using ::retryd::testing::Keys;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::TestProcessor;
using ::retryd::testing::WaitFor;
using ::testing::HasSubstr;

struct Tiered {
  testing::TestTopics topics;
  std::vector<std::string> tier_topics;
  engine::EngineOptions options;
};

// Three tiers of one attempt each, delays `delays_ms`: the first uses the
// test topics' retry topic, the others topics of their own.
Tiered ThreeTiers(const std::string& name, const std::vector<int64_t>& delays_ms) {
  Tiered t;
  t.topics = CreateTopics(name);
  const testing::TestTopics more = CreateTopics(name + "-tiers");
  t.tier_topics = {t.topics.retry, more.retry, more.dlq};
  t.options = TestEngineOptions(t.topics);
  t.options.retry.topic.clear();
  t.options.retry.threads = 1;
  for (size_t i = 0; i < 3; ++i) {
    t.options.retry.tiers.push_back(
        {.topic = t.tier_topics[i], .delay_ms = delays_ms[i], .max_attempts = 1, .threads = -1});
  }
  return t;
}

// `threads` threads run and each has been assigned partitions (AllAssigned
// counts per role, and each tier's threads share one role).
bool EveryThreadAssigned(const engine::Engine& engine, size_t threads) {
  const auto running = engine.Threads();
  if (running.size() != threads) return false;
  for (const auto& s : running) {
    if (s->partitions().empty()) return false;
  }
  return true;
}

int64_t HeaderInt(const Record& r, std::string_view key) {
  int64_t v = -1;
  EXPECT_TRUE(absl::SimpleAtoi(testing::HeaderValue(r, std::string(key)), &v)) << key;
  return v;
}

TEST(TieredRetryTest, RecordsMoveThroughEachTierAtItsDelayThenToTheDeadLetterTopic) {
  const std::vector<int64_t> delays = {200, 600, 1000};
  Tiered t = ThreeTiers("tiers", delays);
  std::unique_ptr<engine::Engine> engine = StartEngine(t.options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  // One primary and a retry thread per tier, each reading its own topic.
  ASSERT_TRUE(WaitFor([&] { return EveryThreadAssigned(*engine, 4); }, absl::Seconds(60)));
  std::map<int, int> threads_per_tier;
  for (const auto& s : engine->Threads()) {
    if (s->role() == engine::ThreadRole::kRetry) ++threads_per_tier[s->tier()];
  }
  EXPECT_EQ(threads_per_tier, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_EQ(engine->options().retry.max_attempts, 4) << "1 + three tiers of 1";

  // flaky- fails twice (the primary's attempt and the first tier's) and
  // succeeds in the second tier; doomed- fails every attempt.
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) {
    keys.push_back(absl::StrCat("flaky-", i));
    keys.push_back(absl::StrCat("doomed-", i));
    keys.push_back(absl::StrCat("ok-", i));
  }
  ProduceKeys(t.topics.input, keys);
  ASSERT_TRUE(WaitFor(
      [&] { return ReadAll(t.topics.output).size() >= 60 && ReadAll(t.topics.dlq).size() >= 30; },
      absl::Seconds(90)));
  engine->Stop();

  std::multiset<std::string> flaky, doomed, ok;
  for (const std::string& k : keys) {
    (absl::StartsWith(k, "flaky-")    ? flaky
     : absl::StartsWith(k, "doomed-") ? doomed
                                      : ok)
        .insert(k);
  }
  std::multiset<std::string> both = flaky;
  both.insert(doomed.begin(), doomed.end());
  std::multiset<std::string> output = flaky;
  output.insert(ok.begin(), ok.end());
  const std::vector<Record> dlq = ReadAll(t.topics.dlq);
  EXPECT_EQ(Keys(ReadAll(t.topics.output)), output);
  EXPECT_EQ(Keys(dlq), doomed);
  // Each tier saw the records that failed the attempt before it, once.
  std::vector<std::vector<Record>> tiers;
  for (const std::string& topic : t.tier_topics) tiers.push_back(ReadAll(topic));
  EXPECT_EQ(Keys(tiers[0]), both);
  EXPECT_EQ(Keys(tiers[1]), both);
  EXPECT_EQ(Keys(tiers[2]), doomed);

  // In each tier a record is due its tier's delay after the failure that
  // sent it there (written just before it was produced), and it left for
  // the next tier, or the DLQ, only once due.
  std::map<std::string, const Record*> previous;  // By key: its record in the tier before.
  for (size_t i = 0; i < tiers.size(); ++i) {
    for (const Record& r : tiers[i]) {
      SCOPED_TRACE(absl::StrCat("tier ", i, " ", *r.key));
      EXPECT_EQ(HeaderInt(r, "retryd-attempt"), static_cast<int64_t>(i) + 2);
      const int64_t due = HeaderInt(r, "retryd-due-ms");
      EXPECT_LE(due - r.timestamp_ms, delays[i]);
      EXPECT_GT(due - r.timestamp_ms, delays[i] - 1000);
      if (i > 0) {
        const Record* before = previous.at(*r.key);
        EXPECT_GE(r.timestamp_ms, HeaderInt(*before, "retryd-due-ms"))
            << "left tier " << i - 1 << " before it was due";
      }
    }
    previous.clear();
    for (const Record& r : tiers[i]) previous[*r.key] = &r;
  }
  for (const Record& r : dlq) {
    EXPECT_EQ(HeaderInt(r, "retryd-attempt"), 4) << *r.key;
    EXPECT_THAT(testing::HeaderValue(r, "retryd-error"), HasSubstr("gave up after attempt 4 of 4"));
    EXPECT_GE(r.timestamp_ms, HeaderInt(*previous.at(*r.key), "retryd-due-ms"));
  }
}

TEST(TieredRetryTest, ASlowTierHoldsOneWaitingRecordPerPartition) {
  // The last tier waits ten minutes: its records pile up in its topic, and
  // its thread holds only the first of each partition.
  Tiered t = ThreeTiers("tiers-slow", {50, 50, 600000});
  t.options.retry.lookahead = 1000;  // What a backoff tier would hold.
  std::unique_ptr<engine::Engine> engine = StartEngine(t.options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return EveryThreadAssigned(*engine, 4); }, absl::Seconds(60)));
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back(absl::StrCat("doomed-", i));
  ProduceKeys(t.topics.input, keys);
  std::shared_ptr<const engine::ThreadStats> slow;
  for (const auto& s : engine->Threads()) {
    if (s->tier() == 2) slow = s;
  }
  ASSERT_NE(slow, nullptr);
  // Every record has reached the slow tier and the backlog says so.
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<std::vector<int64_t>> each = engine->MeasureTierBacklogs(absl::Seconds(5));
        return each.ok() && (*each)[2] == 300 && (*each)[0] == 0 && (*each)[1] == 0;
      },
      absl::Seconds(90)));
  // Its thread holds one record per partition it was assigned, waiting.
  ASSERT_TRUE(WaitFor(
      [&] {
        return slow->scheduled.load() == static_cast<int64_t>(slow->partitions().size()) &&
               !slow->partitions().empty();
      },
      absl::Seconds(30)));
  const int64_t held = slow->scheduled.load();
  EXPECT_LE(held, 3) << "three partitions";
  const std::vector<int64_t> backlogs = engine->TierBacklogs(engine->Threads());
  EXPECT_EQ(backlogs, (std::vector<int64_t>{0, 0, 300}));
  EXPECT_TRUE(ReadAll(t.topics.dlq).empty()) << "nothing is due before ten minutes";
  engine->Stop();
}

TEST(TieredRetryTest, ThreadsAreStartedAndStoppedPerTier) {
  Tiered t = ThreeTiers("tiers-threads", {100, 100, 100});
  t.options.retry.max_threads = 2;
  t.options.retry.tiers[1].threads = 0;
  std::unique_ptr<engine::Engine> engine = StartEngine(t.options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return EveryThreadAssigned(*engine, 3); }, absl::Seconds(60)));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<std::vector<int>> started = engine->StartRetryThreads(2, deadline, 1);
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_EQ(started->size(), 2u);
  for (const auto& s : engine->Threads()) {
    if (s->id() == (*started)[0] || s->id() == (*started)[1]) EXPECT_EQ(s->tier(), 1);
  }
  // max_threads counts per tier: the first tier still has room for one.
  absl::StatusOr<std::vector<int>> more = engine->StartRetryThreads(1, deadline, 1);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(more.status()), reason::kMaxThreadsReached);
  absl::StatusOr<std::vector<int>> first = engine->StartRetryThreads(1, deadline, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  // A stop by count takes the tier's most recent threads, no other's.
  absl::StatusOr<std::vector<int>> stopped = engine->StopRetryThreads(5, true, deadline, 1);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(std::set<int>(stopped->begin(), stopped->end()),
            std::set<int>(started->begin(), started->end()));
  // A desired count per tier.
  engine::RetryThreadChange set{
      .kind = engine::RetryThreadChange::Kind::kSetCount, .count = 1, .tier = 0};
  absl::StatusOr<engine::RetryThreadChangeResult> result =
      engine->ChangeRetryThreads(set, deadline);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stopped, std::vector<int>{(*first)[0]});
  absl::StatusOr<std::vector<int>> nowhere = engine->StartRetryThreads(1, deadline, 3);
  EXPECT_EQ(nowhere.status().code(), absl::StatusCode::kInvalidArgument);
  std::map<int, int> per_tier;
  for (const auto& s : engine->Threads()) {
    if (s->role() == engine::ThreadRole::kRetry) ++per_tier[s->tier()];
  }
  EXPECT_EQ(per_tier, (std::map<int, int>{{0, 1}, {2, 1}}));
  engine->Stop();
}

TEST(TieredRetryTest, KeyOrderIsRefusedWithTiers) {
  Tiered t = ThreeTiers("tiers-key", {100, 100, 100});
  engine::EngineOptions key = t.options;
  key.ordering = engine::Ordering::kKey;
  absl::StatusOr<std::unique_ptr<engine::Engine>> made =
      engine::Engine::Create(key, TestProcessor());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(made.status().message(), HasSubstr("key order with retry tiers"));
  std::unique_ptr<engine::Engine> engine = StartEngine(t.options, TestProcessor());
  ASSERT_NE(engine, nullptr);
  absl::StatusOr<engine::SetOrderingResult> switched =
      engine->SetOrderingMode(engine::Ordering::kKey, false, absl::Now() + absl::Seconds(30));
  EXPECT_EQ(switched.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(switched.status()), reason::kRetryTiersConfigured);
  EXPECT_EQ(engine->ordering(), engine::Ordering::kUnordered);
  engine->Stop();
}

}  // namespace
}  // namespace retryd
