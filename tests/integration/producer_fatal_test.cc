// A fatal error of the producer the threads share (librdkafka's idempotent
// producer finished: its sequence broken, its epoch fenced): every thread
// rewinds to its last commit and goes on through a new producer, nothing
// lost, nothing failed; readiness is NOT_SERVING until every thread has
// moved on. The error is raised with librdkafka's test hook, the one way
// to bring one about at will (Engine::RaiseProducerFatalErrorForTest).
#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/engine/api/engine.h"
#include "server/engine/handoff/producer_slot.h"
#include "server/kafka/producer.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::AllAssigned;
using ::retryd::testing::BootstrapServers;
using ::retryd::testing::ClientProperties;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::ExpectEachKeyWhereItBelongs;
using ::retryd::testing::MixedKeys;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::TestProcessor;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WaitForOutcomes;

absl::StatusOr<std::unique_ptr<kafka::Producer>> NewProducer() {
  kafka::ProducerOptions options;
  options.bootstrap_servers = BootstrapServers();
  options.properties = ClientProperties();
  return kafka::Producer::Create(options);
}

TEST(ProducerFatalTest, EveryThreadRewindsAndGoesOnThroughANewProducer) {
  const testing::TestTopics topics = CreateTopics("fatal");
  const std::vector<std::string> keys = MixedKeys(4000);
  ProduceKeys(topics.input, keys);

  engine::EngineOptions options = TestEngineOptions(topics);
  options.primary_threads = 2;
  options.retry.threads = 2;
  // 1 ms per record: the run is in full flow, hand-offs in flight on every
  // thread, when the producer fails.
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor(1));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 3); }, absl::Seconds(60)));
  ASSERT_TRUE(WaitFor([&] { return engine->Totals().sent_to_retry >= 50; }, absl::Seconds(60)));
  const int64_t consumed_before = engine->Totals().consumed;

  // Readiness read all along: it must say NOT_SERVING, for the producer,
  // while the threads recover, and be OK again afterwards.
  std::atomic<bool> watching{true};
  std::atomic<bool> saw_recovering{false};
  std::thread watcher([&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (watching.load() && absl::Now() < deadline) {
      if (absl::StrContains(engine->Readiness().message(), "producer failed for good")) {
        saw_recovering.store(true);
      }
    }
  });
  ASSERT_TRUE(engine->RaiseProducerFatalErrorForTest().ok());
  const int threads = options.primary_threads + options.retry.threads;
  const bool all_rewound =
      WaitFor([&] { return engine->Totals().producer_rewinds >= threads; }, absl::Seconds(60));
  const bool ready_again = WaitFor([&] { return engine->Readiness().ok(); }, absl::Seconds(60));
  watching.store(false);
  watcher.join();
  ASSERT_TRUE(all_rewound) << engine->Totals().producer_rewinds << " rewinds; "
                           << engine->ThreadFailure();
  EXPECT_TRUE(ready_again) << engine->Readiness();
  EXPECT_TRUE(saw_recovering.load());
  EXPECT_EQ(engine->producer_replacements(), 1);
  EXPECT_EQ(engine->Totals().producer_rewinds, threads);
  EXPECT_TRUE(engine->ThreadFailure().ok()) << engine->ThreadFailure();

  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  EXPECT_TRUE(engine->ThreadFailure().ok()) << engine->ThreadFailure();
  engine->Stop();
  std::cout << "fatal: " << consumed_before << " of " << keys.size()
            << " consumed when the producer failed\n";
  ExpectEachKeyWhereItBelongs(topics, keys, "fatal");
}

// The swap itself: the first thread to ask makes the new producer, the
// others get the same; recovering lasts while anyone holds the broken one;
// a fatal error that keeps coming back is given up on, saying so.
TEST(ProducerFatalTest, TheSlotReplacesOnceAndRecoversWhenTheLastHolderLetsGo) {
  absl::StatusOr<std::unique_ptr<kafka::Producer>> first = NewProducer();
  ASSERT_TRUE(first.ok()) << first.status();
  engine::ProducerSlot slot(*std::move(first), NewProducer);
  std::shared_ptr<kafka::Producer> a = slot.Current();
  std::shared_ptr<kafka::Producer> b = slot.Current();
  EXPECT_FALSE(slot.Recovering());

  ASSERT_TRUE(a->RaiseFatalErrorForTest("slot test").ok());
  EXPECT_FALSE(a->FatalError().ok());
  slot.NoteBroken(a);
  EXPECT_TRUE(slot.Recovering());
  absl::StatusOr<std::shared_ptr<kafka::Producer>> next_a = slot.Replace(a);
  ASSERT_TRUE(next_a.ok()) << next_a.status();
  EXPECT_NE(*next_a, a);
  EXPECT_TRUE((*next_a)->FatalError().ok());
  a = *next_a;
  EXPECT_TRUE(slot.Recovering());  // `b` still holds the broken one.
  absl::StatusOr<std::shared_ptr<kafka::Producer>> next_b = slot.Replace(b);
  ASSERT_TRUE(next_b.ok()) << next_b.status();
  EXPECT_EQ(*next_b, a);
  b = *next_b;
  EXPECT_FALSE(slot.Recovering());
  EXPECT_EQ(slot.replacements(), 1);

  for (int i = 1; i < engine::ProducerSlot::kMaxReplacements; ++i) {
    ASSERT_TRUE(a->RaiseFatalErrorForTest("slot test").ok());
    absl::StatusOr<std::shared_ptr<kafka::Producer>> next = slot.Replace(a);
    ASSERT_TRUE(next.ok()) << next.status();
    a = *next;
  }
  ASSERT_TRUE(a->RaiseFatalErrorForTest("slot test").ok());
  absl::StatusOr<std::shared_ptr<kafka::Producer>> given_up = slot.Replace(a);
  EXPECT_TRUE(absl::IsFailedPrecondition(given_up.status())) << given_up.status();
  EXPECT_TRUE(absl::StrContains(given_up.status().message(), "giving up")) << given_up.status();
  slot.Close(absl::ZeroDuration());
}

}  // namespace
}  // namespace retryd
