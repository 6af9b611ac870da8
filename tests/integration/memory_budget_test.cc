// The per-thread byte budget (max_held_bytes) against the mock cluster: a
// retry thread whose look-ahead would hold far more than the budget pauses
// instead, nothing is lost, and a record larger than the whole budget still
// goes through.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/engine/api/engine.h"
#include "server/engine/stats/thread_stats.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

constexpr int64_t kBudget = 16 << 10;
constexpr int kRecords = 300;
constexpr size_t kValueBytes = 1 << 10;
constexpr size_t kBigValueBytes = 64 << 10;  // Four budgets.
// What a record gains on its way (retryd-* headers), charged while it is
// handed to Kafka; generous.
constexpr int64_t kHeaderSlack = 4 << 10;

TEST(MemoryBudgetTest, LookAheadPausesAtTheBudgetAndLosesNothing) {
  const testing::TestTopics topics = testing::CreateTopics("budget");
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.retry.threads = 1;
  // Every retry waits 1.5 s, so the retry thread reads ahead of the due
  // times: without the budget it would hold all kRecords at once.
  options.retry.backoff = {.initial_ms = 1500, .multiplier = 1.0, .max_ms = 1500};
  options.max_held_bytes = kBudget;
  std::unique_ptr<engine::Engine> engine = testing::StartEngine(options, testing::TestProcessor());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(
      testing::WaitFor([&] { return testing::AllAssigned(*engine, 3); }, absl::Seconds(60)));

  // Flaky records fail twice: each is held twice by the retry thread.
  std::vector<std::string> keys;
  std::vector<OutgoingRecord> records;
  for (int i = 0; i < kRecords; ++i) {
    keys.push_back(absl::StrCat("flaky-", i));
    records.push_back({topics.input, -1, keys.back(), std::string(kValueBytes, 'v'), {}});
  }
  keys.push_back("flaky-big");
  records.push_back({topics.input, -1, keys.back(), std::string(kBigValueBytes, 'b'), {}});
  testing::ProduceRecords(records);

  // The most each thread was seen to hold, sampled while the records flow.
  std::map<int, int64_t> most_held;
  auto sample = [&] {
    for (const auto& s : engine->Threads()) {
      int64_t& most = most_held[s->id()];
      most = std::max(most, s->held_bytes.load(std::memory_order_relaxed));
    }
  };
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        sample();
        const engine::EngineTotals t = engine->Totals();
        return t.in_flight == 0 && t.succeeded == static_cast<int64_t>(keys.size());
      },
      absl::Seconds(120)));
  ASSERT_TRUE(testing::WaitForOutcomes(*engine, topics, keys));

  int64_t pauses = 0;
  for (const auto& s : engine->Threads()) pauses += s->counters.Read().budget_pauses;
  EXPECT_GT(pauses, 0) << "no thread paused for its budget";
  for (const auto& [id, most] : most_held) {
    std::cout << "thread " << id << ": held at most " << most << " bytes\n";
  }
  std::cout << "budget pauses: " << pauses << "\n";
  for (const auto& [id, most] : most_held) {
    EXPECT_LE(most, kBudget + static_cast<int64_t>(kBigValueBytes) + kHeaderSlack)
        << "thread " << id;
  }
  // Every charge was released with its record.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& s : engine->Threads()) {
          if (s->held_bytes.load(std::memory_order_relaxed) != 0) return false;
        }
        return true;
      },
      absl::Seconds(10)));
  engine->Stop();

  const std::vector<Record> output = testing::ReadAll(topics.output);
  EXPECT_EQ(testing::Keys(output), std::multiset<std::string>(keys.begin(), keys.end()));
  EXPECT_TRUE(testing::ReadAll(topics.dlq).empty());
  for (const Record& r : output) {
    const size_t want = *r.key == "flaky-big" ? kBigValueBytes : kValueBytes;
    EXPECT_EQ(r.value.value_or("").size(), want) << *r.key;
  }
}

}  // namespace
}  // namespace retryd
