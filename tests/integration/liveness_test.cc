// Nothing stalls for good: a partition paused for any reason is resumed
// across rebalances, a retry record due far in the future is brought
// forward, and a slow processor does not cost a thread its group membership.
// Each test judges what a user sees: keys in the output and dead-letter
// topics, and what the groups committed.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/engine/api/engine.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/stats/thread_stats.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::AllAssigned;
using ::retryd::testing::CommittedOffsets;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::Keys;
using ::retryd::testing::MissingKeys;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ProduceRetryRecord;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::TestProcessor;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WaitForOutcomes;

// The largest `scheduled` gauge (records held until due, or queued behind a
// held record) among `engine`'s threads of `role`.
int64_t MaxScheduled(const engine::Engine& engine, engine::ThreadRole role) {
  int64_t most = 0;
  for (const auto& s : engine.Threads()) {
    if (s->role() == role) most = std::max(most, s->scheduled.load());
  }
  return most;
}

// Every key in the output or the DLQ, however many engines did the work.
::testing::AssertionResult AllKeysDone(const testing::TestTopics& topics,
                                       const std::vector<std::string>& keys) {
  std::vector<std::string> missing = keys;
  if (WaitFor([&] { return (missing = MissingKeys(topics, keys)).empty(); }, absl::Seconds(120))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << missing.size() << " of " << keys.size() << " keys have no outcome after 120 s, e.g. "
         << missing.front();
}

std::vector<std::string> NumberedKeys(const std::string& prefix, int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(prefix, i));
  return keys;
}

// A retry thread pauses its one partition once `lookahead` records wait for
// their due time. librdkafka keeps that pause across unassign and assign, so
// a rebalance while it is paused must not leave the partition paused with
// nobody to resume it.
TEST(LivenessTest, RetryPartitionPausedAtLookaheadResumesAfterRebalance) {
  const testing::TestTopics topics = CreateTopics("lookahead-rebalance", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_threads = 2;
  options.retry.lookahead = 2;
  options.retry.backoff = {.initial_ms = 2000, .multiplier = 1.0, .max_ms = 2000};
  std::unique_ptr<engine::Engine> engine = StartEngine(options);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 1); }, absl::Seconds(60)));

  const std::vector<std::string> keys = NumberedKeys("flaky-", 30);
  ProduceKeys(topics.input, keys);
  // The look-ahead is full: the retry partition is paused.
  ASSERT_TRUE(WaitFor([&] { return MaxScheduled(*engine, engine::ThreadRole::kRetry) >= 2; },
                      absl::Seconds(60)));

  absl::StatusOr<std::vector<int>> started =
      engine->StartRetryThreads(1, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(started.ok()) << started.status();
  absl::StatusOr<std::vector<int>> stopped =
      engine->StopRetryThreadsById(*started, /*graceful=*/true);
  ASSERT_TRUE(stopped.ok()) << stopped.status();

  EXPECT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();
}

// In order, a primary stops fetching a partition once `lookahead` records
// wait behind a held one. A second instance joining and leaving the group
// rebalances it; the partition must flow again afterwards.
TEST(LivenessTest, InOrderPartitionPausedAtLookaheadResumesAfterRebalance) {
  const testing::TestTopics topics = CreateTopics("inorder-rebalance", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  options.retry.lookahead = 2;
  // Long enough that the flaky record is still held when the group changes.
  options.retry.backoff = {.initial_ms = 5000, .multiplier = 1.0, .max_ms = 5000};
  std::unique_ptr<engine::Engine> first = StartEngine(options);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*first, 1); }, absl::Seconds(60)));

  std::vector<std::string> keys = {"flaky-0"};
  for (const std::string& k : NumberedKeys("ok-", 20)) keys.push_back(k);
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(WaitFor([&] { return MaxScheduled(*first, engine::ThreadRole::kPrimary) >= 2; },
                      absl::Seconds(60)));

  std::unique_ptr<engine::Engine> second = StartEngine(options);
  ASSERT_NE(second, nullptr);
  for (const auto& s : second->Threads()) {
    ASSERT_TRUE(s->joined.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  second->Stop();

  EXPECT_TRUE(AllKeysDone(topics, keys));
  first->Stop();
}

// A drain (SetInOrder with drain_retries) pauses every primary's input
// while the retry threads empty the backlog. Another instance joining and
// leaving the primary group meanwhile rebalances the paused partitions;
// once the drain is over, input must flow again.
TEST(LivenessTest, InputPausedForADrainResumesAfterRebalance) {
  const testing::TestTopics topics = CreateTopics("drain-rebalance", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  // Long enough that the drain is still going when the group changes.
  options.retry.backoff = {.initial_ms = 4000, .multiplier = 1.0, .max_ms = 4000};
  std::unique_ptr<engine::Engine> first = StartEngine(options);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*first, 1); }, absl::Seconds(60)));
  const std::vector<std::string> flaky = NumberedKeys("flaky-", 5);
  ProduceKeys(topics.input, flaky);
  ASSERT_TRUE(WaitFor([&] { return first->Totals().sent_to_retry >= 5; }, absl::Seconds(60)));

  absl::StatusOr<engine::SetOrderingResult> drained = absl::UnknownError("not run");
  std::thread drain([&] {
    drained = first->SetInOrder(true, /*drain_retries=*/true, absl::Now() + absl::Seconds(90));
  });
  // The drain paused the primary's input.
  const bool paused = WaitFor(
      [&] {
        for (const auto& s : first->Threads()) {
          if (s->role() == engine::ThreadRole::kPrimary &&
              s->state() == engine::ThreadState::kPaused)
            return true;
        }
        return false;
      },
      absl::Seconds(30));
  engine::EngineOptions other = options;
  other.retry.threads = 0;
  std::unique_ptr<engine::Engine> second = paused ? StartEngine(other) : nullptr;
  if (second != nullptr) {
    for (const auto& s : second->Threads()) {
      EXPECT_TRUE(s->joined.WaitForNotificationWithTimeout(absl::Seconds(60)));
    }
    second->Stop();
  }
  drain.join();
  ASSERT_TRUE(paused) << "the drain never paused the input";
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(drained.ok()) << drained.status();

  const std::vector<std::string> later = NumberedKeys("ok-", 10);
  ProduceKeys(topics.input, later);
  EXPECT_TRUE(AllKeysDone(topics, later));
  first->Stop();
}

// A retry record due in the year 2100 (a foreign writer, a skewed clock) is
// due at most retry.backoff.max_ms after it is read, and its partition's
// commit moves past it.
TEST(LivenessTest, FarFutureRetryRecordIsBroughtForward) {
  const testing::TestTopics topics = CreateTopics("far-future", 1);
  engine::RetryMetadata meta;
  meta.attempt = 2;
  meta.due_ms = 4102444800000;  // 2100-01-01.
  meta.first_failure_ms = absl::ToUnixMillis(absl::Now());
  meta.original_topic = topics.input;
  meta.original_partition = 0;
  meta.original_offset = 0;
  meta.original_timestamp_ms = meta.first_failure_ms;
  ProduceRetryRecord(topics.retry, 0, "ok-far", meta);

  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.backoff.max_ms = 500;
  std::unique_ptr<engine::Engine> engine = StartEngine(options);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, {"ok-far"}, absl::Seconds(60)));
  int64_t clamped = 0;
  for (const auto& s : engine->Threads()) clamped += s->counters.Read().due_clamped;
  EXPECT_EQ(clamped, 1);
  engine->Stop();

  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>{"ok-far"});
  EXPECT_EQ(CommittedOffsets(options.group_id + ".retry", topics.retry)[0], 1);
}

// Twelve retry records come due at once and each takes 800 ms to process:
// one round over all of them would outlast max.poll.interval.ms (6 s), and
// the group would evict the thread and replay everything since its last
// commit. Rounds are bounded by time, so the thread keeps polling.
TEST(LivenessTest, SlowProcessorKeepsItsGroupMembership) {
  const testing::TestTopics topics = CreateTopics("slow-rounds", 1);
  const std::vector<std::string> keys = NumberedKeys("ok-", 12);
  engine::RetryMetadata meta;
  meta.attempt = 2;
  // Read ahead well before they come due, all at the same moment.
  meta.due_ms = absl::ToUnixMillis(absl::Now() + absl::Seconds(10));
  meta.first_failure_ms = absl::ToUnixMillis(absl::Now());
  meta.original_topic = topics.input;
  meta.original_partition = 0;
  meta.original_timestamp_ms = meta.first_failure_ms;
  for (size_t i = 0; i < keys.size(); ++i) {
    meta.original_offset = static_cast<int64_t>(i);
    ProduceRetryRecord(topics.retry, 0, keys[i], meta);
  }

  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.backoff.max_ms = 60000;
  options.kafka_properties["max.poll.interval.ms"] = "6000";
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor(/*latency_ms=*/800));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys, absl::Seconds(90)));
  ASSERT_TRUE(
      WaitFor([&] { return CommittedOffsets(options.group_id + ".retry", topics.retry)[0] == 12; },
              absl::Seconds(30)));
  engine->Stop();

  // Evicted, the thread would have processed them all again.
  const std::multiset<std::string> output = Keys(ReadAll(topics.output));
  EXPECT_EQ(output, std::multiset<std::string>(keys.begin(), keys.end()));
}

// Retry threads come and go while records wait for their due time. Each
// change rebalances the retry group; none may leave a key with two live
// copies in the retry lane (records at or above the group's committed
// offset), which the next owner would process twice and, change after
// change, multiply.
TEST(LivenessTest, RetryGroupChangesLeaveOneLiveCopyPerKey) {
  const testing::TestTopics topics = CreateTopics("one-copy", 2);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_threads = 3;
  options.retry.max_attempts = 100;
  // Some records come due between the changes, most wait through them.
  options.retry.backoff = {.initial_ms = 1000, .multiplier = 2.0, .max_ms = 30000};
  std::unique_ptr<engine::Engine> engine = StartEngine(options);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 2); }, absl::Seconds(60)));
  const std::vector<std::string> keys = NumberedKeys("doomed-", 40);
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().sent_to_retry >= 40; }, absl::Seconds(60)));

  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<std::vector<int>> started =
        engine->StartRetryThreads(1, absl::Now() + absl::Seconds(60));
    ASSERT_TRUE(started.ok()) << started.status();
    ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 2); }, absl::Seconds(60)));
    absl::StatusOr<std::vector<int>> stopped = engine->StopRetryThreads(1, /*graceful=*/true);
    ASSERT_TRUE(stopped.ok()) << stopped.status();
  }
  engine->Stop();

  std::map<int32_t, int64_t> committed =
      CommittedOffsets(options.group_id + ".retry", topics.retry);
  std::map<std::string, int> live;
  for (const Record& r : ReadAll(topics.retry)) {
    if (r.offset >= committed[r.partition]) ++live[*r.key];
  }
  for (const std::string& key : keys) {
    EXPECT_EQ(live[key], 1) << key << " has " << live[key] << " live copies in the retry topic";
  }
  EXPECT_TRUE(ReadAll(topics.dlq).empty());
}

// In order, a doomed record is retried in place and its partition's commit
// stays at it. Its attempt count rides along in the commit's metadata, so
// the next owner (here a restarted instance) resumes it at the attempt it
// had reached instead of starting again at 1, and it reaches the DLQ.
TEST(LivenessTest, InOrderAttemptCountSurvivesARestart) {
  const testing::TestTopics topics = CreateTopics("inorder-attempts", 1);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  options.retry.max_attempts = 3;
  options.retry.backoff = {.initial_ms = 500, .multiplier = 1.0, .max_ms = 500};
  ProduceKeys(topics.input, {"doomed-0", "ok-1"});
  {
    std::unique_ptr<engine::Engine> first = StartEngine(options);
    ASSERT_NE(first, nullptr);
    // Attempts 1 and 2 failed: attempt 3 is next.
    ASSERT_TRUE(WaitFor([&] { return first->Totals().failed_attempts >= 2; }, absl::Seconds(60)));
    first->Stop();
    ASSERT_EQ(first->Totals().failed_attempts, 2) << "the first instance was stopped too late";
  }
  std::unique_ptr<engine::Engine> second = StartEngine(options);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*second, topics, {"doomed-0", "ok-1"}, absl::Seconds(60)));
  // One attempt, the last, and the record is dead-lettered.
  EXPECT_EQ(second->Totals().failed_attempts, 1);
  second->Stop();

  const std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(testing::HeaderValue(dlq[0], "retryd-attempt"), "3");
  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>{"ok-1"});
}

}  // namespace
}  // namespace retryd
