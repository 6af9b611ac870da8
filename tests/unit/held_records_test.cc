// HeldRecords, with no broker: every place a worker holds a record seen as
// one (what ListInFlight shows), and the record an operator dead-letters
// taken out of wherever it waits.
#include "server/engine/worker/held_records.h"

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/unit/held_calls.h"
#include "tests/unit/held_record.h"

namespace retryd::engine {
namespace {

const TopicPartition kA{"orders", 0};
const TopicPartition kB{"orders", 1};

struct Fixture {
  Fixture() {
    // In a call: kA@1.
    calls.Start(HeldAt(kA, 1), tracker, absl::Now(), /*probe=*/false);
    // Waiting for its due time: kB@5; deferred (the downstream is down): kB@6.
    HeldRecord due = HeldAt(kB, 5);
    due.attempt = 2;
    due.due_ms = 9000;
    due.last_error = "timeout";
    scheduler.Add(std::move(due));
    HeldRecord deferred = HeldAt(kB, 6);
    deferred.deferred = true;
    scheduler.Add(std::move(deferred));
    // Waiting for its partition: kA@2.
    queue.Wait(kA, {HeldAt(kA, 2).record, /*read_ms=*/100, {}});
    // In its key's lane, behind kA@0 of the same key: kA@3.
    EXPECT_TRUE(lanes.Open(KeyOf(HeldAt(kA, 0, "k").record), kA));
    HeldRecord behind = HeldAt(kA, 3, "k");
    EXPECT_TRUE(lanes.QueueBehind(KeyOf(behind.record), behind));
  }

  KeyParking parking;
  HeldCalls processor;  // Keeps every call open: its record stays in it.
  std::shared_ptr<WorkerMailbox> mailbox =
      std::make_shared<WorkerMailbox>(4, ThreadRole::kRetry, 10, &parking);
  Calls calls{processor, mailbox, /*max_calls=*/4};
  std::shared_ptr<CompletionTracker> tracker = std::make_shared<CompletionTracker>();
  DueScheduler scheduler;
  InOrderQueue queue;
  KeyLanes lanes;
  HeldRecords held{4, ThreadRole::kRetry, calls, scheduler, queue, lanes};
};

std::map<int64_t, InFlightState> StatesByOffset(const std::vector<InFlightRecord>& records) {
  std::map<int64_t, InFlightState> states;
  for (const InFlightRecord& r : records) states[r.offset] = r.state;
  return states;
}

TEST(HeldRecordsTest, ListsEveryPlaceARecordIsHeldWithItsState) {
  Fixture f;
  int64_t total = 0;
  const std::vector<InFlightRecord> records = f.held.List(/*limit=*/10, total);
  EXPECT_EQ(total, 5);
  EXPECT_EQ(StatesByOffset(records), (std::map<int64_t, InFlightState>{
                                         {1, InFlightState::kInCall},
                                         {2, InFlightState::kWaitingBehind},
                                         {3, InFlightState::kParked},
                                         {5, InFlightState::kWaitingDue},
                                         {6, InFlightState::kDeferred},
                                     }));
  for (const InFlightRecord& r : records) {
    EXPECT_EQ(r.thread_id, 4);
    EXPECT_EQ(r.role, ThreadRole::kRetry);
    if (r.offset == 5) {
      EXPECT_EQ(r.due_ms, 9000);
      EXPECT_EQ(r.attempt, 2);
      EXPECT_EQ(r.last_error, "timeout");
    }
    if (r.offset == 2) {
      EXPECT_EQ(r.since_ms, 100);
    }
  }
  // At most `limit`, the total still counting them all.
  EXPECT_EQ(f.held.List(/*limit=*/2, total).size(), 2u);
  EXPECT_EQ(total, 5);
}

TEST(HeldRecordsTest, TakesARecordOutOfWhereverItWaitsButNotOutOfACall) {
  Fixture f;
  EXPECT_TRUE(f.held.InCall({"orders", 0, 1}));
  EXPECT_FALSE(f.held.InCall({"orders", 1, 5}));
  EXPECT_FALSE(f.held.Take({"orders", 0, 1}).has_value());   // In its call.
  EXPECT_FALSE(f.held.Take({"orders", 0, 99}).has_value());  // Held nowhere.

  std::optional<HeldRecord> due = f.held.Take({"orders", 1, 5});
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(due->attempt, 2);
  EXPECT_EQ(f.scheduler.size(), 1u);
  ASSERT_TRUE(f.held.Take({"orders", 0, 3}).has_value());
  EXPECT_EQ(f.lanes.waiting(), 0);
  ASSERT_TRUE(f.held.Take({"orders", 0, 2}).has_value());
  EXPECT_FALSE(f.queue.HasWaiting(kA));

  int64_t total = 0;
  EXPECT_EQ(StatesByOffset(f.held.List(10, total)),
            (std::map<int64_t, InFlightState>{{1, InFlightState::kInCall},
                                              {6, InFlightState::kDeferred}}));
}

TEST(HeldRecordsTest, ACancelledCallIsNeitherListedNorInACall) {
  Fixture f;
  f.calls.Cancel(nullptr);
  EXPECT_FALSE(f.held.InCall({"orders", 0, 1}));
  int64_t total = 0;
  EXPECT_EQ(StatesByOffset(f.held.List(10, total)).count(1), 0u);
  EXPECT_EQ(total, 4);
}

}  // namespace
}  // namespace retryd::engine
