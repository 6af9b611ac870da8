// Calls (a worker's processor calls in flight) and RebalanceCheckpoint (the
// steps of a checkpoint before a rebalance), with no broker: the processor
// here (HeldCalls) keeps each call's `done` until the test ends it.
#include "server/engine/worker/calls.h"

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/engine/worker/rebalance_checkpoint.h"
#include "tests/unit/held_calls.h"
#include "tests/unit/held_record.h"

namespace retryd::engine {
namespace {

const TopicPartition kA{"orders", 0};
const TopicPartition kB{"orders", 1};

struct Fixture {
  KeyParking parking;
  HeldCalls processor;
  std::shared_ptr<WorkerMailbox> mailbox =
      std::make_shared<WorkerMailbox>(1, ThreadRole::kPrimary, 10, &parking);
  Calls calls{processor, mailbox, /*max_calls=*/2};
  std::shared_ptr<CompletionTracker> tracker = std::make_shared<CompletionTracker>();
};

TEST(CallsTest, CountsCallsPerPartitionUpToTheLimit) {
  Fixture f;
  f.calls.Start(HeldAt(kA, 1), f.tracker, absl::Now(), /*probe=*/false);
  EXPECT_FALSE(f.calls.at_limit());
  f.calls.Start(HeldAt(kA, 2), f.tracker, absl::Now(), /*probe=*/true);
  EXPECT_TRUE(f.calls.at_limit());
  EXPECT_EQ(f.calls.For(kA), 2);
  EXPECT_EQ(f.calls.For(kB), 0);
  EXPECT_EQ(f.mailbox->calls_in_flight.load(), 2);
  const std::vector<TopicPartition> only_b{kB};
  EXPECT_FALSE(f.calls.InFlight(&only_b));
  EXPECT_TRUE(f.calls.InFlight(nullptr));
}

TEST(CallsTest, EndedCallsAreTakenInTheOrderTheyEndedWithTheirOutcomes) {
  Fixture f;
  f.calls.Start(HeldAt(kA, 1), f.tracker, absl::Now(), false);
  f.calls.Start(HeldAt(kB, 2), f.tracker, absl::Now(), true);
  f.processor.End(2, Outcome::Retriable("later"));
  f.processor.End(1, Outcome::Ok());
  std::vector<std::pair<int64_t, Outcome::Kind>> ended;
  bool probe = false;
  f.calls.TakeFinished([&](Calls::Call call, Outcome outcome) {
    ended.emplace_back(call.held.source_offset, outcome.kind);
    probe = probe || call.probe;
  });
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0], std::make_pair(int64_t{2}, Outcome::Kind::kRetriable));
  EXPECT_EQ(ended[1], std::make_pair(int64_t{1}, Outcome::Kind::kOk));
  EXPECT_TRUE(probe);
  EXPECT_TRUE(f.calls.empty());
  EXPECT_EQ(f.calls.For(kA), 0);
  EXPECT_EQ(f.mailbox->calls_in_flight.load(), 0);
}

TEST(CallsTest, CancelReachesOnlyTheCallsOfThePartitionsNamed) {
  Fixture f;
  f.calls.Start(HeldAt(kA, 1), f.tracker, absl::Now(), false);
  f.calls.Start(HeldAt(kB, 2), f.tracker, absl::Now(), false);
  const std::vector<TopicPartition> only_a{kA};
  f.calls.Cancel(&only_a);
  EXPECT_TRUE(f.processor.cancels.at(1)->cancelled());
  EXPECT_FALSE(f.processor.cancels.at(2)->cancelled());
  f.calls.Cancel(nullptr);
  EXPECT_TRUE(f.processor.cancels.at(2)->cancelled());
}

TEST(CallsTest, AwaitFinishedReturnsWhenACallEndsOnAnotherThread) {
  Fixture f;
  f.calls.Start(HeldAt(kA, 1), f.tracker, absl::Now(), false);
  std::thread ender([&] { f.processor.End(1, Outcome::Ok()); });
  f.calls.AwaitFinished(absl::InfiniteFuture());  // Returns only once the call ended.
  ender.join();
  int taken = 0;
  f.calls.TakeFinished([&](Calls::Call, Outcome) { ++taken; });
  EXPECT_EQ(taken, 1);
}

TEST(RebalanceCheckpointTest, StepsFromRequestThroughRebalanceToRelease) {
  RebalanceCheckpoint c;
  absl::Time deadline;
  EXPECT_EQ(c.Take(&deadline), RebalanceCheckpoint::Step::kNone);
  const absl::Time asked = absl::Now() + absl::Seconds(5);
  c.Request(asked);
  EXPECT_FALSE(c.AwaitServed(absl::Now()));
  EXPECT_EQ(c.Take(&deadline), RebalanceCheckpoint::Step::kRequested);
  EXPECT_EQ(deadline, asked);
  c.Rebalanced();  // Not served yet: no effect.
  EXPECT_FALSE(c.AwaitRebalanced(absl::Now()));
  c.Served();
  EXPECT_TRUE(c.AwaitServed(absl::Now()));
  EXPECT_FALSE(c.AwaitRebalanced(absl::Now()));
  c.Rebalanced();
  EXPECT_TRUE(c.AwaitRebalanced(absl::Now()));
  c.Release();
  EXPECT_EQ(c.Take(&deadline), RebalanceCheckpoint::Step::kReleased);
  EXPECT_EQ(c.Take(&deadline), RebalanceCheckpoint::Step::kNone);  // Taken once.
}

TEST(RebalanceCheckpointTest, AReleaseBeforeTheRequestIsServedEndsIt) {
  RebalanceCheckpoint c;
  c.Request(absl::InfiniteFuture());
  c.Release();
  c.Served();  // Too late: stays released.
  EXPECT_TRUE(c.AwaitServed(absl::Now()));
  EXPECT_TRUE(c.AwaitRebalanced(absl::Now()));
  absl::Time deadline;
  EXPECT_EQ(c.Take(&deadline), RebalanceCheckpoint::Step::kReleased);
}

}  // namespace
}  // namespace retryd::engine
