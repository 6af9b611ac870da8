// The autoscaler with retry tiers, against a ScalingTarget of the test's own
// (no broker): each tier is planned with its own backlog and threads, and a
// fixed-delay tier whose partitions all wait for their due time gets no
// thread more, however large its backlog.
#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/engine/autoscaler.h"
#include "server/engine/steering/retry_tiers.h"

namespace retryd::engine {
namespace {

class FakeTarget : public ScalingTarget {
 public:
  FakeTarget(std::vector<int64_t> backlogs, std::vector<std::shared_ptr<ThreadStats>> threads)
      : backlogs_(std::move(backlogs)), threads_(std::move(threads)) {}

  bool Scalable() const override { return true; }
  absl::StatusOr<std::vector<int64_t>> MeasureTierBacklogs(absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++looks_;
    return backlogs_;
  }
  std::vector<std::shared_ptr<const ThreadStats>> Threads() const override {
    return {threads_.begin(), threads_.end()};
  }
  absl::StatusOr<std::vector<int>> StartRetryThreads(int count, int tier, absl::Time) override {
    absl::MutexLock lock(&mu_);
    starts_.emplace_back(count, tier);
    return std::vector<int>(count, 100 + static_cast<int>(starts_.size()));
  }
  absl::StatusOr<std::vector<int>> StopRetryThreadsById(const std::vector<int>& ids,
                                                        absl::Time) override {
    return ids;
  }

  // Waits until the autoscaler has looked `n` times (or 30 s); the starts
  // it asked for until then.
  std::vector<std::pair<int, int>> StartsAfterLooks(int n) {
    absl::MutexLock lock(&mu_);
    auto looked = [this, n] { return looks_ >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&looked), absl::Seconds(30));
    EXPECT_GE(looks_, n);
    return starts_;
  }

 private:
  const std::vector<int64_t> backlogs_;
  const std::vector<std::shared_ptr<ThreadStats>> threads_;
  absl::Mutex mu_;
  int looks_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<int, int>> starts_ ABSL_GUARDED_BY(mu_);  // (count, tier)
};

// A busy retry thread of `tier` holding `partitions` partitions of `topic`,
// `waiting` of them with a record held until due.
std::shared_ptr<ThreadStats> Busy(int id, int tier, const std::string& topic, int partitions,
                                  int waiting) {
  auto s = std::make_shared<ThreadStats>(id, ThreadRole::kRetry);
  s->set_tier(tier);
  s->SetState(ThreadState::kRunning);
  std::vector<TopicPartition> held;
  for (int p = 0; p < partitions; ++p) held.push_back({topic, p});
  s->SetPartitions(held);
  s->scheduled.store(waiting * 10);  // Records held: not what counts.
  s->waiting_partitions.store(waiting);
  return s;
}

RetryOptions TwoTiers() {
  RetryOptions retry;
  retry.max_threads = 8;
  retry.autoscale = {.enabled = true, .backlog_per_thread = 100, .idle_exit_ms = 200};
  retry.tiers = {{.topic = "fast", .delay_ms = 1000, .max_attempts = 1, .threads = 1},
                 {.topic = "slow", .delay_ms = 3600000, .max_attempts = 1, .threads = 1}};
  NormalizeTiers(retry);
  return retry;
}

TEST(AutoscaleTiersTest, EachTierIsScaledOnItsOwnBacklog) {
  // The fast tier is busy with a backlog of 350 over 4 partitions, none
  // waiting; the slow tier is idle-free but has nothing.
  FakeTarget target({350, 0}, {Busy(1, 0, "fast", 4, 0), Busy(2, 1, "slow", 4, 0)});
  Autoscaler autoscaler(target, TwoTiers(), absl::Seconds(5));
  autoscaler.Start();
  const std::vector<std::pair<int, int>> starts = target.StartsAfterLooks(5);
  autoscaler.Stop();
  ASSERT_FALSE(starts.empty());
  for (const auto& [count, tier] : starts) EXPECT_EQ(tier, 0) << "only the fast tier grows";
  EXPECT_EQ(starts.front().first, 3) << "one per 100 records, at most one per partition";
  const std::vector<ScalingEvent> events = autoscaler.Events();
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events.front().reason.find("of tier fast"), std::string::npos) << events.front().reason;
}

TEST(AutoscaleTiersTest, AFixedDelayTierWaitingOnEveryPartitionGetsNoMoreThreads) {
  // 100,000 records wait an hour in the slow tier; its thread holds the
  // first of each of its 4 partitions until due: nothing is due yet.
  FakeTarget target({0, 100000}, {Busy(1, 0, "fast", 4, 0), Busy(2, 1, "slow", 4, 4)});
  Autoscaler autoscaler(target, TwoTiers(), absl::Seconds(5));
  autoscaler.Start();
  const std::vector<std::pair<int, int>> starts = target.StartsAfterLooks(5);
  autoscaler.Stop();
  EXPECT_TRUE(starts.empty()) << starts.size() << " starts";
}

TEST(AutoscaleTiersTest, AFixedDelayTierCountsThePartitionsWhoseRecordsAreDue) {
  // Half its partitions wait; the other half have due records: half the
  // backlog counts, 2,000 for one thread at 100 a thread, capped by the 4
  // partitions.
  FakeTarget target({0, 4000}, {Busy(1, 0, "fast", 4, 0), Busy(2, 1, "slow", 4, 2)});
  Autoscaler autoscaler(target, TwoTiers(), absl::Seconds(5));
  autoscaler.Start();
  const std::vector<std::pair<int, int>> starts = target.StartsAfterLooks(5);
  autoscaler.Stop();
  ASSERT_FALSE(starts.empty());
  EXPECT_EQ(starts.front(), std::make_pair(3, 1));
}

}  // namespace
}  // namespace retryd::engine
