#include "server/engine/worker/due_scheduler.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const TopicPartition kP0{"retry", 0};
const TopicPartition kP1{"retry", 1};
const TopicPartition kOther{"retry-b", 0};

HeldRecord Held(const TopicPartition& source, int64_t source_offset, int64_t due_ms) {
  HeldRecord h;
  h.source = source;
  h.source_offset = source_offset;
  h.due_ms = due_ms;
  h.attempt = 2;
  h.first_failure_ms = 1;
  h.last_error = "e" + std::to_string(source_offset);
  h.record.topic = "orders";
  h.record.partition = 3;
  h.record.offset = 1000 + source_offset;
  h.record.value = "v" + std::to_string(source_offset);
  h.record.headers = {{"k", std::nullopt}};
  return h;
}

// The source offsets of `records`, in order: enough to identify each.
std::vector<int64_t> Offsets(const std::vector<HeldRecord>& records) {
  std::vector<int64_t> out;
  for (const HeldRecord& r : records) out.push_back(r.source_offset);
  return out;
}

TEST(DueSchedulerTest, Empty) {
  DueScheduler s;
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.NextDueMs(), std::nullopt);
  EXPECT_THAT(s.PopDue(1'000'000, 10), IsEmpty());
  EXPECT_EQ(s.CountFor(kP0), 0u);
  EXPECT_EQ(s.DropPartition(kP0), 0u);
}

TEST(DueSchedulerTest, PopsOnlyDueRecordsEarliestFirst) {
  DueScheduler s;
  s.Add(Held(kP0, 1, 300));
  s.Add(Held(kP0, 2, 100));
  s.Add(Held(kP1, 3, 200));
  s.Add(Held(kP0, 4, 50));
  EXPECT_EQ(s.NextDueMs(), 50);

  EXPECT_THAT(s.PopDue(49, 10), IsEmpty());
  EXPECT_THAT(Offsets(s.PopDue(200, 10)), ElementsAre(4, 2, 3));  // due <= now
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.NextDueMs(), 300);
  EXPECT_THAT(s.PopDue(299, 10), IsEmpty());
  EXPECT_THAT(Offsets(s.PopDue(300, 10)), ElementsAre(1));
  EXPECT_EQ(s.NextDueMs(), std::nullopt);
}

TEST(DueSchedulerTest, PopDueKeepsTheWholeRecord) {
  DueScheduler s;
  s.Add(Held(kP1, 7, 10));
  std::vector<HeldRecord> due = s.PopDue(10, 1);
  ASSERT_EQ(due.size(), 1u);
  const HeldRecord& h = due[0];
  EXPECT_EQ(h.source, kP1);
  EXPECT_EQ(h.source_offset, 7);
  EXPECT_EQ(h.due_ms, 10);
  EXPECT_EQ(h.attempt, 2);
  EXPECT_EQ(h.first_failure_ms, 1);
  EXPECT_EQ(h.last_error, "e7");
  EXPECT_EQ(h.record.topic, "orders");
  EXPECT_EQ(h.record.partition, 3);
  EXPECT_EQ(h.record.offset, 1007);
  EXPECT_EQ(h.record.value, "v7");
  EXPECT_EQ(h.record.headers, (Headers{{"k", std::nullopt}}));
}

TEST(DueSchedulerTest, EqualDueTimesComeOutInInsertionOrder) {
  DueScheduler s;
  // Interleave partitions and due times; within one due time the order of
  // Add() must survive the heap.
  for (int64_t i = 0; i < 200; ++i) {
    s.Add(Held(i % 2 == 0 ? kP0 : kP1, i, i % 3 == 0 ? 500 : 100));
  }
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 200; ++i) {
    if (i % 3 != 0) expected.push_back(i);
  }
  for (int64_t i = 0; i < 200; ++i) {
    if (i % 3 == 0) expected.push_back(i);
  }
  std::vector<int64_t> popped;
  // Small batches so the order also survives many partial pops.
  while (s.size() > 0) {
    std::vector<HeldRecord> batch = s.PopDue(1000, 7);
    ASSERT_FALSE(batch.empty());
    for (int64_t o : Offsets(batch)) popped.push_back(o);
  }
  EXPECT_EQ(popped, expected);
}

TEST(DueSchedulerTest, AddingEarlierRecordAfterwardsJumpsTheQueue) {
  DueScheduler s;
  s.Add(Held(kP0, 1, 100));
  s.Add(Held(kP0, 2, 100));
  s.Add(Held(kP0, 3, 40));
  s.Add(Held(kP0, 4, 100));
  EXPECT_EQ(s.NextDueMs(), 40);
  EXPECT_THAT(Offsets(s.PopDue(100, 10)), ElementsAre(3, 1, 2, 4));
}

TEST(DueSchedulerTest, PopDueRespectsMax) {
  DueScheduler s;
  for (int64_t i = 0; i < 5; ++i) s.Add(Held(kP0, i, 10 * i));
  EXPECT_THAT(s.PopDue(1000, 0), IsEmpty());
  EXPECT_EQ(s.size(), 5u);
  EXPECT_THAT(Offsets(s.PopDue(1000, 2)), ElementsAre(0, 1));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.CountFor(kP0), 3u);
  EXPECT_EQ(s.NextDueMs(), 20);
  EXPECT_THAT(Offsets(s.PopDue(1000, 2)), ElementsAre(2, 3));
  EXPECT_THAT(Offsets(s.PopDue(1000, 2)), ElementsAre(4));
  EXPECT_EQ(s.size(), 0u);
}

TEST(DueSchedulerTest, NegativeAndExtremeDueTimes) {
  DueScheduler s;
  s.Add(Held(kP0, 1, INT64_MAX));
  s.Add(Held(kP0, 2, -5));
  s.Add(Held(kP0, 3, 0));
  EXPECT_EQ(s.NextDueMs(), -5);
  EXPECT_THAT(Offsets(s.PopDue(0, 10)), ElementsAre(2, 3));
  EXPECT_THAT(Offsets(s.PopDue(INT64_MAX, 10)), ElementsAre(1));
}

TEST(DueSchedulerTest, CountsFollowAddAndPop) {
  DueScheduler s;
  s.Add(Held(kP0, 1, 10));
  s.Add(Held(kP1, 2, 20));
  s.Add(Held(kP0, 3, 30));
  s.Add(Held(kOther, 4, 5));
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.CountFor(kP0), 2u);
  EXPECT_EQ(s.CountFor(kP1), 1u);
  EXPECT_EQ(s.CountFor(kOther), 1u);
  EXPECT_EQ(s.CountFor({"retry", 2}), 0u);
  EXPECT_EQ(s.CountFor({"orders", 3}), 0u);  // The record's own partition.

  EXPECT_THAT(Offsets(s.PopDue(10, 10)), ElementsAre(4, 1));
  EXPECT_EQ(s.CountFor(kP0), 1u);
  EXPECT_EQ(s.CountFor(kOther), 0u);
  EXPECT_EQ(s.CountFor(kP1), 1u);
  EXPECT_EQ(s.size(), 2u);
}

TEST(DueSchedulerTest, DropPartitionRemovesOnlyThatPartition) {
  DueScheduler s;
  for (int64_t i = 0; i < 30; ++i) {
    const TopicPartition& tp = i % 3 == 0 ? kP0 : (i % 3 == 1 ? kP1 : kOther);
    s.Add(Held(tp, i, 1000 - 10 * (i % 5)));
  }
  EXPECT_EQ(s.CountFor(kP1), 10u);
  EXPECT_EQ(s.DropPartition(kP1), 10u);
  EXPECT_EQ(s.CountFor(kP1), 0u);
  EXPECT_EQ(s.DropPartition(kP1), 0u);
  EXPECT_EQ(s.size(), 20u);
  EXPECT_EQ(s.CountFor(kP0), 10u);
  EXPECT_EQ(s.CountFor(kOther), 10u);

  // What is left still comes out earliest first, FIFO among equal times.
  std::vector<HeldRecord> rest = s.PopDue(1000, 100);
  ASSERT_EQ(rest.size(), 20u);
  for (size_t i = 1; i < rest.size(); ++i) {
    EXPECT_NE(rest[i].source, kP1);
    const bool ordered =
        rest[i - 1].due_ms < rest[i].due_ms ||
        (rest[i - 1].due_ms == rest[i].due_ms && rest[i - 1].source_offset < rest[i].source_offset);
    EXPECT_TRUE(ordered) << "position " << i;
  }
  EXPECT_EQ(rest.front().due_ms, 960);
  EXPECT_EQ(rest.back().due_ms, 1000);
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.CountFor(kP0), 0u);
}

TEST(DueSchedulerTest, DropPartitionThenAddAgain) {
  DueScheduler s;
  s.Add(Held(kP0, 1, 10));
  s.Add(Held(kP1, 2, 5));
  EXPECT_EQ(s.DropPartition(kP1), 1u);
  EXPECT_EQ(s.NextDueMs(), 10);
  s.Add(Held(kP1, 3, 10));  // Same due time, added later: comes after 1.
  EXPECT_EQ(s.CountFor(kP1), 1u);
  EXPECT_THAT(Offsets(s.PopDue(10, 10)), ElementsAre(1, 3));
}

TEST(DueSchedulerTest, TakePartitionReturnsItsRecordsEarliestFirst) {
  DueScheduler s;
  s.Add(Held(kP0, 1, 30));
  s.Add(Held(kP1, 2, 5));
  s.Add(Held(kP0, 3, 10));
  s.Add(Held(kP0, 4, 10));  // Same due time as 3, added later: after it.
  EXPECT_THAT(Offsets(s.TakePartition(kP0)), ElementsAre(3, 4, 1));
  EXPECT_EQ(s.CountFor(kP0), 0u);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_THAT(Offsets(s.PopDue(100, 10)), ElementsAre(2));
  EXPECT_TRUE(s.TakePartition(kP0).empty());
}

}  // namespace
}  // namespace retryd::engine

namespace retryd::engine {
namespace {

TEST(DueSchedulerTest, TakeFirstRemovesOneRecordAndKeepsTheHeapInOrder) {
  DueScheduler s;
  for (int64_t i = 0; i < 6; ++i) s.Add(Held(i % 2 == 0 ? kP0 : kP1, i, 100 - i * 10));
  std::optional<HeldRecord> taken =
      s.TakeFirst([](const HeldRecord& h) { return h.record.offset == 1003; });
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->source_offset, 3);
  EXPECT_EQ(taken->last_error, "e3");
  EXPECT_EQ(s.size(), 5u);
  EXPECT_EQ(s.CountFor(kP1), 2u);
  EXPECT_EQ(s.CountFor(kP0), 3u);
  EXPECT_FALSE(s.TakeFirst([](const HeldRecord& h) { return h.source_offset == 3; }).has_value());
  int64_t seen = 0;
  s.ForEach([&seen](const HeldRecord& h) { seen += h.source_offset; });
  EXPECT_EQ(seen, 0 + 1 + 2 + 4 + 5);
  EXPECT_THAT(Offsets(s.PopDue(1'000, 10)), ElementsAre(5, 4, 2, 1, 0));
  EXPECT_EQ(s.CountFor(kP1), 0u);
}

// A fixed-delay tier: a partition's records come out in the order they were
// added, a later one due earlier (another writer's clock) behind the ones
// before it; other partitions go by their own due times.
TEST(DueSchedulerTest, FifoPerPartitionKeepsEachPartitionsOrder) {
  DueScheduler s(/*fifo_per_partition=*/true);
  s.Add(Held(kP0, 1, 300));
  s.Add(Held(kP0, 2, 100));
  s.Add(Held(kP1, 3, 200));
  s.Add(Held(kP0, 4, 250));
  EXPECT_EQ(s.NextDueMs(), 200);
  EXPECT_EQ(s.LastDueFor(kP0), 300);
  EXPECT_EQ(s.LastDueFor(kOther), std::nullopt);
  EXPECT_THAT(Offsets(s.PopDue(299, 10)), ElementsAre(3)) << "none of kP0 before offset 1";
  std::vector<HeldRecord> due = s.PopDue(300, 10);
  EXPECT_THAT(Offsets(due), ElementsAre(1, 2, 4));
  EXPECT_EQ(due[1].due_ms, 100) << "its own due time is kept";
  EXPECT_EQ(s.LastDueFor(kP0), std::nullopt);

  // Emptied, a partition starts afresh.
  s.Add(Held(kP0, 5, 50));
  EXPECT_EQ(s.NextDueMs(), 50);
  s.Add(Held(kP0, 6, 400));
  s.Add(Held(kP0, 7, 60));
  EXPECT_EQ(s.LastDueFor(kP0), 400);
  EXPECT_THAT(Offsets(s.TakePartition(kP0)), ElementsAre(5, 6, 7));
}

// Without FIFO the earliest due time goes first, whatever the partition's
// order.
TEST(DueSchedulerTest, WithoutFifoALaterRecordDueEarlierGoesFirst) {
  DueScheduler s;
  s.Add(Held(kP0, 1, 300));
  s.Add(Held(kP0, 2, 100));
  EXPECT_THAT(Offsets(s.PopDue(300, 10)), ElementsAre(2, 1));
}

}  // namespace
}  // namespace retryd::engine
