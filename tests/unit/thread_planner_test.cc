// PlanThreadChanges: which retry threads a batch of queued changes starts
// and stops, one case per rule.
#include "server/engine/thread_planner.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/error_reason.h"

namespace retryd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Kind = RetryThreadChange::Kind;

// `tiers` retry tiers named r0, r1, ...
RetryOptions Retry(int min_threads, int max_threads, int tiers = 1) {
  RetryOptions o;
  o.min_threads = min_threads;
  o.max_threads = max_threads;
  for (int i = 0; i < tiers; ++i) o.tiers.push_back({.topic = "r" + std::to_string(i)});
  return o;
}

// Threads 1..n of tier 0, oldest first; the next id n + 1.
RetryThreadsNow Running(int n) {
  RetryThreadsNow now;
  for (int id = 1; id <= n; ++id) now.running.push_back({.id = id, .tier = 0});
  now.next_id = n + 1;
  return now;
}

RetryThreadChange Start(int count, int tier = 0) {
  return {.kind = Kind::kStart, .count = count, .tier = tier};
}
RetryThreadChange StopCount(int count, bool graceful = true, int tier = 0) {
  return {.kind = Kind::kStopCount, .count = count, .graceful = graceful, .tier = tier};
}
RetryThreadChange StopIds(std::vector<int> ids, bool graceful = true) {
  return {.kind = Kind::kStopIds, .ids = std::move(ids), .graceful = graceful};
}
RetryThreadChange SetCount(int count, int tier = 0) {
  return {.kind = Kind::kSetCount, .count = count, .tier = tier};
}

// The one decision of a plan of one change.
ThreadChangeDecision Decide(const RetryOptions& retry, const RetryThreadsNow& now,
                            const RetryThreadChange& change) {
  ThreadPlan plan = PlanThreadChanges(retry, now, {change});
  EXPECT_EQ(plan.decisions.size(), 1u);
  return plan.decisions.at(0);
}

void ExpectRefused(const ThreadChangeDecision& d, absl::StatusCode code, absl::string_view reason,
                   absl::string_view message) {
  EXPECT_EQ(d.status.code(), code) << d.status;
  EXPECT_EQ(ReasonOf(d.status), reason) << d.status;
  EXPECT_THAT(std::string(d.status.message()), HasSubstr(message));
  EXPECT_THAT(d.start, IsEmpty());
  EXPECT_THAT(d.stop, IsEmpty());
}

TEST(ThreadPlannerTest, StartReservesIdsFromTheNextId) {
  ThreadPlan plan = PlanThreadChanges(Retry(0, 16), Running(2), {Start(3)});
  ASSERT_TRUE(plan.decisions[0].status.ok()) << plan.decisions[0].status;
  EXPECT_THAT(plan.decisions[0].start, ElementsAre(3, 4, 5));
  EXPECT_THAT(plan.running, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_EQ(plan.next_id, 6);
  EXPECT_TRUE(plan.changes_threads());
}

TEST(ThreadPlannerTest, ChangesOfACountRefuseATierThatDoesNotExist) {
  for (const RetryThreadChange& c : {Start(1, 2), StopCount(1, true, -1), SetCount(1, 2)}) {
    ExpectRefused(Decide(Retry(0, 16, 2), Running(1), c), absl::StatusCode::kInvalidArgument,
                  reason::kInvalidField, absl::StrCat("tier: there is no retry tier ", c.tier));
  }
}

TEST(ThreadPlannerTest, StartAndStopCountRefuseACountBelowOne) {
  ExpectRefused(Decide(Retry(0, 16), Running(1), Start(0)), absl::StatusCode::kInvalidArgument,
                reason::kInvalidField, "count: must be at least 1, got 0");
  ExpectRefused(Decide(Retry(0, 16), Running(1), StopCount(-1)), absl::StatusCode::kInvalidArgument,
                reason::kInvalidField, "count: must be at least 1, got -1");
}

TEST(ThreadPlannerTest, InOrderModeRefusesStartsAndPositiveCounts) {
  RetryThreadsNow now = Running(0);
  now.in_order = true;
  for (const RetryThreadChange& c : {Start(1), SetCount(1)}) {
    ExpectRefused(Decide(Retry(0, 16), now, c), absl::StatusCode::kFailedPrecondition,
                  reason::kInOrderActive, "in-order mode excludes retry threads");
  }
  EXPECT_TRUE(Decide(Retry(0, 16), now, SetCount(0)).status.ok());
}

TEST(ThreadPlannerTest, StartRefusesMoreThanMaxThreadsCountingThoseStarting) {
  ThreadPlan plan = PlanThreadChanges(Retry(0, 4), Running(2), {Start(1), Start(2)});
  EXPECT_TRUE(plan.decisions[0].status.ok());
  ExpectRefused(plan.decisions[1], absl::StatusCode::kFailedPrecondition,
                reason::kMaxThreadsReached,
                "5 retry threads would be too many: retry.max_threads is 4 and 3 run or are "
                "starting; nothing changed");
  EXPECT_THAT(plan.running, ElementsAre(1, 2, 3));
}

TEST(ThreadPlannerTest, MaxThreadsCountsPerTierAndTheMessageNamesTheTier) {
  RetryThreadsNow now = Running(2);  // Both in tier 0.
  EXPECT_TRUE(Decide(Retry(0, 2, 2), now, Start(2, 1)).status.ok());
  ExpectRefused(Decide(Retry(0, 2, 2), now, Start(1, 0)), absl::StatusCode::kFailedPrecondition,
                reason::kMaxThreadsReached,
                "3 retry threads of tier r0 would be too many: retry.max_threads is 2 a tier "
                "and 2 run or are starting");
}

TEST(ThreadPlannerTest, StopCountStopsTheNewestOfItsTierOrAllIfFewer) {
  RetryThreadsNow now = Running(3);
  now.running.push_back({.id = 4, .tier = 1});
  now.next_id = 5;
  EXPECT_THAT(Decide(Retry(0, 16, 2), now, StopCount(2)).stop, ElementsAre(3, 2));
  EXPECT_THAT(Decide(Retry(0, 16, 2), now, StopCount(9)).stop, ElementsAre(3, 2, 1));
  EXPECT_THAT(Decide(Retry(0, 16, 2), now, StopCount(9, true, 1)).stop, ElementsAre(4));
}

TEST(ThreadPlannerTest, StopCountOfAnEmptyTierIsAcceptedAndChangesNothing) {
  ThreadPlan plan = PlanThreadChanges(Retry(0, 16), Running(0), {StopCount(1)});
  EXPECT_TRUE(plan.decisions[0].status.ok());
  EXPECT_THAT(plan.decisions[0].stop, IsEmpty());
  EXPECT_FALSE(plan.changes_threads());
}

TEST(ThreadPlannerTest, StopCountDoesNotStopThreadsStartingInTheSameBatch) {
  ThreadPlan plan = PlanThreadChanges(Retry(0, 16), Running(1), {Start(2), StopCount(5)});
  EXPECT_THAT(plan.decisions[1].stop, ElementsAre(1));
  EXPECT_THAT(plan.running, ElementsAre(2, 3));
}

TEST(ThreadPlannerTest, StopIdsRefusesNoIds) {
  ExpectRefused(Decide(Retry(0, 16), Running(1), StopIds({})), absl::StatusCode::kInvalidArgument,
                reason::kInvalidField, "no thread ids given");
}

TEST(ThreadPlannerTest, StopIdsRefusesIdsNotRunningNamingThem) {
  ExpectRefused(Decide(Retry(0, 16), Running(2), StopIds({1, 7})), absl::StatusCode::kNotFound,
                reason::kThreadNotFound, "thread 7 is not a running retry thread; nothing stopped");
  ExpectRefused(Decide(Retry(0, 16), Running(2), StopIds({8, 7})), absl::StatusCode::kNotFound,
                reason::kThreadNotFound,
                "threads 8, 7 are not running retry threads; nothing stopped");
}

TEST(ThreadPlannerTest, StopIdsRefusesAThreadAnEarlierChangeStopsOrStarts) {
  ThreadPlan plan = PlanThreadChanges(Retry(0, 16), Running(2),
                                      {StopIds({2}), Start(1), StopIds({2}), StopIds({3})});
  EXPECT_TRUE(plan.decisions[0].status.ok());
  EXPECT_EQ(plan.decisions[2].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(plan.decisions[3].status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(plan.stop_graceful, ElementsAre(2));
}

TEST(ThreadPlannerTest, StopIdsStopsThreadsOfAnyTier) {
  RetryThreadsNow now = Running(1);
  now.running.push_back({.id = 2, .tier = 1});
  RetryThreadChange change = StopIds({2, 1});
  change.tier = 7;  // Not read: no such tier, and no refusal.
  ThreadChangeDecision d = Decide(Retry(0, 16, 2), now, change);
  ASSERT_TRUE(d.status.ok()) << d.status;
  EXPECT_THAT(d.stop, ElementsAre(2, 1));
}

TEST(ThreadPlannerTest, SetCountIsRefusedWhileAutoscaleIsOn) {
  RetryOptions retry = Retry(0, 16);
  retry.autoscale.enabled = true;
  ExpectRefused(Decide(retry, Running(1), SetCount(2)), absl::StatusCode::kFailedPrecondition,
                reason::kAutoscaleActive, "retry.autoscale is on");
  EXPECT_TRUE(Decide(retry, Running(1), Start(1)).status.ok()) << "the autoscaler's own way";
}

TEST(ThreadPlannerTest, SetCountRefusesANegativeTargetAndOneOverMax) {
  ExpectRefused(Decide(Retry(0, 4), Running(1), SetCount(-1)), absl::StatusCode::kInvalidArgument,
                reason::kInvalidField, "target: must be at least 0, got -1");
  ExpectRefused(Decide(Retry(0, 4), Running(1), SetCount(5)), absl::StatusCode::kFailedPrecondition,
                reason::kMaxThreadsReached,
                "5 retry threads would be too many: retry.max_threads is 4 and 1 run");
}

TEST(ThreadPlannerTest, SetCountStartsOrStopsTheNewestToReachTheTarget) {
  EXPECT_THAT(Decide(Retry(0, 16), Running(2), SetCount(4)).start, ElementsAre(3, 4));
  EXPECT_THAT(Decide(Retry(0, 16), Running(3), SetCount(1)).stop, ElementsAre(3, 2));
  ThreadChangeDecision same = Decide(Retry(0, 16), Running(2), SetCount(2));
  EXPECT_TRUE(same.status.ok());
  EXPECT_THAT(same.start, IsEmpty());
  EXPECT_THAT(same.stop, IsEmpty());
}

TEST(ThreadPlannerTest, SetCountRefusesToStopThreadsStartingInTheSameBatch) {
  ThreadPlan plan = PlanThreadChanges(Retry(0, 16), Running(1), {Start(2), SetCount(0)});
  ExpectRefused(plan.decisions[1], absl::StatusCode::kAborted, reason::kConcurrentChange,
                "a change applied together with this one starts threads it would have to stop");
  // As far as the threads that stay reach, it stops them.
  plan = PlanThreadChanges(Retry(0, 16), Running(2), {Start(1), SetCount(1)});
  EXPECT_THAT(plan.decisions[1].stop, ElementsAre(2, 1));
}

TEST(ThreadPlannerTest, AStopBelowMinThreadsIsRefusedCountingThoseStarting) {
  ExpectRefused(Decide(Retry(2, 16), Running(3), StopCount(2)),
                absl::StatusCode::kFailedPrecondition, reason::kMinThreadsReached,
                "stopping 2 of the 3 retry threads would leave 1, below retry.min_threads (2); "
                "nothing stopped");
  ThreadPlan plan = PlanThreadChanges(Retry(2, 16), Running(2), {Start(1), StopCount(1)});
  EXPECT_TRUE(plan.decisions[1].status.ok()) << plan.decisions[1].status;
  for (const RetryThreadChange& c : {SetCount(1), StopIds({1})}) {
    EXPECT_EQ(Decide(Retry(2, 16), Running(2), c).status.code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(ThreadPlannerTest, MinThreadsHoldsPerTierAndTheMessageNamesTheTier) {
  RetryThreadsNow now = Running(2);
  now.running.push_back({.id = 3, .tier = 1});
  now.next_id = 4;
  ExpectRefused(Decide(Retry(1, 16, 2), now, StopIds({1, 3})),
                absl::StatusCode::kFailedPrecondition, reason::kMinThreadsReached,
                "stopping 1 of the 1 retry threads of tier r1 would leave 0");
  EXPECT_TRUE(Decide(Retry(1, 16, 2), now, StopIds({1})).status.ok());
}

TEST(ThreadPlannerTest, InOrderModeHasNoFloor) {
  RetryThreadsNow now = Running(2);
  now.in_order = true;
  EXPECT_THAT(Decide(Retry(2, 16), now, StopCount(2)).stop, ElementsAre(2, 1));
}

TEST(ThreadPlannerTest, StopsAreSplitByGraceAndRefusalsLeaveTheThreadsAsTheyWere) {
  ThreadPlan plan = PlanThreadChanges(
      Retry(0, 3), Running(3),
      {StopIds({1}, /*graceful=*/false), Start(5), StopCount(1), SetCount(2), Start(1)});
  std::vector<absl::StatusCode> codes;
  for (const ThreadChangeDecision& d : plan.decisions) codes.push_back(d.status.code());
  EXPECT_THAT(codes,
              ElementsAre(absl::StatusCode::kOk, absl::StatusCode::kFailedPrecondition,
                          absl::StatusCode::kOk, absl::StatusCode::kOk, absl::StatusCode::kOk));
  EXPECT_THAT(plan.decisions[3].start, ElementsAre(4));
  EXPECT_THAT(plan.decisions[4].start, ElementsAre(5));
  EXPECT_THAT(plan.stop_now, ElementsAre(1));
  EXPECT_THAT(plan.stop_graceful, ElementsAre(3));
  EXPECT_THAT(plan.running, ElementsAre(2, 4, 5));
  EXPECT_EQ(plan.next_id, 6);
}

TEST(ThreadPlannerTest, OnlyRefusalsChangeNoThreads) {
  ThreadPlan plan = PlanThreadChanges(Retry(0, 1), Running(1), {Start(1), StopIds({9})});
  EXPECT_FALSE(plan.changes_threads());
  EXPECT_THAT(plan.running, ElementsAre(1));
  EXPECT_EQ(plan.next_id, 2);
}

}  // namespace
}  // namespace retryd::engine
