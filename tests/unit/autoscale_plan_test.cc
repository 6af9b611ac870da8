// PlanScaling: what the autoscaler decides from what it observed.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/autoscaler.h"

namespace retryd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RetryOptions Options(int min_threads, int max_threads) {
  RetryOptions o;
  o.min_threads = min_threads;
  o.max_threads = max_threads;
  o.autoscale = {.enabled = true, .backlog_per_thread = 100, .idle_exit_ms = 1000};
  return o;
}

RetryThreadView Busy(int id) { return {.id = id, .has_partitions = true, .idle_ms = 0}; }
RetryThreadView Idle(int id, bool has_partitions = true) {
  return {.id = id, .has_partitions = has_partitions, .idle_ms = 5000};
}

std::vector<int> StopIds(const ScalingPlan& plan) {
  std::vector<int> ids;
  for (const ScalingPlan::Stop& stop : plan.stop) ids.push_back(stop.id);
  return ids;
}

TEST(AutoscalePlanTest, StartsOnePerBacklogPerThreadUpToTheCapAndThePartitions) {
  const ScalingInput in{.backlog = 450, .partitions = 8, .threads = {Busy(2)}};
  ScalingPlan plan = PlanScaling(in, Options(0, 16));
  EXPECT_EQ(plan.start, 4) << "450 records at 100 per thread want 5 threads; 1 runs";
  EXPECT_THAT(plan.start_reason, HasSubstr("retry backlog of 450 records is over "
                                           "backlog_per_thread (100) x 1 retry threads"));
  EXPECT_THAT(plan.stop, IsEmpty());

  EXPECT_EQ(PlanScaling(in, Options(0, 3)).start, 2) << "max_threads caps it";
  ScalingInput few_partitions = in;
  few_partitions.partitions = 2;
  EXPECT_EQ(PlanScaling(few_partitions, Options(0, 16)).start, 1)
      << "a thread beyond the partition count would get none";
}

TEST(AutoscalePlanTest, NoStartAtOrBelowTheMarkOrWhileThreadsJoin) {
  EXPECT_EQ(
      PlanScaling({.backlog = 200, .partitions = 4, .threads = {Busy(1), Busy(2)}}, Options(0, 16))
          .start,
      0);
  EXPECT_EQ(
      PlanScaling({.backlog = 900, .partitions = 0, .threads = {Busy(1)}}, Options(0, 16)).start, 0)
      << "no partitions known yet";
  EXPECT_EQ(
      PlanScaling({.backlog = -1, .partitions = 4, .threads = {Busy(1)}}, Options(0, 16)).start, 0)
      << "a backlog that could not be measured starts nothing";
}

TEST(AutoscalePlanTest, BacklogWithNoThreadStartsOne) {
  const ScalingPlan plan =
      PlanScaling({.backlog = 5000, .partitions = 0, .threads = {}}, Options(0, 16));
  EXPECT_EQ(plan.start, 1);
  EXPECT_THAT(plan.start_reason, HasSubstr("no retry thread running"));
  EXPECT_EQ(PlanScaling({.backlog = 0, .partitions = 0, .threads = {}}, Options(0, 16)).start, 0);
}

TEST(AutoscalePlanTest, RestoresTheFloor) {
  const ScalingPlan plan =
      PlanScaling({.backlog = 0, .partitions = 3, .threads = {Busy(1)}}, Options(3, 4));
  EXPECT_EQ(plan.start, 2);
  EXPECT_THAT(plan.start_reason, HasSubstr("below retry.min_threads (3)"));
}

TEST(AutoscalePlanTest, IdleThreadsStopDownToTheFloor) {
  const ScalingInput in{.backlog = 0, .partitions = 3, .threads = {Idle(1), Idle(2), Idle(3)}};
  ScalingPlan plan = PlanScaling(in, Options(0, 16));
  EXPECT_THAT(StopIds(plan), ElementsAre(3, 2, 1)) << "no backlog: all may go";
  EXPECT_THAT(plan.stop[0].reason, HasSubstr("idle for 5000 ms (nothing held, due or arriving)"));
  EXPECT_THAT(StopIds(PlanScaling(in, Options(1, 16))), ElementsAre(3, 2));
  EXPECT_THAT(StopIds(PlanScaling(in, Options(3, 16))), IsEmpty());
}

TEST(AutoscalePlanTest, NotIdleLongEnoughStays) {
  const ScalingInput in{.backlog = 0,
                        .partitions = 2,
                        .threads = {{.id = 1, .has_partitions = true, .idle_ms = 999}, Busy(2)}};
  EXPECT_THAT(StopIds(PlanScaling(in, Options(0, 16))), IsEmpty());
}

TEST(AutoscalePlanTest, NeverTheLastWhileTheBacklogIsAboveZeroOrUnknown) {
  for (int64_t backlog : {int64_t{5}, int64_t{-1}}) {
    const ScalingInput in{.backlog = backlog, .partitions = 1, .threads = {Idle(7)}};
    EXPECT_THAT(StopIds(PlanScaling(in, Options(0, 16))), IsEmpty()) << backlog;
  }
}

TEST(AutoscalePlanTest, ThreadsWithoutPartitionsGoFirstEvenUnderBacklog) {
  // 350 records on 3 threads is over the mark, but the partitions (2) cap
  // the threads worth having; the one without partitions goes.
  const ScalingInput in{.backlog = 350,
                        .partitions = 2,
                        .threads = {Busy(1), Idle(2), Idle(3, /*has_partitions=*/false)}};
  const ScalingPlan plan = PlanScaling(in, Options(0, 16));
  EXPECT_EQ(plan.start, 0);
  EXPECT_THAT(StopIds(plan), ElementsAre(3))
      << "thread 2 holds partitions, and the 350 records would be over 100 x 1 without it";
  EXPECT_THAT(plan.stop[0].reason, HasSubstr("(no partitions)"));
}

TEST(AutoscalePlanTest, AnIdleThreadWithPartitionsStaysIfTheRestWouldBeOverTheMark) {
  const ScalingInput in{.backlog = 150, .partitions = 2, .threads = {Busy(1), Idle(2)}};
  EXPECT_THAT(StopIds(PlanScaling(in, Options(0, 16))), IsEmpty());
  const ScalingInput light{.backlog = 80, .partitions = 2, .threads = {Busy(1), Idle(2)}};
  EXPECT_THAT(StopIds(PlanScaling(light, Options(0, 16))), ElementsAre(2));
}

}  // namespace
}  // namespace retryd::engine
