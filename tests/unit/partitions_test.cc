// Partitions: each assigned partition's state, created at assignment and
// erased in one place at a revoke; no broker.
#include "server/engine/worker/partitions.h"

#include <vector>

#include "gtest/gtest.h"
#include "server/engine/handoff/done_above.h"
#include "server/engine/ordering/in_place_retry.h"

namespace retryd::engine {
namespace {

const TopicPartition kA{"orders", 0};
const TopicPartition kB{"orders", 1};

TEST(PartitionsTest, AssignGivesEachPartitionATrackerAndNothingCommitted) {
  Partitions p;
  p.Assign({kA, kB});
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.Assigned(), (std::vector<TopicPartition>{kA, kB}));
  ASSERT_NE(p.Tracker(kA), nullptr);
  EXPECT_NE(p.Tracker(kA), p.Tracker(kB));
  EXPECT_EQ(p.Tracker({"other", 0}), nullptr);
  for (const kafka::PartitionOffset& c : p.LastCommitted()) EXPECT_EQ(c.offset, -1);
  EXPECT_TRUE(p.CommitPoints(p.Assigned()).empty());  // Nothing read yet.
}

TEST(PartitionsTest, CommitPointsMoveWithTheTrackerAndCarryTheInPlaceRetry) {
  Partitions p;
  p.Assign({kA});
  auto tracker = p.Tracker(kA);
  for (int64_t o : {10, 11, 12}) ASSERT_TRUE(tracker->Begin(o));
  tracker->Complete(10);
  tracker->Complete(12);
  kafka::CommitOffsets points = p.Moved();
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].offset, 11);
  EXPECT_EQ(points[0].metadata, EncodeDoneAbove(11, {{12, 12}}));
  p.NoteCommitted(points);
  EXPECT_TRUE(p.Moved().empty());
  EXPECT_EQ(p.LastCommitted()[0].offset, 11);

  // The record at the commit retried in place: its state rides along.
  p.queue().HoldInPlace(kA, {11, 2, 100, 200});
  points = p.Moved();
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].metadata, EncodeInPlaceRetry({11, 2, 100, 200}));

  // A commit Kafka refused is sent again.
  p.NoteCommitted(points);
  p.OnCommitFailed(points);
  EXPECT_EQ(p.Moved().size(), 1u);
}

TEST(PartitionsTest, RestoreSkipsWhatThePreviousOwnerCompletedAndResumesTheInPlaceRetry) {
  Partitions p;
  p.Assign({kA, kB});
  p.Restore({{kA, 5, EncodeDoneAbove(5, {{7, 8}})}, {kB, 3, EncodeInPlaceRetry({3, 4, 1, 2})}},
            /*primary=*/true);
  EXPECT_FALSE(p.DoneBefore(kA, 5));
  EXPECT_FALSE(p.DoneBefore(kA, 6));
  EXPECT_TRUE(p.DoneBefore(kA, 7));
  EXPECT_TRUE(p.DoneBefore(kA, 8));
  EXPECT_FALSE(p.DoneBefore(kA, 9));
  HeldRecord held;
  held.source = kB;
  held.source_offset = 3;
  EXPECT_TRUE(p.queue().Restore(held));
  EXPECT_EQ(held.attempt, 4);
  EXPECT_EQ(p.LastCommitted()[1].offset, 3);  // A primary knows where it began.
}

TEST(PartitionsTest, RevokeErasesEveryTraceAndNamesThePausedOnes) {
  Partitions p;
  p.Assign({kA, kB});
  auto tracker = p.Tracker(kA);
  p.NotePaused({kA}, true);
  EXPECT_FALSE(p.all_paused());
  p.NotePaused({kB}, true);
  EXPECT_TRUE(p.all_paused());
  EXPECT_FALSE(p.any_keys_unknown());
  p.SetKeysUnknown({kA});
  EXPECT_TRUE(p.any_keys_unknown());
  p.queue().Wait(kA, {});
  HeldRecord in_progress;
  in_progress.source = kA;
  in_progress.record.topic = "orders";
  in_progress.record.key = "k";
  ASSERT_TRUE(p.lanes().Open(KeyOf(in_progress.record), kA));
  HeldRecord behind;
  behind.source = kA;
  behind.record.topic = "orders";
  behind.record.key = "k";
  ASSERT_TRUE(p.lanes().QueueBehind(KeyOf(behind.record), behind));

  EXPECT_EQ(p.Revoke({kA}), std::vector<TopicPartition>{kA});
  EXPECT_TRUE(tracker->abandoned());
  EXPECT_FALSE(p.Has(kA));
  EXPECT_FALSE(p.paused(kA));
  EXPECT_FALSE(p.keys_unknown(kA));
  EXPECT_TRUE(p.KeysUnknown().empty());
  EXPECT_FALSE(p.any_keys_unknown());
  EXPECT_FALSE(p.queue().HasWaiting(kA));
  EXPECT_EQ(p.lanes().waiting(), 0);
  EXPECT_TRUE(p.paused(kB));
  EXPECT_FALSE(p.Tracker(kB)->abandoned());

  // Assigned again: a new tracker, not paused.
  p.Assign({kA});
  EXPECT_NE(p.Tracker(kA), tracker);
  EXPECT_FALSE(p.paused(kA));
}

TEST(PartitionsTest, APartitionAssignedAgainWithoutARevokeKeepsItsPause) {
  Partitions p;
  p.Assign({kA});
  p.NotePaused({kA}, true);
  p.Assign({kA});
  EXPECT_TRUE(p.paused(kA));
}

// all_paused and any_keys_unknown are kept as counts, asked every loop:
// they follow every change, a revoke's included, and a partition looked up
// last (the lookup keeps it) is found no more once it is revoked.
TEST(PartitionsTest, PausedAndKeysUnknownFollowEveryChangeAndARevokedPartitionIsGone) {
  Partitions p;
  EXPECT_FALSE(p.all_paused());  // None assigned.
  p.Assign({kA, kB});
  p.NotePaused({kA}, true);
  p.NotePaused({kA}, true);  // Twice: counted once.
  EXPECT_FALSE(p.all_paused());
  p.NotePaused({kB}, true);
  EXPECT_TRUE(p.all_paused());
  p.NotePaused({kA}, false);
  EXPECT_FALSE(p.all_paused());

  p.SetKeysUnknown({kA, kB});
  EXPECT_TRUE(p.any_keys_unknown());
  EXPECT_NE(p.Tracker(kB), nullptr);  // kB is the one looked up last.
  EXPECT_EQ(p.Revoke({kB}), (std::vector<TopicPartition>{kB}));
  EXPECT_EQ(p.Tracker(kB), nullptr);
  EXPECT_FALSE(p.paused(kB));
  EXPECT_FALSE(p.keys_unknown(kB));
  EXPECT_FALSE(p.all_paused());  // kA is not paused.
  p.NotePaused({kA}, true);
  EXPECT_TRUE(p.all_paused());  // kB's pause went with it.
  EXPECT_TRUE(p.any_keys_unknown());
  p.ClearKeysUnknown();
  EXPECT_FALSE(p.any_keys_unknown());
  p.SetKeysUnknown({kA});
  p.Revoke({kA});
  EXPECT_FALSE(p.any_keys_unknown());
  EXPECT_FALSE(p.all_paused());

  // Assigned again: found, with a new tracker.
  p.Assign({kB});
  EXPECT_NE(p.Tracker(kB), nullptr);
  EXPECT_TRUE(p.Has(kB));
  EXPECT_FALSE(p.Has(kA));
}

}  // namespace
}  // namespace retryd::engine
