// Elastic retry threads (retry.autoscale) over the mock cluster: threads
// start while a failing downstream fills the retry topic, up to one per
// partition, and leave once they are idle, never below the floor; manual
// control and in-order mode keep their rules.
#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/error_reason.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/processor.h"
#include "server/engine/metrics_sampler.h"
#include "server/engine/stats/thread_stats.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::CreateTopics;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::WaitFor;
using ::testing::ContainsRegex;
using ::testing::Each;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

// Every record fails (retriably) while `failing` is set, as if its
// downstream were overloaded, and succeeds once it is cleared.
class SwitchableProcessor : public engine::Processor {
 public:
  explicit SwitchableProcessor(std::shared_ptr<std::atomic<bool>> failing)
      : failing_(std::move(failing)) {}
  engine::Outcome Process(const Record&, int) override {
    return failing_->load() ? engine::Outcome::Retriable("downstream overloaded")
                            : engine::Outcome::Ok();
  }

 private:
  const std::shared_ptr<std::atomic<bool>> failing_;
};

std::vector<int> RetryThreadIds(const engine::Engine& engine) {
  std::vector<int> ids;
  for (const auto& s : engine.Threads()) {
    if (s->role() == engine::ThreadRole::kRetry) ids.push_back(s->id());
  }
  return ids;
}

// Options over `topics` with retry threads autoscaled between `min` and
// `max`, `threads` at the start, each stopped after 1.5 s idle. Records
// keep coming back while the downstream fails, never exhausted.
engine::EngineOptions ElasticOptions(const testing::TestTopics& topics, int threads, int min,
                                     int max, int64_t backlog_per_thread) {
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = threads;
  options.retry.min_threads = min;
  options.retry.max_threads = max;
  options.retry.autoscale = {
      .enabled = true, .backlog_per_thread = backlog_per_thread, .idle_exit_ms = 1500};
  options.retry.max_attempts = 1000;
  return options;
}

std::vector<engine::ScalingEvent> EventsOf(const engine::Engine& engine, bool started) {
  std::vector<engine::ScalingEvent> out;
  for (const engine::ScalingEvent& e : engine.ScalingEvents()) {
    if (e.started == started) out.push_back(e);
  }
  return out;
}

std::vector<int> IdsOf(const std::vector<engine::ScalingEvent>& events) {
  std::vector<int> ids;
  for (const engine::ScalingEvent& e : events) ids.push_back(e.thread_id);
  return ids;
}

// One engine through the whole sequence: each new consumer group costs a
// join of several seconds on the mock cluster.
TEST(AutoscaleTest, ThreadsFollowTheRetryBacklogWithinTheirBounds) {
  const testing::TestTopics topics = CreateTopics("autoscale");  // 3 partitions.
  engine::EngineOptions options = ElasticOptions(topics, /*threads=*/1, /*min=*/1, /*max=*/4,
                                                 /*backlog_per_thread=*/10);
  options.retry.backoff = {.initial_ms = 1000, .multiplier = 1.0, .max_ms = 1000};
  auto failing = std::make_shared<std::atomic<bool>>(true);
  const std::unique_ptr<engine::Engine> owned =
      StartEngine(options, std::make_unique<SwitchableProcessor>(failing));
  ASSERT_NE(owned, nullptr);
  engine::Engine& engine = *owned;
  engine::MetricsSampler sampler(engine, absl::Milliseconds(50));
  sampler.Start();
  const absl::Duration kSettle = absl::Seconds(45);
  // Retry threads seen running at any look, lowest and highest.
  size_t fewest = 100, most = 0;
  auto retry_threads = [&] {
    const size_t n = RetryThreadIds(engine).size();
    fewest = std::min(fewest, n);
    most = std::max(most, n);
    return n;
  };
  EXPECT_THAT(engine.ScalingEvents(), IsEmpty()) << "one thread (retry.threads) and no backlog";

  // 60 failing records fill the retry topic: 60 per thread is over 10, so
  // threads start, one per partition (3), below max_threads (4): a fourth
  // would get no partition.
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) keys.push_back(absl::StrCat("busy-", i));
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(
      WaitFor([&] { return retry_threads() == 3 && EventsOf(engine, true).size() == 2; }, kSettle))
      << retry_threads() << " retry threads";
  const std::vector<engine::ScalingEvent> starts = EventsOf(engine, true);
  // Both starts at once from 1 thread, or (a slow machine, where a tick saw
  // only part of the backlog) one from 1 thread and the next from 2.
  EXPECT_THAT(
      starts,
      Each(Field(&engine::ScalingEvent::reason,
                 ContainsRegex("is over backlog_per_thread \\(10\\) x [12] retry threads"))));
  std::vector<int> running = RetryThreadIds(engine);
  for (int id : IdsOf(starts)) {
    EXPECT_NE(std::find(running.begin(), running.end(), id), running.end()) << id;
  }
  // The metrics stream carries them.
  ASSERT_TRUE(
      WaitFor([&] { return sampler.Latest()->scaling_events.size() == 2; }, absl::Seconds(5)));

  // A fourth started by hand gets no partition (or takes one from another,
  // which then has none); that thread is stopped once idle, backlog or not.
  absl::StatusOr<std::vector<int>> started = engine.StartRetryThreads(1, absl::Now() + kSettle);
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_TRUE(
      WaitFor([&] { return retry_threads() == 3 && EventsOf(engine, false).size() == 1; }, kSettle))
      << retry_threads() << " retry threads";
  EXPECT_THAT(EventsOf(engine, false)[0].reason, HasSubstr("(no partitions)"));
  EXPECT_EQ(EventsOf(engine, true).size(), 2u) << "never more threads than partitions";

  // A manual stop below the floor is refused, and stops none.
  absl::StatusOr<std::vector<int>> stopped = engine.StopRetryThreads(3, /*graceful=*/true);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kFailedPrecondition) << stopped.status();
  EXPECT_THAT(stopped.status().message(), HasSubstr("below retry.min_threads (1)"));
  EXPECT_EQ(ReasonOf(stopped.status()), "MIN_THREADS_REACHED");
  // A desired count is the autoscaler's to set while it is on.
  absl::StatusOr<engine::RetryThreadChangeResult> set = engine.ChangeRetryThreads(
      {.kind = engine::RetryThreadChange::Kind::kSetCount, .count = 2, .ids = {}},
      absl::Now() + kSettle);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kFailedPrecondition) << set.status();
  EXPECT_EQ(ReasonOf(set.status()), "AUTOSCALE_ACTIVE");
  EXPECT_EQ(retry_threads(), 3u);

  // The downstream recovers: every record succeeds, the backlog empties, and
  // the idle threads leave, down to min_threads.
  failing->store(false);
  EXPECT_TRUE(WaitFor([&] { return ReadAll(topics.output).size() >= keys.size(); }, kSettle));
  ASSERT_TRUE(
      WaitFor([&] { return retry_threads() == 1 && EventsOf(engine, false).size() == 3; }, kSettle))
      << retry_threads() << " retry threads";
  const std::vector<engine::ScalingEvent> stops = EventsOf(engine, false);
  EXPECT_THAT(stops, Each(Field(&engine::ScalingEvent::reason, HasSubstr("idle for"))));
  running = RetryThreadIds(engine);
  for (int id : IdsOf(stops)) {
    EXPECT_EQ(std::find(running.begin(), running.end(), id), running.end()) << id;
  }
  EXPECT_EQ(fewest, 1u) << "never below min_threads";
  EXPECT_EQ(most, 4u) << "the one started by hand";
  EXPECT_EQ(EventsOf(engine, true).size(), 2u);
  std::set<std::string> output_keys;
  for (const Record& r : ReadAll(topics.output)) output_keys.insert(r.key.value_or(""));
  EXPECT_THAT(output_keys, UnorderedElementsAreArray(keys));
  EXPECT_THAT(ReadAll(topics.dlq), IsEmpty());

  // In-order mode stops every retry thread, floor or not, and the
  // autoscaler starts none while it lasts, though the floor is 1.
  absl::StatusOr<engine::SetOrderingResult> toggled =
      engine.SetInOrder(true, /*drain_retries=*/true, absl::Now() + kSettle);
  ASSERT_TRUE(toggled.ok()) << toggled.status();
  EXPECT_TRUE(RetryThreadIds(engine).empty());
  const size_t events = engine.ScalingEvents().size();
  EXPECT_FALSE(WaitFor([&] { return !RetryThreadIds(engine).empty(); }, absl::Seconds(3)));
  EXPECT_EQ(engine.ScalingEvents().size(), events);
  // Out of it again: retry.threads start, as without autoscale.
  toggled = engine.SetInOrder(false, false);
  ASSERT_TRUE(toggled.ok()) << toggled.status();
  EXPECT_EQ(toggled->started_thread_ids.size(), 1u);

  sampler.Stop();
  engine.Stop();
  EXPECT_EQ(engine.state(), engine::EngineState::kStopped);
}

// The thread left after an idle one is stopped is given its partitions,
// whose records are all done: it reads nothing from them, so librdkafka
// knows no position for them. Its lag must not count their records from
// the log start (all committed long ago), or it would never count as idle.
TEST(AutoscaleTest, PartitionsWithNothingLeftToReadAddNoLag) {
  const testing::TestTopics topics = CreateTopics("autoscale-lag");  // 3 partitions.
  const engine::EngineOptions options = ElasticOptions(topics, /*threads=*/2, /*min=*/1, /*max=*/2,
                                                       /*backlog_per_thread=*/1000);
  auto failing = std::make_shared<std::atomic<bool>>(true);
  const std::unique_ptr<engine::Engine> owned =
      StartEngine(options, std::make_unique<SwitchableProcessor>(failing));
  ASSERT_NE(owned, nullptr);
  engine::Engine& engine = *owned;
  const absl::Duration kSettle = absl::Seconds(45);

  // Records in every partition of the retry topic, then all of them done.
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) keys.push_back(absl::StrCat("lag-", i));
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(WaitFor([&] { return engine.Totals().sent_to_retry >= 30; }, kSettle));
  failing->store(false);
  ASSERT_TRUE(WaitFor([&] { return ReadAll(topics.output).size() >= keys.size(); }, kSettle));

  // Both idle: one is stopped (the floor keeps the other), which is then
  // given every partition.
  ASSERT_TRUE(WaitFor([&] { return EventsOf(engine, false).size() == 1; }, kSettle));
  std::shared_ptr<const engine::ThreadStats> left;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& s : engine.Threads()) {
          if (s->role() == engine::ThreadRole::kRetry && s->partitions().size() == 3 &&
              !s->rebalancing.load()) {
            left = s;
          }
        }
        return left != nullptr;
      },
      kSettle))
      << "no retry thread holds all 3 partitions";
  // Its gauges are updated every commit interval (200 ms) from what its
  // fetches report: none of them may show a lag.
  int64_t lag = 0;
  EXPECT_FALSE(WaitFor(
      [&] {
        lag = left->lag.load();
        return lag != 0;
      },
      absl::Seconds(3)))
      << "thread " << left->id() << " reports a lag of " << lag << " with nothing left to read";
  EXPECT_EQ(engine.Totals().retry_backlog, 0);
  engine.Stop();
}

}  // namespace
}  // namespace retryd
