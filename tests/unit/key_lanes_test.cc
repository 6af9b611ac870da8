// KeyLanes (one thread's key-order lanes) and KeyParking (the keys parked in
// the retry topic), with no broker.
#include "server/engine/ordering/key_lanes.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/engine/ordering/key_parking.h"
#include "tests/unit/held_record.h"

namespace retryd::engine {
namespace {

const TopicPartition kTp{"orders", 0};
const TopicPartition kOther{"orders", 1};

HeldRecord Held(const TopicPartition& tp, const std::string& key, int64_t offset) {
  return HeldAt(tp, offset, key);
}

// Opens `held`'s lane, as the worker does for a key's record in progress.
HeldRecord InProgress(KeyLanes& lanes, HeldRecord held) {
  EXPECT_TRUE(lanes.Open(KeyOf(held.record), held.source));
  held.laned = true;
  return held;
}

TEST(KeyLanesTest, LaterRecordsOfAKeyWaitForItsRecordInProgressOthersDoNot) {
  KeyLanes lanes;
  HeldRecord first = InProgress(lanes, Held(kTp, "a", 1));
  HeldRecord second = Held(kTp, "a", 2);
  HeldRecord other_key = Held(kTp, "b", 3);
  EXPECT_TRUE(lanes.QueueBehind(KeyOf(second.record), second));
  EXPECT_FALSE(lanes.QueueBehind(KeyOf(other_key.record), other_key));
  EXPECT_FALSE(lanes.Open(KeyOf(first.record), kTp));  // One record in progress per key.
  EXPECT_EQ(lanes.WaitingFrom(kTp), 1);
  EXPECT_EQ(lanes.waiting(), 1);
  EXPECT_FALSE(lanes.any_ready());

  lanes.End(first);
  ASSERT_TRUE(lanes.any_ready());
  std::vector<int64_t> started;
  EXPECT_TRUE(lanes.DrainReady([] { return true; },
                               [&](const PartitionKey&, HeldRecord next) {
                                 started.push_back(next.source_offset);
                                 return true;  // In progress: the lane waits for it.
                               }));
  EXPECT_EQ(started, std::vector<int64_t>{2});
  EXPECT_EQ(lanes.waiting(), 0);
  // Its lane stays open while the record is in progress.
  HeldRecord third = Held(kTp, "a", 4);
  EXPECT_TRUE(lanes.QueueBehind(KeyOf(third.record), third));
}

TEST(KeyLanesTest, RecordsThatGoElsewhereLetTheNextOneGoOnAndAnEmptyLaneCloses) {
  KeyLanes lanes;
  HeldRecord first = InProgress(lanes, Held(kTp, "a", 1));
  for (int64_t offset : {2, 3}) {
    HeldRecord h = Held(kTp, "a", offset);
    ASSERT_TRUE(lanes.QueueBehind(KeyOf(h.record), h));
  }
  lanes.End(first);
  std::vector<int64_t> followed;
  lanes.DrainReady([] { return true; },
                   [&](const PartitionKey&, HeldRecord next) {
                     followed.push_back(next.source_offset);
                     return false;  // Sent behind its parked key.
                   });
  EXPECT_EQ(followed, (std::vector<int64_t>{2, 3}));
  HeldRecord later = Held(kTp, "a", 5);
  EXPECT_FALSE(lanes.QueueBehind(KeyOf(later.record), later));  // Closed.
}

TEST(KeyLanesTest, DrainStopsWhenTold) {
  KeyLanes lanes;
  HeldRecord first = InProgress(lanes, Held(kTp, "a", 1));
  HeldRecord second = Held(kTp, "a", 2);
  ASSERT_TRUE(lanes.QueueBehind(KeyOf(second.record), second));
  lanes.End(first);
  EXPECT_FALSE(lanes.DrainReady([] { return false; },
                                [](const PartitionKey&, HeldRecord) {
                                  ADD_FAILURE() << "nothing may start";
                                  return true;
                                }));
  EXPECT_TRUE(lanes.any_ready());
}

TEST(KeyLanesTest, TakeRemovesAWaitingRecordAndDropForgetsARevokedPartition) {
  KeyLanes lanes;
  InProgress(lanes, Held(kTp, "a", 1));
  InProgress(lanes, Held(kOther, "b", 1));
  HeldRecord a2 = Held(kTp, "a", 2);
  HeldRecord b2 = Held(kOther, "b", 2);
  ASSERT_TRUE(lanes.QueueBehind(KeyOf(a2.record), a2));
  ASSERT_TRUE(lanes.QueueBehind(KeyOf(b2.record), b2));

  std::optional<HeldRecord> taken = lanes.Take({"orders", 1, 2});
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->record.key, "b");
  EXPECT_FALSE(lanes.Take({"orders", 1, 2}).has_value());
  EXPECT_EQ(lanes.WaitingFrom(kOther), 0);

  lanes.Drop({kTp});
  EXPECT_EQ(lanes.waiting(), 0);
  int seen = 0;
  lanes.ForEachWaiting([&](const HeldRecord&) { ++seen; });
  EXPECT_EQ(seen, 0);
  HeldRecord a3 = Held(kTp, "a", 3);
  EXPECT_FALSE(lanes.QueueBehind(KeyOf(a3.record), a3));  // Its lane went with it.
  HeldRecord b3 = Held(kOther, "b", 3);
  EXPECT_TRUE(lanes.QueueBehind(KeyOf(b3.record), b3));  // The other partition's stays.
}

TEST(KeyParkingTest, AParkedKeyTakesFollowersUntilItsLastRecordIsReleased) {
  KeyParking parking;
  const PartitionKey key{kTp, "a"};
  EXPECT_FALSE(parking.FollowIfParked(key, 1));
  parking.Park(key, 1, absl::Now());
  EXPECT_TRUE(parking.FollowIfParked(key, 2));
  EXPECT_EQ(parking.summary().keys, 1);
  EXPECT_EQ(parking.summary().records, 2);
  parking.Release(key, 1);
  EXPECT_TRUE(parking.FollowIfParked(key, 3));  // Still parked behind 2.
  parking.Release(key, 2);
  parking.Release(key, 3);
  EXPECT_EQ(parking.summary().keys, 0);
  EXPECT_FALSE(parking.FollowIfParked(key, 4));
  parking.Release(key, 99);  // Unknown: ignored.
}

TEST(KeyParkingTest, RecordsBelowTheRetryGroupsCommitAreReleased) {
  KeyParking parking;
  const PartitionKey a{kTp, "a"}, b{kTp, "b"};
  parking.Park(a, 1, absl::Now());
  parking.Park(b, 2, absl::Now());
  parking.Placed(a, 1, /*retry_partition=*/0, /*retry_offset=*/10);
  parking.Placed(b, 2, 0, 20);
  EXPECT_EQ(parking.ReleaseCommitted({{0, 11}}), 1);
  EXPECT_FALSE(parking.FollowIfParked(a, 5));
  EXPECT_TRUE(parking.FollowIfParked(b, 5));
  // Not yet placed: never released by a commit.
  EXPECT_EQ(parking.ReleaseCommitted({{0, 1000}}), 1);
  EXPECT_EQ(parking.summary().records, 1);
}

TEST(KeyParkingTest, ReplaceChangesOnlyThePartitionsNamed) {
  KeyParking parking;
  parking.Park({kTp, "a"}, 1, absl::Now());
  parking.Park({kOther, "b"}, 1, absl::Now());
  parking.Replace({kTp}, {ParkedRecord{{kTp, "c"}, 4, absl::Now()},
                          ParkedRecord{{kOther, "d"}, 4, absl::Now()}});
  EXPECT_FALSE(parking.FollowIfParked({kTp, "a"}, 9));
  EXPECT_TRUE(parking.FollowIfParked({kTp, "c"}, 9));
  EXPECT_TRUE(parking.FollowIfParked({kOther, "b"}, 9));
  EXPECT_FALSE(parking.FollowIfParked({kOther, "d"}, 9));
}

}  // namespace
}  // namespace retryd::engine
