// The downstream outage detector (DownstreamGate) judged from outside, with
// the grpc processor against a real downstream gRPC server and the mock
// cluster: records the downstream refuses while it answers others never stop
// the engine — flaky keys never take the primary role down, a key refused
// forever reaches the DLQ after its attempts, saying why — while evidence
// that the downstream as a whole is down (its health service answering
// NOT_SERVING) pauses intake without using an attempt.
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
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

using ::grpc::health::v1::HealthCheckResponse;
using ::retryd::testing::AllAssigned;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::DownstreamServer;
using ::retryd::testing::HeaderValue;
using ::retryd::testing::Keys;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WaitForOutcomes;

constexpr size_t kPrimary = 0;
constexpr size_t kRetry = 1;

std::unique_ptr<engine::Processor> ProcessorFor(const DownstreamServer& server, int max_calls,
                                                uint32_t health_check_interval_ms = 0) {
  v1::GrpcProcessorConfig config;
  config.set_target(server.target());
  config.set_deadline_ms(5000);
  config.set_max_concurrent_calls(max_calls);
  config.set_health_check_interval_ms(health_check_interval_ms);
  absl::StatusOr<std::unique_ptr<GrpcProcessor>> processor = GrpcProcessor::Create(config);
  EXPECT_TRUE(processor.ok()) << processor.status();
  if (!processor.ok()) return nullptr;
  return *std::move(processor);
}

DownstreamServer::Answer Refusal(grpc::StatusCode code, const std::string& message) {
  DownstreamServer::Answer answer;
  answer.code = code;
  answer.message = message;
  return answer;
}

// Watches an engine's threads on its own thread until destroyed: whether a
// primary thread was ever WAITING_DOWNSTREAM. Samples every few
// milliseconds; a sample is a read of each thread's lock-free state.
class PrimaryWaitWatcher {
 public:
  explicit PrimaryWaitWatcher(const engine::Engine& engine)
      : thread_([this, &engine] {
          while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(2))) {
            for (const auto& t : engine.Threads()) {
              if (t->role() == engine::ThreadRole::kPrimary &&
                  t->state() == engine::ThreadState::kWaitingDownstream) {
                waited_.store(true);
              }
            }
          }
        }) {}
  ~PrimaryWaitWatcher() {
    stop_.Notify();
    thread_.join();
  }
  bool waited() const { return waited_.load(); }

 private:
  absl::Notification stop_;
  std::atomic<bool> waited_{false};
  std::thread thread_;
};

// The scenario an outside client found stopping the engine: every tenth key
// refused UNAVAILABLE until its third attempt, by a downstream that answers
// everything else. Refusals of the retry role (which holds exactly the
// records that failed before) must not pause the primary's intake, and the
// refused records must be judged rather than wait forever.
TEST(DownstreamDetectorTest, FlakyKeysNeverTakeThePrimaryRoleDown) {
  DownstreamServer server;
  server.SetAnswerer(
      [](const v1::ProcessRequest& request) -> std::optional<DownstreamServer::Answer> {
        int number = 0;
        const std::string& key = request.record().key();
        if (key.size() > 1 && absl::SimpleAtoi(key.substr(1), &number) && number % 10 == 0 &&
            request.attempt() < 3) {
          return Refusal(grpc::StatusCode::UNAVAILABLE, "try later");
        }
        return std::nullopt;
      });
  ASSERT_TRUE(server.Start().ok());
  const testing::TestTopics topics = CreateTopics("detector-flaky", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 2;
  options.retry.max_attempts = 5;
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 8));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 4); }, absl::Seconds(60)));

  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) keys.push_back(absl::StrFormat("k%04d", i));
  PrimaryWaitWatcher watcher(*engine);
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  const engine::DownstreamSnapshot downstream = engine->downstream();
  engine->Stop();

  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>(keys.begin(), keys.end()));
  EXPECT_TRUE(ReadAll(topics.dlq).empty());
  EXPECT_EQ(downstream.roles[kPrimary].outages, 0) << "the primary role was taken for down";
  EXPECT_FALSE(watcher.waited()) << "a primary thread waited for the downstream";
  // The mechanism engaged: refusals were seen, and judged as the records'
  // own (each flaky key reached its third attempt).
  EXPECT_GT(engine->Totals().unavailable, 0);
  for (const Record& r : ReadAll(topics.output)) {
    int number = 0;
    ASSERT_TRUE(absl::SimpleAtoi(r.key->substr(1), &number));
    if (number % 10 == 0) {
      EXPECT_EQ(HeaderValue(r, "retryd-attempt"), "3") << *r.key;
    }
  }
}

// A key the downstream refuses forever, while it answers every other: it
// uses its attempts and reaches the DLQ with the reason, and everything
// else is delivered. With a code the table dead-letters (UNAUTHENTICATED,
// PERMISSION_DENIED), at its first refusal judged its own.
class RefusedForeverTest : public ::testing::TestWithParam<grpc::StatusCode> {};

TEST_P(RefusedForeverTest, TheKeyReachesTheDlqSayingWhyAndTheRestIsDelivered) {
  const grpc::StatusCode code = GetParam();
  const std::string code_name = StatusCodeName(code);
  DownstreamServer server;
  server.SetAnswer("stuck-", Refusal(code, "not this one"));
  ASSERT_TRUE(server.Start().ok());
  const testing::TestTopics topics =
      CreateTopics(absl::StrCat("detector-forever-", absl::AsciiStrToLower(code_name)), 4);
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back(absl::StrCat("ok-", i));
  keys.push_back("stuck-1");
  ProduceKeys(topics.input, keys);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_attempts = 4;
  options.downstream = {.outage_after = 5, .probe_initial_ms = 50, .probe_max_ms = 400};
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 4));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys, absl::Seconds(60)));
  engine->Stop();

  std::vector<std::string> ok(keys.begin(), keys.end() - 1);
  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>(ok.begin(), ok.end()));
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(Keys(dlq), std::multiset<std::string>{"stuck-1"});
  const std::string error = HeaderValue(dlq[0], "retryd-error");
  EXPECT_TRUE(absl::StrContains(error, "refused while the downstream answered") ||
              absl::StrContains(error, "refused again while nothing showed the downstream down"))
      << error;
  EXPECT_TRUE(absl::StrContains(error, absl::StrCat(code_name, ": not this one"))) << error;
  const bool retriable = code == grpc::StatusCode::UNAVAILABLE;
  EXPECT_EQ(HeaderValue(dlq[0], "retryd-attempt"), retriable ? "4" : "1");
  if (retriable) {
    EXPECT_TRUE(absl::StrContains(error, "gave up after attempt 4 of 4")) << error;
  }
}

INSTANTIATE_TEST_SUITE_P(Codes, RefusedForeverTest,
                         ::testing::Values(grpc::StatusCode::UNAVAILABLE,
                                           grpc::StatusCode::UNAUTHENTICATED,
                                           grpc::StatusCode::PERMISSION_DENIED),
                         [](const auto& info) { return StatusCodeName(info.param); });

// Records in the retry topic whose backend has gone away (their last attempt
// failed INTERNAL, an answer; now the downstream refuses them forever), read
// by the retry role while nothing else is processed: more of them than
// outage_after refused in a row, with no answer between, take the retry
// role down on refusals alone; each refused probe uses an attempt of its
// record, rotating over them, so they still reach the DLQ. The primary role,
// which answered every record it had, stays up.
TEST(DownstreamDetectorTest, KeysRefusedForeverReachTheDlqWhileTheirRoleIsDown) {
  DownstreamServer server;
  server.SetAnswer("stuck-", Refusal(grpc::StatusCode::UNAVAILABLE, "try later"));
  ASSERT_TRUE(server.Start().ok());
  const testing::TestTopics topics = CreateTopics("detector-stuck-role", 4);
  std::vector<std::string> ok, stuck;
  for (int i = 0; i < 200; ++i) ok.push_back(absl::StrCat("ok-", i));
  for (int i = 0; i < 8; ++i) stuck.push_back(absl::StrCat("stuck-", i));
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_attempts = 3;
  options.downstream = {.outage_after = 3, .probe_initial_ms = 50, .probe_max_ms = 400};
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 4));
  ASSERT_NE(engine, nullptr);
  ProduceKeys(topics.input, ok);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, ok, absl::Seconds(60)));
  // Only then the stuck records, as the primary would have sent them after
  // their first attempt: nothing answers while the retry role has them.
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (size_t i = 0; i < stuck.size(); ++i) {
    engine::RetryMetadata meta;
    meta.attempt = 2;
    meta.due_ms = now_ms;
    meta.first_failure_ms = now_ms;
    meta.original_topic = topics.input;
    meta.original_partition = static_cast<int32_t>(i % 4);
    meta.original_offset = 1000 + static_cast<int64_t>(i);
    meta.error = "INTERNAL: broken";
    testing::ProduceRetryRecord(topics.retry, static_cast<int32_t>(i % 4), stuck[i], meta);
  }
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, stuck, absl::Seconds(60)));
  const engine::DownstreamSnapshot downstream = engine->downstream();
  engine->Stop();

  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>(ok.begin(), ok.end()));
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  EXPECT_EQ(Keys(dlq), std::multiset<std::string>(stuck.begin(), stuck.end()));
  for (const Record& r : dlq) {
    EXPECT_EQ(HeaderValue(r, "retryd-attempt"), "3") << *r.key;
    EXPECT_TRUE(absl::StartsWith(HeaderValue(r, "retryd-error"), "refused ")) << *r.key;
  }
  EXPECT_EQ(downstream.roles[kPrimary].outages, 0);
  EXPECT_GE(downstream.roles[kRetry].outages, 1) << "the retry role went down on refusals";
  EXPECT_GE(downstream.roles[kRetry].probes, 1);
}

// The downstream's own health service says NOT_SERVING (and it refuses
// calls meanwhile): intake pauses on every role, no attempt is used, and
// everything resumes on SERVING.
TEST(DownstreamDetectorTest, HealthNotServingPausesIntakeWithoutUsingAttempts) {
  DownstreamServer server;
  server.SetHealth("retryd.v1.RecordProcessor", HealthCheckResponse::SERVING);
  server.SetAnswer("", DownstreamServer::Answer::Delayed(absl::Milliseconds(2)));
  ASSERT_TRUE(server.Start().ok());
  const testing::TestTopics topics = CreateTopics("detector-health", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  // An attempt used for the outage would show retryd-attempt 2 in the
  // output, or (with 2 attempts in all) end in the DLQ.
  options.retry.max_attempts = 2;
  options.downstream = {.outage_after = 5, .probe_initial_ms = 50, .probe_max_ms = 400};
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, ProcessorFor(server, 4, /*health_check_interval_ms=*/100));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 4); }, absl::Seconds(60)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return engine->downstream().health.serving == engine::DownstreamHealth::Serving::kServing;
      },
      absl::Seconds(30)));

  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) keys.push_back(absl::StrCat("k-", i));
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(server.WaitForCalls(200, absl::Seconds(60)));
  server.SetHealth("retryd.v1.RecordProcessor", HealthCheckResponse::NOT_SERVING);
  server.SetAnswer("", Refusal(grpc::StatusCode::UNAVAILABLE, "draining"));
  ASSERT_TRUE(WaitFor(
      [&] {
        const engine::DownstreamSnapshot d = engine->downstream();
        return d.roles[kPrimary].down &&
               d.roles[kPrimary].evidence == engine::DownstreamEvidence::kHealth;
      },
      absl::Seconds(30)));
  // Intake paused: every primary thread stops fetching while it lasts.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const auto& t : engine->Threads()) {
          if (t->role() == engine::ThreadRole::kPrimary &&
              t->state() != engine::ThreadState::kWaitingDownstream) {
            return false;
          }
        }
        return true;
      },
      absl::Seconds(30)));
  EXPECT_EQ(engine->downstream().roles[kRetry].evidence, engine::DownstreamEvidence::kHealth);
  const size_t calls_when_down = server.calls().size();
  EXPECT_LT(calls_when_down, keys.size()) << "the outage came before the run was done";

  server.SetAnswer("", DownstreamServer::Answer::Delayed(absl::Milliseconds(2)));
  server.SetHealth("retryd.v1.RecordProcessor", HealthCheckResponse::SERVING);
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  EXPECT_FALSE(engine->downstream().down);
  engine->Stop();

  testing::ExpectAllDoneOnTheFirstAttempt(topics, keys);
}

// A downstream that goes away for 15 s under load, as a killed process
// would: every role waits on the channel's evidence, no record uses an
// attempt while it lasts, and nothing is lost or dead-lettered after.
TEST(DownstreamDetectorTest, ADownstreamAwayFor15SecondsCostsNoAttempt) {
  DownstreamServer server;
  server.SetAnswer("", DownstreamServer::Answer::Delayed(absl::Milliseconds(1)));
  ASSERT_TRUE(server.Start().ok());
  const testing::TestTopics topics = CreateTopics("detector-away", 4);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_attempts = 2;
  options.downstream = {.outage_after = 5, .probe_initial_ms = 50, .probe_max_ms = 1000};
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 8));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor([&] { return AllAssigned(*engine, 4); }, absl::Seconds(60)));
  std::vector<std::string> keys;
  for (int i = 0; i < 4000; ++i) keys.push_back(absl::StrCat("k-", i));
  ProduceKeys(topics.input, keys);
  ASSERT_TRUE(server.WaitForCalls(300, absl::Seconds(60)));
  server.Stop();
  const absl::Time back_at = absl::Now() + absl::Seconds(15);
  ASSERT_TRUE(WaitFor(
      [&] {
        const engine::DownstreamSnapshot d = engine->downstream();
        return d.roles[kPrimary].down && d.roles[kRetry].down;
      },
      absl::Seconds(30)));
  EXPECT_EQ(engine->downstream().roles[kPrimary].evidence, engine::DownstreamEvidence::kChannel);
  // While it is away: checked every 100 ms, no attempt is used.
  absl::Notification never;
  while (!never.WaitForNotificationWithTimeout(absl::Milliseconds(100)) && absl::Now() < back_at) {
    ASSERT_EQ(engine->Totals().failed_attempts, 0);
  }
  EXPECT_TRUE(engine->downstream().down);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  const engine::DownstreamSnapshot downstream = engine->downstream();
  engine->Stop();
  testing::ExpectAllDoneOnTheFirstAttempt(topics, keys);
  EXPECT_GE(downstream.roles[kPrimary].probes, 1);
}

// A target nothing ever listens on: the first refusals show the channel not
// ready, every role goes down, and probes back off (doubling up to
// probe_max_ms) rather than spin; once a server listens there, everything
// is delivered on its first attempt.
TEST(DownstreamDetectorTest, AChannelThatNeverConnectsIsProbedWithBackoff) {
  DownstreamServer server;
  ASSERT_TRUE(server.Start().ok());  // For a port of its own, free again after Stop().
  server.Stop();
  const testing::TestTopics topics = CreateTopics("detector-never", 2);
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) keys.push_back(absl::StrCat("k-", i));
  ProduceKeys(topics.input, keys);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.max_attempts = 1;
  options.downstream = {.outage_after = 5, .probe_initial_ms = 50, .probe_max_ms = 400};
  std::unique_ptr<engine::Engine> engine = StartEngine(options, ProcessorFor(server, 4));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(WaitFor(
      [&] {
        const engine::DownstreamSnapshot d = engine->downstream();
        return d.roles[kPrimary].down &&
               d.roles[kPrimary].evidence == engine::DownstreamEvidence::kChannel &&
               d.roles[kPrimary].probes >= 4;
      },
      absl::Seconds(60)));
  // Backed off: from the fourth probe on each waits the longest delay.
  const engine::DownstreamSnapshot d = engine->downstream();
  const absl::Time measured = absl::Now();
  ASSERT_TRUE(WaitFor(
      [&] { return engine->downstream().roles[kPrimary].probes >= d.roles[kPrimary].probes + 3; },
      absl::Seconds(30)));
  EXPECT_GE(absl::Now() - measured, absl::Milliseconds(2 * 400)) << "probes did not back off";
  EXPECT_EQ(engine->Totals().failed_attempts, 0);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(WaitForOutcomes(*engine, topics, keys));
  engine->Stop();
  testing::ExpectAllDoneOnTheFirstAttempt(topics, keys);
}

}  // namespace
}  // namespace retryd
