#include "server/processors/simulate.h"

#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace retryd {
namespace {

using Kind = engine::Outcome::Kind;

v1::SimulateConfig Parse(const std::string& text) {
  v1::SimulateConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

Record MakeRecord(int64_t offset, std::optional<std::string> key = std::nullopt,
                  std::string topic = "orders", int32_t partition = 0) {
  Record record;
  record.topic = std::move(topic);
  record.partition = partition;
  record.offset = offset;
  record.key = std::move(key);
  return record;
}

void ExpectOutcome(const engine::Outcome& outcome, Kind kind, const std::string& reason) {
  EXPECT_EQ(outcome.kind, kind) << outcome.reason;
  EXPECT_EQ(outcome.reason, reason);
}

TEST(SimulateProcessorTest, NoFailuresConfiguredMeansEverythingSucceeds) {
  SimulateProcessor processor(v1::SimulateConfig{});
  for (int64_t offset = 0; offset < 100; ++offset) {
    ExpectOutcome(processor.Process(MakeRecord(offset, "k"), 1), Kind::kOk, "");
  }
}

TEST(SimulateProcessorTest, RulesByKeyPrefix) {
  SimulateProcessor processor(Parse(R"pb(
    rule { key_prefix: "perm-" permanent: true }
    rule { key_prefix: "flaky-" fail_attempts: 2 }
  )pb"));
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ExpectOutcome(processor.Process(MakeRecord(1, "perm-42"), attempt), Kind::kPermanent,
                  "rule perm-: permanent failure");
  }
  ExpectOutcome(processor.Process(MakeRecord(2, "flaky-7"), 1), Kind::kRetriable,
                "rule flaky-: attempt 1 of 2 fails");
  ExpectOutcome(processor.Process(MakeRecord(2, "flaky-7"), 2), Kind::kRetriable,
                "rule flaky-: attempt 2 of 2 fails");
  ExpectOutcome(processor.Process(MakeRecord(2, "flaky-7"), 3), Kind::kOk, "");
  ExpectOutcome(processor.Process(MakeRecord(3, "other"), 1), Kind::kOk, "");
  // A prefix must start the key, not merely occur in it.
  ExpectOutcome(processor.Process(MakeRecord(4, "x-perm-1"), 1), Kind::kOk, "");
}

TEST(SimulateProcessorTest, FirstMatchingRuleWins) {
  SimulateProcessor processor(Parse(R"pb(
    rule { key_prefix: "a" fail_attempts: 1 }
    rule { key_prefix: "ab" permanent: true }
  )pb"));
  ExpectOutcome(processor.Process(MakeRecord(1, "abc"), 1), Kind::kRetriable,
                "rule a: attempt 1 of 1 fails");
  ExpectOutcome(processor.Process(MakeRecord(1, "abc"), 2), Kind::kOk, "");
}

TEST(SimulateProcessorTest, RuleOverridesRatesAndNullKeyMatchesNoRule) {
  SimulateProcessor processor(Parse(R"pb(
    permanent_failure_rate: 1.0
    rule { key_prefix: "safe-" }
  )pb"));
  ExpectOutcome(processor.Process(MakeRecord(1, "safe-1"), 1), Kind::kOk, "");
  ExpectOutcome(processor.Process(MakeRecord(1, "other"), 1), Kind::kPermanent,
                "simulated permanent failure");
  ExpectOutcome(processor.Process(MakeRecord(1, std::nullopt), 1), Kind::kPermanent,
                "simulated permanent failure");
  // An empty key is not a null key, but no rule has an empty prefix.
  ExpectOutcome(processor.Process(MakeRecord(1, ""), 1), Kind::kPermanent,
                "simulated permanent failure");
}

TEST(SimulateProcessorTest, TransientRateOneAlwaysFailsRetriably) {
  SimulateProcessor processor(Parse("transient_failure_rate: 1.0"));
  for (int attempt = 1; attempt <= 5; ++attempt) {
    ExpectOutcome(processor.Process(MakeRecord(9, "k"), attempt), Kind::kRetriable,
                  "simulated transient failure");
  }
}

std::vector<engine::Outcome> ProcessOffsets(engine::Processor& processor, int64_t count,
                                            int attempt) {
  std::vector<engine::Outcome> outcomes;
  outcomes.reserve(count);
  for (int64_t offset = 0; offset < count; ++offset) {
    outcomes.push_back(processor.Process(MakeRecord(offset, "k", "orders", offset % 3), attempt));
  }
  return outcomes;
}

bool Same(const std::vector<engine::Outcome>& a, const std::vector<engine::Outcome>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].reason != b[i].reason) return false;
  }
  return true;
}

constexpr char kRates[] = "transient_failure_rate: 0.2 permanent_failure_rate: 0.05 seed: 42";

TEST(SimulateProcessorTest, DeterministicAcrossInstances) {
  SimulateProcessor first(Parse(kRates));
  SimulateProcessor second(Parse(kRates));
  EXPECT_TRUE(Same(ProcessOffsets(first, 2000, 1), ProcessOffsets(second, 2000, 1)));
  EXPECT_TRUE(Same(ProcessOffsets(first, 2000, 3), ProcessOffsets(second, 2000, 3)));
}

TEST(SimulateProcessorTest, SeedAttemptAndRecordChangeTheOutcome) {
  SimulateProcessor processor(Parse(kRates));
  SimulateProcessor other_seed(
      Parse("transient_failure_rate: 0.2 permanent_failure_rate: 0.05 seed: 43"));
  EXPECT_FALSE(Same(ProcessOffsets(processor, 2000, 1), ProcessOffsets(other_seed, 2000, 1)));
  // A retried record must be able to succeed on a later attempt.
  EXPECT_FALSE(Same(ProcessOffsets(processor, 2000, 1), ProcessOffsets(processor, 2000, 2)));
  int differ = 0;
  for (int64_t offset = 0; offset < 2000; ++offset) {
    const engine::Outcome a = processor.Process(MakeRecord(offset, "k", "orders"), 1);
    const engine::Outcome b = processor.Process(MakeRecord(offset, "k", "payments"), 1);
    differ += a.kind != b.kind;
  }
  EXPECT_GT(differ, 0);
}

TEST(SimulateProcessorTest, DeterministicWhicheverThreadCalls) {
  SimulateProcessor processor(Parse(kRates));
  const std::vector<engine::Outcome> expected = ProcessOffsets(processor, 5000, 1);
  std::vector<std::vector<engine::Outcome>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&processor, &result] { result = ProcessOffsets(processor, 5000, 1); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_TRUE(Same(result, expected));
}

TEST(SimulateProcessorTest, RatesAreHonoured) {
  SimulateProcessor processor(Parse(kRates));
  constexpr int kRecords = 10000;
  int transient = 0;
  int permanent = 0;
  for (const engine::Outcome& outcome : ProcessOffsets(processor, kRecords, 1)) {
    transient += outcome.kind == Kind::kRetriable;
    permanent += outcome.kind == Kind::kPermanent;
  }
  // Five standard deviations of a binomial count: a correct implementation
  // never fails this, a biased one does.
  auto tolerance = [](double p) { return 5 * std::sqrt(kRecords * p * (1 - p)); };
  EXPECT_NEAR(transient, 0.2 * kRecords, tolerance(0.2));
  EXPECT_NEAR(permanent, 0.05 * kRecords, tolerance(0.05));
}

TEST(SimulateProcessorTest, FixedLatencyBlocksTheCaller) {
  SimulateProcessor processor(Parse("latency_ms: 20"));
  const absl::Time start = absl::Now();
  processor.Process(MakeRecord(1), 1);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
}

TEST(SimulateProcessorTest, LatencyRangeIsHonoured) {
  SimulateProcessor processor(Parse("latency_min_ms: 5 latency_max_ms: 8"));
  for (int64_t offset = 0; offset < 5; ++offset) {
    const absl::Time start = absl::Now();
    processor.Process(MakeRecord(offset), 1);
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(5));
  }
}

}  // namespace
}  // namespace retryd
