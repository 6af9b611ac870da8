// Runtime control of the engine over the mock cluster: retry threads started
// and stopped, the in-order toggle and its conflict rules, drains, metrics.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "retryd/v1/config.pb.h"
#include "server/engine/engine.h"
#include "server/engine/metrics_sampler.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"

namespace retryd {
namespace {

using ::retryd::testing::CreateTopics;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

std::unique_ptr<Processor> DoomedProcessor() {
  retryd::v1::SimulateConfig config;
  config.set_latency_ms(1);
  auto* doomed = config.add_rule();
  doomed->set_key_prefix("doomed-");
  doomed->set_fail_attempts(1000);
  return std::make_unique<SimulateProcessor>(config);
}

std::vector<int> RetryThreadIds(const Engine& engine) {
  std::vector<int> ids;
  for (const auto& s : engine.Threads()) {
    if (s->role() == ThreadRole::kRetry) ids.push_back(s->id());
  }
  return ids;
}

std::vector<std::string> Keys(const std::string& prefix, int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(prefix, i));
  return keys;
}

// One engine through the whole sequence: each new consumer group costs a
// join of several seconds on the mock cluster.
TEST(EngineControlTest, RetryThreadsAndInOrderToggle) {
  const testing::TestTopics topics = CreateTopics("control");
  EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_threads = 3;
  options.retry.max_attempts = 3;
  // Long enough that a backlog is still there a moment later.
  options.retry.backoff = {.initial_ms = 3000, .multiplier = 1.0, .max_ms = 3000};
  absl::StatusOr<std::unique_ptr<Engine>> created = Engine::Create(options, DoomedProcessor());
  ASSERT_TRUE(created.ok()) << created.status();
  Engine& engine = **created;
  ASSERT_TRUE(engine.Start().ok());
  MetricsSampler sampler(engine, absl::Milliseconds(50));
  sampler.Start();
  const absl::Duration kJoin = absl::Seconds(60);

  // Arguments out of range.
  absl::StatusOr<std::vector<int>> started = engine.StartRetryThreads(0, absl::Now() + kJoin);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  started = engine.StartRetryThreads(3, absl::Now() + kJoin);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(started.status().message(), HasSubstr("retry.max_threads is 3"));
  EXPECT_EQ(engine.StopRetryThreads(0, true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.StopRetryThreadsById({999}, true).status().code(),
            absl::StatusCode::kNotFound);

  // A new thread is returned once it has joined the group.
  started = engine.StartRetryThreads(1, absl::Now() + kJoin);
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_EQ(started->size(), 1u);
  for (const auto& s : engine.Threads()) {
    if (s->id() == (*started)[0]) {
      EXPECT_NE(s->state(), ThreadState::kStarting);
    }
  }
  ASSERT_EQ(RetryThreadIds(engine).size(), 2u);

  // In order and retry threads exclude each other.
  absl::StatusOr<SetInOrderResult> toggled = engine.SetInOrder(true, false);
  EXPECT_EQ(toggled.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(toggled.status().message(), HasSubstr("StopRetryThreads"));
  EXPECT_THAT(toggled.status().message(), HasSubstr("drain_retries"));
  EXPECT_FALSE(engine.in_order());

  // A backlog that cannot drain in a second: the engine stays as it was.
  ProduceKeys(topics.input, Keys("doomed-", 30));
  ASSERT_TRUE(WaitFor([&] { return engine.Totals().sent_to_retry >= 30; }, kJoin));
  // They wait seconds for their next attempt: the retry backlog shows them.
  absl::StatusOr<int64_t> backlog = engine.MeasureRetryBacklog(absl::Seconds(10));
  ASSERT_TRUE(backlog.ok()) << backlog.status();
  EXPECT_GT(*backlog, 0);
  EXPECT_EQ(engine.Totals().retry_backlog, *backlog);
  const std::vector<int> before = RetryThreadIds(engine);
  toggled = engine.SetInOrder(true, true, absl::Now() + absl::Seconds(1));
  EXPECT_EQ(toggled.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(engine.in_order());
  EXPECT_EQ(engine.state(), EngineState::kRunning);
  EXPECT_EQ(RetryThreadIds(engine), before);
  // Input flows again after the failed drain.
  const int64_t consumed = engine.Totals().consumed;
  ProduceKeys(topics.input, {"ok-after-failed-drain"});
  EXPECT_TRUE(WaitFor([&] { return engine.Totals().consumed > consumed; }, kJoin));

  // A drain with time enough: backlog emptied, retry threads stopped, in order.
  toggled = engine.SetInOrder(true, true, absl::Now() + absl::Seconds(90));
  ASSERT_TRUE(toggled.ok()) << toggled.status();
  EXPECT_TRUE(toggled->in_order);
  EXPECT_THAT(toggled->stopped_thread_ids, UnorderedElementsAreArray(before));
  EXPECT_TRUE(engine.in_order());
  EXPECT_TRUE(RetryThreadIds(engine).empty());
  // Every doomed record reached the DLQ before the switch.
  EXPECT_EQ(ReadAll(topics.dlq).size(), 30u);
  backlog = engine.MeasureRetryBacklog(absl::Seconds(10));
  ASSERT_TRUE(backlog.ok()) << backlog.status();
  EXPECT_EQ(*backlog, 0);

  started = engine.StartRetryThreads(1, absl::Now() + kJoin);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);

  // Back to parallel retries.
  toggled = engine.SetInOrder(false, false);
  ASSERT_TRUE(toggled.ok()) << toggled.status();
  EXPECT_FALSE(engine.in_order());
  started = engine.StartRetryThreads(1, absl::Now() + kJoin);
  ASSERT_TRUE(started.ok()) << started.status();
  absl::StatusOr<std::vector<int>> stopped = engine.StopRetryThreads(5, /*graceful=*/true);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(*stopped, *started) << "a count above the running number stops them all";

  // The sampler saw the work and reports stopped threads for a while.
  std::shared_ptr<const EngineSample> sample;
  auto stopped_in = [&](const std::shared_ptr<const EngineSample>& s) {
    for (const ThreadSample& t : s->threads) {
      if (t.id == (*started)[0]) return t.state == ThreadState::kStopped;
    }
    return false;
  };
  EXPECT_TRUE(WaitFor([&] { return stopped_in(sample = sampler.Latest()); }, absl::Seconds(5)));
  bool saw_primary = false;
  for (const ThreadSample& t : sample->threads) {
    if (t.role == ThreadRole::kPrimary) {
      saw_primary = true;
      EXPECT_GT(t.processed, 30);
      const LatencySummary latency =
          LatencyHistogram::Summarize(t.processing, LatencyHistogram::Counts{}, 0);
      EXPECT_EQ(latency.count, static_cast<uint64_t>(t.processed));
      EXPECT_GE(latency.p50_ms, 1.0) << "the processor takes 1 ms";
    }
  }
  EXPECT_TRUE(saw_primary);
  EXPECT_GE(sampler.MaxOver(1, 0, sample->time_ms).processing_ms, 1.0);

  sampler.Stop();

  // A drain still waiting for its backlog (each record needs two more
  // attempts, 3 s apart) ends as soon as the engine stops, not at its
  // deadline an hour away.
  started = engine.StartRetryThreads(1, absl::Now() + kJoin);
  ASSERT_TRUE(started.ok()) << started.status();
  const int64_t sent = engine.Totals().sent_to_retry;
  ProduceKeys(topics.input, Keys("doomed-again-", 5));
  ASSERT_TRUE(WaitFor([&] { return engine.Totals().sent_to_retry >= sent + 5; }, kJoin));
  absl::StatusOr<SetInOrderResult> drain = absl::UnknownError("not run");
  std::thread drainer([&] { drain = engine.SetInOrder(true, true, absl::Now() + absl::Hours(1)); });
  // Stopped and joined before asserting: a failed ASSERT must not leave the
  // thread joinable.
  const bool draining = WaitFor([&] { return engine.state() == EngineState::kDraining; }, kJoin);
  engine.Stop();
  drainer.join();
  ASSERT_TRUE(draining);
  EXPECT_EQ(drain.status().code(), absl::StatusCode::kAborted) << drain.status();
  EXPECT_FALSE(engine.in_order());
  EXPECT_EQ(engine.state(), EngineState::kStopped);
  EXPECT_EQ(engine.StartRetryThreads(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace retryd
