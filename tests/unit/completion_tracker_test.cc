#include "server/engine/handoff/completion_tracker.h"

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

// Only a safety net so that a broken tracker fails the test instead of
// hanging it; the waits below normally return as soon as the last Complete().
absl::Time Eventually() { return absl::Now() + absl::Seconds(30); }

TEST(CompletionTrackerTest, NothingBegun) {
  CompletionTracker t;
  EXPECT_EQ(t.CommitOffset(), -1);
  EXPECT_EQ(t.pending(), 0);
  EXPECT_FALSE(t.Complete(0));
  EXPECT_FALSE(t.abandoned());
  // Nothing pending, so it is drained even with a deadline in the past.
  EXPECT_TRUE(t.AwaitDrained(absl::InfinitePast()));
}

TEST(CompletionTrackerTest, InOrderCompletion) {
  CompletionTracker t;
  ASSERT_TRUE(t.Begin(10));
  EXPECT_EQ(t.CommitOffset(), 10);
  ASSERT_TRUE(t.Begin(11));
  ASSERT_TRUE(t.Begin(12));
  EXPECT_EQ(t.pending(), 3);
  EXPECT_TRUE(t.Complete(10));
  EXPECT_EQ(t.CommitOffset(), 11);
  EXPECT_TRUE(t.Complete(11));
  EXPECT_EQ(t.CommitOffset(), 12);
  EXPECT_TRUE(t.Complete(12));
  EXPECT_EQ(t.CommitOffset(), 13);
  EXPECT_EQ(t.pending(), 0);
}

TEST(CompletionTrackerTest, WatermarkWaitsForTheLowestIncompleteOffset) {
  CompletionTracker t;
  for (int64_t o = 0; o < 6; ++o) ASSERT_TRUE(t.Begin(o));
  EXPECT_TRUE(t.Complete(3));
  EXPECT_TRUE(t.Complete(5));
  EXPECT_TRUE(t.Complete(1));
  EXPECT_EQ(t.CommitOffset(), 0);  // 0 still in flight holds everything.
  EXPECT_EQ(t.pending(), 3);
  EXPECT_TRUE(t.Complete(0));
  EXPECT_EQ(t.CommitOffset(), 2);  // 1 was already done.
  EXPECT_TRUE(t.Complete(4));
  EXPECT_EQ(t.CommitOffset(), 2);
  EXPECT_TRUE(t.Complete(2));
  EXPECT_EQ(t.CommitOffset(), 6);  // 3, 4 and 5 were already done.
  EXPECT_EQ(t.pending(), 0);
}

TEST(CompletionTrackerTest, ReverseCompletion) {
  CompletionTracker t;
  for (int64_t o = 100; o < 200; ++o) ASSERT_TRUE(t.Begin(o));
  for (int64_t o = 199; o > 100; --o) {
    ASSERT_TRUE(t.Complete(o));
    ASSERT_EQ(t.CommitOffset(), 100);
  }
  EXPECT_EQ(t.pending(), 1);
  EXPECT_TRUE(t.Complete(100));
  EXPECT_EQ(t.CommitOffset(), 200);
  EXPECT_EQ(t.pending(), 0);
}

TEST(CompletionTrackerTest, GapsInOffsets) {
  // Compaction and transaction markers leave holes; the commit offset jumps
  // straight to the next begun offset, never into a hole.
  CompletionTracker t;
  ASSERT_TRUE(t.Begin(5));
  ASSERT_TRUE(t.Begin(9));
  ASSERT_TRUE(t.Begin(20));
  EXPECT_FALSE(t.Complete(6));   // In a hole: never begun.
  EXPECT_FALSE(t.Complete(21));  // Beyond the last.
  EXPECT_FALSE(t.Complete(4));   // Before the first.
  EXPECT_TRUE(t.Complete(9));
  EXPECT_EQ(t.CommitOffset(), 5);
  EXPECT_TRUE(t.Complete(5));
  EXPECT_EQ(t.CommitOffset(), 20);
  EXPECT_TRUE(t.Complete(20));
  EXPECT_EQ(t.CommitOffset(), 21);
  ASSERT_TRUE(t.Begin(1000));
  EXPECT_EQ(t.CommitOffset(), 1000);
}

TEST(CompletionTrackerTest, DoubleCompleteIsRejected) {
  CompletionTracker t;
  ASSERT_TRUE(t.Begin(1));
  ASSERT_TRUE(t.Begin(2));
  ASSERT_TRUE(t.Begin(3));
  EXPECT_TRUE(t.Complete(2));
  EXPECT_FALSE(t.Complete(2));  // Done but not yet popped (1 is pending).
  EXPECT_EQ(t.pending(), 2);
  EXPECT_TRUE(t.Complete(1));
  EXPECT_FALSE(t.Complete(1));  // Done and popped.
  EXPECT_FALSE(t.Complete(2));
  EXPECT_EQ(t.pending(), 1);
  EXPECT_EQ(t.CommitOffset(), 3);
}

TEST(CompletionTrackerTest, BeginRejectsOffsetsThatDoNotIncrease) {
  CompletionTracker t;
  EXPECT_FALSE(t.Begin(-1));
  EXPECT_EQ(t.CommitOffset(), -1);
  ASSERT_TRUE(t.Begin(0));
  ASSERT_TRUE(t.Begin(7));
  EXPECT_FALSE(t.Begin(7));
  EXPECT_FALSE(t.Begin(3));
  EXPECT_EQ(t.pending(), 2);
  // Still rejected after everything up to it completed.
  EXPECT_TRUE(t.Complete(0));
  EXPECT_TRUE(t.Complete(7));
  EXPECT_FALSE(t.Begin(7));
  EXPECT_FALSE(t.Complete(3));
  EXPECT_EQ(t.CommitOffset(), 8);
  EXPECT_TRUE(t.Begin(8));
}

TEST(CompletionTrackerTest, AbandonKeepsCompletionWorking) {
  CompletionTracker t;
  ASSERT_TRUE(t.Begin(1));
  ASSERT_TRUE(t.Begin(2));
  t.Abandon();
  EXPECT_TRUE(t.abandoned());
  EXPECT_TRUE(t.Complete(2));
  EXPECT_TRUE(t.Complete(1));
  EXPECT_FALSE(t.Complete(1));
  EXPECT_EQ(t.pending(), 0);
  EXPECT_EQ(t.CommitOffset(), 3);
  EXPECT_TRUE(t.abandoned());
}

TEST(CompletionTrackerTest, AwaitDrainedTimesOutWhileRecordsArePending) {
  CompletionTracker t;
  ASSERT_TRUE(t.Begin(1));
  EXPECT_FALSE(t.AwaitDrained(absl::InfinitePast()));
  const absl::Time start = absl::Now();
  EXPECT_FALSE(t.AwaitDrained(start + absl::Milliseconds(50)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(t.pending(), 1);
}

TEST(CompletionTrackerTest, AwaitDrainedWakesWhenAnotherThreadCompletes) {
  CompletionTracker t;
  for (int64_t o = 0; o < 100; ++o) ASSERT_TRUE(t.Begin(o));
  absl::Notification go;
  std::thread completer([&] {
    go.WaitForNotification();
    // Out of order, as delivery reports may arrive.
    for (int64_t o = 99; o >= 0; o -= 2) t.Complete(o);
    for (int64_t o = 0; o < 100; o += 2) t.Complete(o);
  });
  // Not drained before the completer is allowed to run.
  EXPECT_FALSE(t.AwaitDrained(absl::InfinitePast()));
  go.Notify();
  EXPECT_TRUE(t.AwaitDrained(Eventually()));
  completer.join();
  EXPECT_EQ(t.pending(), 0);
  EXPECT_EQ(t.CommitOffset(), 100);
}

TEST(CompletionTrackerTest, AwaitPendingAtMostChecksTheCountWithoutWaiting) {
  CompletionTracker t;
  for (int64_t o = 0; o < 3; ++o) ASSERT_TRUE(t.Begin(o));
  EXPECT_TRUE(t.AwaitPendingAtMost(3, absl::InfinitePast()));
  EXPECT_TRUE(t.AwaitPendingAtMost(10, absl::InfinitePast()));
  EXPECT_FALSE(t.AwaitPendingAtMost(2, absl::InfinitePast()));
  EXPECT_TRUE(t.Complete(1));
  EXPECT_TRUE(t.AwaitPendingAtMost(2, absl::InfinitePast()));
  EXPECT_FALSE(t.AwaitPendingAtMost(0, absl::Now() + absl::Milliseconds(20)));
}

TEST(CompletionTrackerTest, AwaitPendingAtMostWakesWhenEnoughComplete) {
  // A caller holding one record back on purpose waits only for the others.
  CompletionTracker t;
  for (int64_t o = 0; o < 10; ++o) ASSERT_TRUE(t.Begin(o));
  absl::Notification go;
  std::thread completer([&] {
    go.WaitForNotification();
    for (int64_t o = 9; o >= 1; --o) t.Complete(o);  // 0 stays pending.
  });
  EXPECT_FALSE(t.AwaitPendingAtMost(1, absl::InfinitePast()));
  go.Notify();
  EXPECT_TRUE(t.AwaitPendingAtMost(1, Eventually()));
  completer.join();
  EXPECT_EQ(t.pending(), 1);
  EXPECT_EQ(t.CommitOffset(), 0);
  EXPECT_FALSE(t.AwaitDrained(absl::InfinitePast()));
}

TEST(CompletionTrackerTest, DoneAboveListsTheCompleteRecordsPastTheCommitOffset) {
  CompletionTracker t;
  for (int64_t o : {5, 6, 7, 9, 10, 12, 13}) ASSERT_TRUE(t.Begin(o));
  EXPECT_TRUE(t.DoneAbove(10).empty());
  for (int64_t o : {6, 7, 10, 13}) ASSERT_TRUE(t.Complete(o));
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  // 9 is pending between 7 and 10; 11 and 8 were never begun (no record
  // there) and break no range.
  EXPECT_EQ(t.DoneAbove(10), (Ranges{{6, 7}, {10, 10}, {13, 13}}));
  EXPECT_EQ(t.DoneAbove(2), (Ranges{{6, 7}, {10, 10}}));
  ASSERT_TRUE(t.Complete(9));
  EXPECT_EQ(t.DoneAbove(10), (Ranges{{6, 10}, {13, 13}}));
  ASSERT_TRUE(t.Complete(5));
  EXPECT_EQ(t.CommitOffset(), 12);
  EXPECT_EQ(t.DoneAbove(10), (Ranges{{13, 13}}));
}

TEST(CompletionTrackerTest, ConcurrentBeginAndComplete) {
  // The worker begins while a delivery-report thread completes; the final
  // watermark must cover everything.
  constexpr int64_t kRecords = 20000;
  CompletionTracker t;
  absl::Notification all_begun;
  std::thread completer([&] {
    int64_t next = 0;
    while (next < kRecords) {
      // Read before Complete(): once every offset is begun, a failed
      // Complete() is a real failure rather than a race with Begin().
      const bool begun = all_begun.HasBeenNotified();
      if (t.Complete(next)) {
        ++next;
      } else if (begun) {
        ADD_FAILURE() << "offset " << next << " could not be completed";
        return;
      }
    }
  });
  // EXPECT rather than ASSERT so that the completer is always released and
  // joined.
  for (int64_t o = 0; o < kRecords; ++o) {
    EXPECT_TRUE(t.Begin(o));
    const int64_t commit = t.CommitOffset();
    EXPECT_GE(commit, 0);
    EXPECT_LE(commit, o + 1);
  }
  all_begun.Notify();
  EXPECT_TRUE(t.AwaitDrained(Eventually()));
  completer.join();
  EXPECT_EQ(t.CommitOffset(), kRecords);
}

}  // namespace
}  // namespace retryd::engine
