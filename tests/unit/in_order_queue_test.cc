// InOrderQueue: the records waiting for their partition and the record
// retried in place, with no broker.
#include "server/engine/ordering/in_order_queue.h"

#include <set>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

const TopicPartition kTp{"orders", 0};
const TopicPartition kOther{"orders", 1};

InOrderQueue::Waiting At(const TopicPartition& tp, int64_t offset) {
  InOrderQueue::Waiting w;
  w.record.topic = tp.topic;
  w.record.partition = tp.partition;
  w.record.offset = offset;
  w.read_ms = 100 + offset;
  return w;
}

TEST(InOrderQueueTest, ReadyPartitionsHandOnTheirRecordsInOffsetOrder) {
  InOrderQueue queue;
  for (int64_t o : {5, 6, 7}) queue.Wait(kTp, At(kTp, o));
  queue.Wait(kOther, At(kOther, 1));
  EXPECT_EQ(queue.WaitingFor(kTp), 3);
  EXPECT_EQ(queue.waiting(), 4);

  std::vector<int64_t> started;
  auto start = [&](HeldRecord held) {
    EXPECT_EQ(held.source_offset, held.record.offset);
    EXPECT_EQ(held.read_ms, 100 + held.record.offset);
    started.push_back(held.record.offset);
  };
  auto any = [](const TopicPartition&) { return true; };
  auto never_done = [](const TopicPartition&) { return false; };
  // Nothing is ready until something says so.
  EXPECT_FALSE(queue.DrainReady(absl::InfiniteFuture(), any, never_done, start));
  queue.MarkReady(kTp);
  EXPECT_TRUE(queue.DrainReady(absl::InfiniteFuture(), any, never_done, start));
  EXPECT_EQ(started, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_FALSE(queue.HasWaiting(kTp));
  EXPECT_TRUE(queue.HasWaiting(kOther));
  queue.MarkReady(kTp);  // None waiting: no effect.
  EXPECT_FALSE(queue.DrainReady(absl::InfiniteFuture(), any, never_done, start));
}

TEST(InOrderQueueTest, APartitionHeldAgainStopsAndStaysReadyOnlyIfNotDoneWith) {
  InOrderQueue queue;
  for (int64_t o : {5, 6}) queue.Wait(kTp, At(kTp, o));
  queue.MarkReady(kTp);
  int taken = 0;
  auto one_at_a_time = [&](const TopicPartition&) { return taken == 0; };
  auto start = [&](HeldRecord) { ++taken; };
  // Cut short, not done with: still ready, the next round goes on.
  queue.DrainReady(
      absl::InfiniteFuture(), one_at_a_time, [](const TopicPartition&) { return false; }, start);
  EXPECT_EQ(taken, 1);
  taken = 0;
  queue.DrainReady(
      absl::InfiniteFuture(), one_at_a_time, [](const TopicPartition&) { return true; }, start);
  EXPECT_EQ(taken, 1);
  EXPECT_FALSE(queue.HasWaiting(kTp));

  // Done with (its record is held): it waits to be marked ready again.
  for (int64_t o : {8, 9}) queue.Wait(kTp, At(kTp, o));
  queue.MarkReady(kTp);
  taken = 0;
  queue.DrainReady(
      absl::InfiniteFuture(), one_at_a_time, [](const TopicPartition&) { return true; }, start);
  EXPECT_EQ(taken, 1);
  taken = 0;
  EXPECT_FALSE(queue.DrainReady(
      absl::InfiniteFuture(), [](const TopicPartition&) { return true; },
      [](const TopicPartition&) { return true; }, start));
  EXPECT_EQ(taken, 0);
}

TEST(InOrderQueueTest, TakeRemovesAWaitingRecordByWhereItWasRead) {
  InOrderQueue queue;
  for (int64_t o : {5, 6}) queue.Wait(kTp, At(kTp, o));
  EXPECT_FALSE(queue.Take({"orders", 0, 7}).has_value());
  std::optional<HeldRecord> taken = queue.Take({"orders", 0, 5});
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->source, kTp);
  EXPECT_EQ(taken->source_offset, 5);
  std::vector<int64_t> left;
  queue.ForEachWaiting([&](const TopicPartition&, const InOrderQueue::Waiting& w) {
    left.push_back(w.record.offset);
  });
  EXPECT_EQ(left, std::vector<int64_t>{6});
}

TEST(InOrderQueueTest, TheRecordRetriedInPlaceIsKnownAtItsOffsetOnly) {
  InOrderQueue queue;
  queue.HoldInPlace(kTp, {5, 3, 1000, 2000});
  ASSERT_NE(queue.InPlaceAt(kTp, 5), nullptr);
  EXPECT_EQ(queue.InPlaceAt(kTp, 5)->attempt, 3);
  EXPECT_EQ(queue.InPlaceAt(kTp, 6), nullptr);
  queue.EndInPlaceAt(kTp, 6);  // Another record: no effect.
  EXPECT_NE(queue.InPlaceAt(kTp, 5), nullptr);
  queue.EndInPlaceAt(kTp, 5);
  EXPECT_EQ(queue.InPlaceAt(kTp, 5), nullptr);
  queue.HoldInPlace(kTp, {5, 3, 1000, 2000});
  queue.EndInPlace(kTp);
  EXPECT_EQ(queue.InPlaceAt(kTp, 5), nullptr);
}

TEST(InOrderQueueTest, RestoredStateResumesOnlyTheRecordItDescribesAndOnlyOnce) {
  InOrderQueue queue;
  queue.Restored(kTp, {5, 4, 1000, 2000});
  HeldRecord other;
  other.source = kTp;
  other.source_offset = 6;
  EXPECT_FALSE(queue.Restore(other));  // The first record read is another: used up.
  HeldRecord held;
  held.source = kTp;
  held.source_offset = 5;
  EXPECT_FALSE(queue.Restore(held));

  queue.Restored(kTp, {5, 4, 1000, 2000});
  EXPECT_TRUE(queue.Restore(held));
  EXPECT_EQ(held.attempt, 4);
  EXPECT_EQ(held.first_failure_ms, 1000);
  EXPECT_EQ(held.due_ms, 2000);
}

TEST(InOrderQueueTest, DropForgetsEverythingOfThePartition) {
  InOrderQueue queue;
  queue.Wait(kTp, At(kTp, 5));
  queue.Wait(kOther, At(kOther, 5));
  queue.MarkReady(kTp);
  queue.HoldInPlace(kTp, {4, 2, 1, 2});
  queue.Restored(kTp, {4, 2, 1, 2});
  queue.Drop(kTp);
  EXPECT_FALSE(queue.HasWaiting(kTp));
  EXPECT_EQ(queue.InPlaceAt(kTp, 4), nullptr);
  HeldRecord held;
  held.source = kTp;
  held.source_offset = 4;
  EXPECT_FALSE(queue.Restore(held));
  EXPECT_EQ(queue.Partitions(), std::vector<TopicPartition>{kOther});
  int started = 0;
  EXPECT_FALSE(queue.DrainReady(
      absl::InfiniteFuture(), [](const TopicPartition&) { return true; },
      [](const TopicPartition&) { return false; }, [&](HeldRecord) { ++started; }));
  EXPECT_EQ(started, 0);
}

}  // namespace
}  // namespace retryd::engine
