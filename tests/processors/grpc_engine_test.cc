// The engine with the grpc processor against a real downstream gRPC server
// and the mock cluster: calls in flight overlap at the downstream without
// breaking in-order output, and a downstream that goes away mid-run and
// comes back loses nothing and costs no record an attempt.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "retryd/v1/config.pb.h"
#include "server/engine/api/engine.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/stats/thread_stats.h"
#include "server/processors/grpc_processor.h"
#include "tests/support/downstream_server.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::AllAssigned;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::DownstreamServer;
using ::retryd::testing::HeaderValue;
using ::retryd::testing::Keys;
using ::retryd::testing::OutOfOrder;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ProduceRecords;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WaitForOutcomes;

std::vector<std::string> NumberedKeys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat("k-", i));
  return keys;
}

std::unique_ptr<engine::Processor> ProcessorFor(const DownstreamServer& server, int max_calls,
                                                uint32_t deadline_ms = 5000) {
  v1::GrpcProcessorConfig config;
  config.set_target(server.target());
  config.set_deadline_ms(deadline_ms);
  config.set_max_concurrent_calls(max_calls);
  absl::StatusOr<std::unique_ptr<GrpcProcessor>> processor = GrpcProcessor::Create(config);
  EXPECT_TRUE(processor.ok()) << processor.status();
  if (!processor.ok()) return nullptr;
  return *std::move(processor);
}

TEST(GrpcEngineTest, InOrderCallsOverlapAcrossPartitionsAndOutputStaysInOrder) {
  DownstreamServer server;
  ASSERT_TRUE(server.Start().ok());
  server.SetAnswer("", DownstreamServer::Answer::Delayed(absl::Milliseconds(3)));
  const testing::TestTopics topics = CreateTopics("grpc-inorder", 4);
  const std::vector<std::string> keys = NumberedKeys(800);
  ProduceKeys(topics.input, keys);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 8));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();

  EXPECT_GT(server.peak_in_progress(), 1) << "calls of different partitions overlap";
  // Per input partition, each call arrived after the one before it was
  // answered: one call per partition at a time.
  std::map<int32_t, std::vector<DownstreamServer::Call>> by_partition;
  for (DownstreamServer::Call& call : server.calls()) {
    by_partition[call.request.record().partition()].push_back(std::move(call));
  }
  int overlapping = 0;
  for (auto& [partition, calls] : by_partition) {
    std::sort(calls.begin(), calls.end(),
              [](const auto& a, const auto& b) { return a.arrived < b.arrived; });
    for (size_t i = 1; i < calls.size(); ++i) {
      if (calls[i].arrived < calls[i - 1].finished) ++overlapping;
      EXPECT_GT(calls[i].request.record().offset(), calls[i - 1].request.record().offset());
    }
  }
  EXPECT_EQ(overlapping, 0);
  const std::vector<Record> output = ReadAll(topics.output);
  EXPECT_EQ(Keys(output), std::multiset<std::string>(keys.begin(), keys.end()));
  EXPECT_EQ(OutOfOrder(output), 0);
}

TEST(GrpcEngineTest, DownstreamGoingAwayMidRunLosesNothingAndSpendsNoAttempt) {
  DownstreamServer server;
  ASSERT_TRUE(server.Start().ok());
  server.SetAnswer("", DownstreamServer::Answer::Delayed(absl::Milliseconds(2)));
  const testing::TestTopics topics = CreateTopics("grpc-outage", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  // A record charged an attempt for the outage would show retryd-attempt 2
  // in the output, or (with 2 attempts in all) end in the DLQ.
  options.retry.max_attempts = 2;
  options.downstream = {.outage_after = 3, .probe_initial_ms = 50, .probe_max_ms = 400};
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 4));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 4); }, absl::Seconds(60)));

  const std::vector<std::string> keys = NumberedKeys(3000);
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(server.WaitForCalls(300, absl::Seconds(60)));
  server.Stop();  // Calls in progress end CANCELLED, later ones UNAVAILABLE.
  ASSERT_TRUE(WaitFor([&] { return engine->downstream().down; }, absl::Seconds(30)));
  const size_t calls_when_down = server.calls().size();
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  EXPECT_FALSE(engine->downstream().down);
  EXPECT_GE(engine->downstream().outages, 1);
  EXPECT_GT(engine->Totals().unavailable, 0);
  engine->Stop();

  testing::ExpectAllDoneOnTheFirstAttempt(topics, keys);
  EXPECT_LT(calls_when_down, keys.size()) << "the outage came before the run was done";
}

// A retry thread at its call limit, holding records already due, waits for
// a call to end (its outcome wakes the poll) instead of polling again at
// once: spinning like that, it polls thousands of times per call and takes
// the CPU from the calls it waits for.
TEST(GrpcEngineTest, RetryThreadAtItsCallLimitWaitsForACallToEnd) {
  DownstreamServer server;
  ASSERT_TRUE(server.Start().ok());
  server.SetAnswer("", DownstreamServer::Answer::Delayed(absl::Milliseconds(20)));
  const testing::TestTopics topics = CreateTopics("grpc-due-at-limit", 2);
  // Due a second ago, as an earlier run left them.
  const std::vector<std::string> keys = NumberedKeys(60);
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::vector<OutgoingRecord> records;
  for (size_t i = 0; i < keys.size(); ++i) {
    engine::RetryMetadata meta;
    meta.attempt = 2;
    meta.due_ms = now_ms - 1000;
    meta.first_failure_ms = now_ms - 2000;
    meta.original_topic = topics.input;
    meta.original_partition = static_cast<int32_t>(i % 2);
    meta.original_offset = static_cast<int64_t>(i / 2);
    meta.original_timestamp_ms = now_ms - 2000;
    meta.error = "failed before";
    records.push_back({.topic = topics.retry,
                       .partition = static_cast<int32_t>(i % 2),
                       .key = keys[i],
                       .value = "v-" + keys[i],
                       .headers = engine::WithRetryHeaders({}, meta)});
  }
  ProduceRecords(records);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 1));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  int64_t polls = -1;
  for (const auto& stats : engine->Threads()) {
    if (stats->role() == engine::ThreadRole::kRetry) polls = stats->counters.Read().polls;
  }
  engine->Stop();

  EXPECT_EQ(server.peak_in_progress(), 1);
  EXPECT_EQ(ReadAll(topics.output).size(), keys.size());
  // A few polls per call, plus some while joining the group; spinning
  // through 60 calls of 20 ms each, it polled millions of times.
  ASSERT_GE(polls, 0) << "no retry thread";
  EXPECT_LT(polls, static_cast<int64_t>(10 * keys.size())) << polls << " polls";
}

// A call retryd cancels itself (here, a stop that outlasts its deadline)
// uses up no attempt: nothing is committed past the record, and the next run
// processes it as its first attempt.
TEST(GrpcEngineTest, CallsCancelledByAStopSpendNoAttempt) {
  DownstreamServer server;
  ASSERT_TRUE(server.Start().ok());
  server.SetAnswer("slow-", DownstreamServer::Answer::Delayed(absl::Minutes(10)));
  const testing::TestTopics topics = CreateTopics("grpc-stop", 2);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.shutdown_timeout_ms = 1000;
  options.retry.max_attempts = 2;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 1, 600000));
  ASSERT_NE(engine, nullptr);
  ProduceKeys(topics.input, {"slow-1"});
  ASSERT_TRUE(server.WaitForInProgress(1, absl::Seconds(60)));
  engine->Stop();
  EXPECT_TRUE(server.WaitForCancelled(1, absl::Seconds(10))) << "the stop cancelled the call";
  EXPECT_TRUE(ReadAll(topics.output).empty());
  EXPECT_TRUE(ReadAll(topics.retry).empty());
  EXPECT_TRUE(ReadAll(topics.dlq).empty());

  // The next run, same group: the record again, as its first attempt.
  server.SetAnswer("slow-", DownstreamServer::Answer::Delayed(absl::ZeroDuration()));
  engine = StartEngine(options, ProcessorFor(server, 1));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, {"slow-1"}));
  engine->Stop();
  const std::vector<Record> output = ReadAll(topics.output);
  ASSERT_EQ(output.size(), 1u);
  EXPECT_EQ(HeaderValue(output[0], "retryd-attempt"), "1");
  const std::vector<DownstreamServer::Call> calls = server.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].request.attempt(), 1);
}

}  // namespace
}  // namespace retryd
