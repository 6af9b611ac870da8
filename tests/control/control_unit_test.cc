// Unit tests of the control plane's pieces that need no server: status
// mapping, the bearer-token check, counters into protos, the snapshot
// builder, the executor and the control config.
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/auth.h"
#include "server/control/blocking_executor.h"
#include "server/control/control_config.h"
#include "server/control/proto_convert.h"
#include "server/control/request_validation.h"
#include "server/control/snapshot_builder.h"
#include "server/control/status.h"
#include "tests/control/control_test_util.h"
#include "tests/support/temp_dir.h"

namespace retryd::control {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusMappingTest, KeepsEveryCodeAndTheMessage) {
  const std::vector<std::pair<absl::StatusCode, grpc::StatusCode>> codes = {
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [absl_code, grpc_code] : codes) {
    const grpc::Status s = ToGrpcStatus(absl::Status(absl_code, "what happened"));
    EXPECT_EQ(s.error_code(), grpc_code) << absl::StatusCodeToString(absl_code);
    EXPECT_EQ(s.error_message(), "what happened");
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

TEST(BearerTokenAuthTest, WithoutATokenEverythingPasses) {
  const BearerTokenAuth auth;
  EXPECT_TRUE(auth.Check({}, Access::kMutating).ok());
  EXPECT_TRUE(auth.Check({}, Access::kReadOnly).ok());
}

TEST(BearerTokenAuthTest, MutatingCallsNeedTheRightToken) {
  const BearerTokenAuth auth("s3cret-token", /*read_only_requires_token=*/false);
  const absl::Status missing = auth.Check({}, Access::kMutating);
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), HasSubstr("authorization: Bearer"));
  EXPECT_TRUE(auth.Check({}, Access::kReadOnly).ok());

  const std::string right = "Bearer s3cret-token", lower = "bearer s3cret-token",
                    wrong = "Bearer s3cret-tokem", prefix = "Bearer s3cret",
                    longer = "Bearer s3cret-token-and-more", basic = "Basic czNjcmV0",
                    empty = "Bearer ";
  auto check = [&](const std::string& value) {
    Metadata md{{"authorization", value}};
    return auth.Check(md, Access::kMutating);
  };
  EXPECT_TRUE(check(right).ok());
  EXPECT_TRUE(check(lower).ok()) << "the scheme is case-insensitive";
  for (const std::string* bad : {&wrong, &prefix, &longer, &basic, &empty}) {
    const absl::Status s = check(*bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << *bad;
    EXPECT_THAT(s.message(), Not(HasSubstr("s3cret-token"))) << "never echo the token";
  }
}

TEST(BearerTokenAuthTest, ReadOnlyCallsNeedItWhenConfigured) {
  const BearerTokenAuth auth("tok", /*read_only_requires_token=*/true);
  EXPECT_EQ(auth.Check({}, Access::kReadOnly).code(), absl::StatusCode::kUnauthenticated);
  const std::string right = "Bearer tok";
  Metadata md{{"authorization", right}};
  EXPECT_TRUE(auth.Check(md, Access::kReadOnly).ok());
}

// The HTTP listener's form: the Authorization header's value, the same rule.
TEST(BearerTokenAuthTest, HeaderCheckIsTheMetadataCheck) {
  const BearerTokenAuth open("tok", /*read_only_requires_token=*/false);
  EXPECT_TRUE(open.CheckHeader(std::nullopt, Access::kReadOnly).ok());
  EXPECT_EQ(open.CheckHeader(std::nullopt, Access::kMutating).code(),
            absl::StatusCode::kUnauthenticated);
  const BearerTokenAuth closed("tok", /*read_only_requires_token=*/true);
  const absl::Status missing = closed.CheckHeader(std::nullopt, Access::kReadOnly);
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), HasSubstr("send the header \"authorization: Bearer <token>\""));
  EXPECT_TRUE(closed.CheckHeader("Bearer tok", Access::kReadOnly).ok());
  EXPECT_TRUE(closed.CheckHeader("bearer tok", Access::kMutating).ok());
  for (const char* bad : {"Bearer tom", "Bearer ", "Basic dG9r", "tok"}) {
    EXPECT_EQ(closed.CheckHeader(bad, Access::kReadOnly).code(), absl::StatusCode::kUnauthenticated)
        << bad;
  }
}

TEST(BearerTokenAuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(BearerTokenAuth::ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(BearerTokenAuth::ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(BearerTokenAuth::ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(BearerTokenAuth::ConstantTimeEquals("abcabc", "abc"));
  EXPECT_FALSE(BearerTokenAuth::ConstantTimeEquals("", "abc"));
  EXPECT_FALSE(BearerTokenAuth::ConstantTimeEquals("abc", ""));
  EXPECT_TRUE(BearerTokenAuth::ConstantTimeEquals("", ""));
}

// ---- SnapshotBuilder ---------------------------------------------------------

engine::ThreadSample Thread(int id, engine::ThreadState state, int64_t state_since_ms,
                            int64_t processed) {
  engine::ThreadSample t;
  t.id = id;
  t.role = id == 1 ? engine::ThreadRole::kPrimary : engine::ThreadRole::kRetry;
  t.state = state;
  t.state_since_ms = state_since_ms;
  t.processed = processed;
  t.partitions = {{"in", 0}};
  return t;
}

// Records `n` latencies of `ms` into `counts`.
void Record(engine::LatencyHistogram::Counts& counts, int n, double ms) {
  counts[engine::LatencyHistogram::BucketOf(static_cast<int64_t>(ms * 1000))] += n;
}

std::shared_ptr<const engine::EngineSample> Sample(int64_t time_ms,
                                                   std::vector<engine::ThreadSample> threads) {
  auto s = std::make_shared<engine::EngineSample>();
  s->time_ms = time_ms;
  s->state = engine::EngineState::kRunning;
  s->retry_backlog = 7;
  s->threads = std::move(threads);
  return s;
}

std::vector<uint32_t> Ids(const v1::MetricsSnapshot& snapshot) {
  std::vector<uint32_t> ids;
  for (const auto& t : snapshot.threads()) ids.push_back(t.thread_id());
  return ids;
}

TEST(SnapshotBuilderTest, LatenciesCoverTheIntervalCountsAreCumulative) {
  std::vector<std::tuple<int, int64_t, int64_t>> max_queries;
  SnapshotBuilder builder({}, /*watch_start_ms=*/1000, [&](int id, int64_t from, int64_t to) {
    max_queries.emplace_back(id, from, to);
    return engine::MaxLatencies{.processing_ms = 120.0, .end_to_end_ms = 99.0};
  });
  engine::ThreadSample first = Thread(1, engine::ThreadState::kRunning, 500, 10);
  first.parked = 4;
  Record(first.processing, 10, 1.0);
  v1::MetricsSnapshot out;
  auto sample = std::make_shared<engine::EngineSample>(*Sample(1000, {first}));
  sample->ordering = engine::Ordering::kKey;
  builder.Build(sample, out);
  EXPECT_EQ(out.ordering(), v1::ORDERING_KEY);
  EXPECT_FALSE(out.in_order());
  EXPECT_EQ(out.interval_ms(), 0u) << "the first snapshot has no interval";
  EXPECT_EQ(out.time_unix_ms(), 1000);
  EXPECT_EQ(out.retry_backlog(), 7);
  EXPECT_EQ(out.engine_state(), v1::ENGINE_STATE_RUNNING);
  ASSERT_EQ(out.threads_size(), 1);
  EXPECT_EQ(out.threads(0).processing_latency().count(), 10u);
  EXPECT_EQ(out.threads(0).time_in_state_ms(), 500);
  EXPECT_EQ(out.threads(0).role(), v1::THREAD_ROLE_PRIMARY);
  ASSERT_EQ(out.threads(0).assigned_partitions_size(), 1);
  EXPECT_EQ(out.threads(0).parked(), 4);

  engine::ThreadSample second = first;
  second.processed = 15;
  Record(second.processing, 5, 100.0);  // Only these five fall in the interval.
  builder.Build(Sample(1200, {second}), out);
  EXPECT_EQ(out.interval_ms(), 200u);
  ASSERT_EQ(out.threads_size(), 1);
  const v1::ThreadMetrics& t = out.threads(0);
  EXPECT_EQ(t.processed(), 15) << "counts are cumulative";
  EXPECT_EQ(t.processing_latency().count(), 5u);
  EXPECT_GE(t.processing_latency().p50_ms(), 80.0);
  EXPECT_LE(t.processing_latency().p50_ms(), 120.0) << "never above the exact max";
  EXPECT_DOUBLE_EQ(t.processing_latency().max_ms(), 120.0);
  EXPECT_EQ(t.end_to_end_latency().count(), 0u);
  EXPECT_DOUBLE_EQ(t.end_to_end_latency().max_ms(), 99.0);
  ASSERT_EQ(max_queries.size(), 2u);
  EXPECT_EQ(max_queries[1], std::make_tuple(1, int64_t{1000}, int64_t{1200}));

  // No newer sample: the same interval again, not an empty one.
  builder.Build(Sample(1200, {second}), out);
  EXPECT_EQ(out.interval_ms(), 200u);
  EXPECT_EQ(out.threads(0).processing_latency().count(), 5u);
}

TEST(SnapshotBuilderTest, StoppedThreadAppearsOnceThenLeaves) {
  SnapshotBuilder builder({}, 1000, [](int, int64_t, int64_t) { return engine::MaxLatencies{}; });
  v1::MetricsSnapshot out;
  builder.Build(Sample(1000, {Thread(1, engine::ThreadState::kRunning, 0, 0),
                              Thread(2, engine::ThreadState::kRunning, 0, 0),
                              Thread(9, engine::ThreadState::kStopped, 900, 0)}),
                out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(1, 2)) << "9 stopped before the watch began";

  builder.Build(Sample(1100, {Thread(1, engine::ThreadState::kRunning, 0, 0),
                              Thread(2, engine::ThreadState::kStopped, 1050, 0),
                              Thread(9, engine::ThreadState::kStopped, 900, 0)}),
                out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(1, 2));
  EXPECT_EQ(out.threads(1).state(), v1::THREAD_STATE_STOPPED);

  builder.Build(Sample(1200, {Thread(1, engine::ThreadState::kRunning, 0, 0),
                              Thread(2, engine::ThreadState::kStopped, 1050, 0),
                              Thread(3, engine::ThreadState::kStarting, 1150, 0)}),
                out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(1, 3)) << "2 left, the new 3 appeared";

  builder.Build(Sample(1300, {Thread(1, engine::ThreadState::kRunning, 0, 0),
                              Thread(3, engine::ThreadState::kFailed, 1250, 0)}),
                out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(1, 3));
  EXPECT_EQ(out.threads(1).state(), v1::THREAD_STATE_FAILED);
  builder.Build(Sample(1400, {Thread(1, engine::ThreadState::kRunning, 0, 0),
                              Thread(3, engine::ThreadState::kFailed, 1250, 0)}),
                out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(1));
}

TEST(SnapshotBuilderTest, FiltersByIdAndIgnoresUnknownIds) {
  SnapshotBuilder builder({2, 77}, 0, [](int, int64_t, int64_t) { return engine::MaxLatencies{}; });
  v1::MetricsSnapshot out;
  builder.Build(Sample(1000, {Thread(1, engine::ThreadState::kRunning, 0, 0),
                              Thread(2, engine::ThreadState::kIdle, 0, 0)}),
                out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(2));
  builder.Build(Sample(1100, {Thread(1, engine::ThreadState::kRunning, 0, 0),
                              Thread(77, engine::ThreadState::kStarting, 1050, 0)}),
                out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(77)) << "a named thread that starts later appears";
}

TEST(SnapshotBuilderTest, CarriesTheRecentScalingEventsWhateverTheFilter) {
  SnapshotBuilder builder({77}, 0, [](int, int64_t, int64_t) { return engine::MaxLatencies{}; });
  auto sample = std::make_shared<engine::EngineSample>(*Sample(1000, {}));
  sample->scaling_events = {{900, 3, true, "retry backlog of 50 records is over ..."},
                            {950, 3, false, "idle for 1500 ms (no partitions)"}};
  v1::MetricsSnapshot out;
  builder.Build(sample, out);
  ASSERT_EQ(out.scaling_events_size(), 2);
  EXPECT_EQ(out.scaling_events(0).time_unix_ms(), 900);
  EXPECT_EQ(out.scaling_events(0).thread_id(), 3u);
  EXPECT_TRUE(out.scaling_events(0).started());
  EXPECT_FALSE(out.scaling_events(1).started());
  EXPECT_EQ(out.scaling_events(1).reason(), "idle for 1500 ms (no partitions)");
  builder.Build(Sample(1100, {}), out);
  EXPECT_EQ(out.scaling_events_size(), 0) << "replaced, not appended";
}

// ---- BlockingExecutor --------------------------------------------------------

TEST(ProtoConvertTest, InFlightRecordKeepsEveryFieldAndANullKey) {
  engine::InFlightRecord r;
  r.thread_id = 3;
  r.role = engine::ThreadRole::kRetry;
  r.state = engine::InFlightState::kWaitingDue;
  r.topic = "orders";
  r.partition = 2;
  r.offset = 41;
  r.read_from = {"orders.retry", 1};
  r.read_offset = 7;
  r.key = std::string("\0k", 2);
  r.attempt = 3;
  r.due_ms = 5'000;
  r.since_ms = 1'000;
  r.last_error = "timeout";
  v1::InFlightRecord out;
  ToProto(r, /*now_ms=*/4'000, out);
  EXPECT_EQ(out.thread_id(), 3u);
  EXPECT_EQ(out.role(), v1::THREAD_ROLE_RETRY);
  EXPECT_EQ(out.state(), v1::IN_FLIGHT_STATE_WAITING_DUE);
  EXPECT_EQ(out.topic(), "orders");
  EXPECT_EQ(out.partition(), 2);
  EXPECT_EQ(out.offset(), 41);
  EXPECT_EQ(out.read_from().topic(), "orders.retry");
  EXPECT_EQ(out.read_from().partition(), 1);
  EXPECT_EQ(out.read_offset(), 7);
  EXPECT_TRUE(out.has_key());
  EXPECT_EQ(out.key(), std::string("\0k", 2));
  EXPECT_EQ(out.attempt(), 3);
  EXPECT_EQ(out.due_unix_ms(), 5'000);
  EXPECT_EQ(out.since_unix_ms(), 1'000);
  EXPECT_EQ(out.age_ms(), 3'000);
  EXPECT_EQ(out.last_error(), "timeout");

  r.key.reset();
  v1::InFlightRecord null_key;
  ToProto(r, 0, null_key);
  EXPECT_FALSE(null_key.has_key());
  EXPECT_EQ(null_key.age_ms(), 0) << "never negative";
  for (engine::InFlightState s :
       {engine::InFlightState::kInCall, engine::InFlightState::kWaitingDue,
        engine::InFlightState::kWaitingBehind, engine::InFlightState::kDeferred}) {
    EXPECT_EQ(v1::InFlightState_Name(ToProto(s)),
              absl::StrCat("IN_FLIGHT_STATE_", engine::InFlightStateName(s)));
  }
}

// The protos take the counters by field name: a counter renamed on one
// side only would silently read 0.
TEST(ProtoConvertTest, CountersReachTheirProtoFieldsByName) {
  engine::EngineTotals totals;
  totals.processed = 1;
  totals.succeeded = 2;
  totals.failed_attempts = 3;
  totals.sent_to_retry = 4;
  totals.dead_lettered = 5;
  totals.due_clamped = 6;
  totals.backpressure_waits = 7;
  totals.consumed = 8;
  totals.in_flight = 9;
  totals.followed = 10;

  v1::ThreadMetrics thread;
  ToProto(static_cast<const engine::Counters&>(totals), thread);
  EXPECT_EQ(thread.processed(), 1);
  EXPECT_EQ(thread.succeeded(), 2);
  EXPECT_EQ(thread.failed_attempts(), 3);
  EXPECT_EQ(thread.sent_to_retry(), 4);
  EXPECT_EQ(thread.dead_lettered(), 5);
  EXPECT_EQ(thread.due_clamped(), 6);
  EXPECT_EQ(thread.backpressure_waits(), 7);
  EXPECT_EQ(thread.followed(), 10);
  EXPECT_EQ(thread.in_flight(), 0) << "a gauge, not a counter";

  v1::Totals out;
  ToProto(totals, out);
  EXPECT_EQ(out.consumed(), 8);
  EXPECT_EQ(out.processed(), 1);
  EXPECT_EQ(out.succeeded(), 2);
  EXPECT_EQ(out.failed_attempts(), 3);
  EXPECT_EQ(out.sent_to_retry(), 4);
  EXPECT_EQ(out.dead_lettered(), 5);
  EXPECT_EQ(out.in_flight(), 9);
  EXPECT_EQ(out.followed(), 10);
}

TEST(ProtoConvertTest, OrderingAndParkedKeys) {
  for (const engine::Ordering o :
       {engine::Ordering::kUnordered, engine::Ordering::kInOrder, engine::Ordering::kKey}) {
    EXPECT_NE(ToProto(o), v1::ORDERING_UNSPECIFIED) << engine::OrderingName(o);
    EXPECT_EQ(FromProto(ToProto(o)), o) << engine::OrderingName(o);
  }
  EXPECT_EQ(ToProto(engine::Ordering::kKey), v1::ORDERING_KEY);
  EXPECT_EQ(FromProto(v1::ORDERING_UNSPECIFIED), std::nullopt);
  EXPECT_EQ(FromProto(static_cast<v1::Ordering>(7)), std::nullopt);

  v1::ParkedKeys out;
  ToProto(engine::ParkedKeysSummary{}, out);
  EXPECT_EQ(out.keys(), 0);
  EXPECT_EQ(out.records(), 0);
  EXPECT_EQ(out.oldest_unix_ms(), 0) << "none parked: no time, not the far future";
  ToProto(engine::ParkedKeysSummary{.keys = 2, .records = 5, .oldest = absl::FromUnixMillis(1234)},
          out);
  EXPECT_EQ(out.keys(), 2);
  EXPECT_EQ(out.records(), 5);
  EXPECT_EQ(out.oldest_unix_ms(), 1234);
}

// ---- request validation -------------------------------------------------------

TEST(RequestValidationTest, SetOrderingModeNeedsAModeAndDrainOnlyIntoInOrder) {
  v1::SetOrderingModeRequest request;
  absl::Status s = ValidateSetOrderingModeRequest(request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("mode: "));
  EXPECT_THAT(s.message(), HasSubstr("ORDERING_UNSPECIFIED (not set)"));
  request.set_mode(static_cast<v1::Ordering>(99));
  EXPECT_THAT(ValidateSetOrderingModeRequest(request).message(), HasSubstr("got 99"));

  for (const v1::Ordering mode :
       {v1::ORDERING_UNORDERED, v1::ORDERING_IN_ORDER, v1::ORDERING_KEY}) {
    request.set_mode(mode);
    request.set_drain_retries(false);
    EXPECT_TRUE(ValidateSetOrderingModeRequest(request).ok()) << mode;
    request.set_drain_retries(true);
    s = ValidateSetOrderingModeRequest(request);
    EXPECT_EQ(s.ok(), mode == v1::ORDERING_IN_ORDER) << mode << ": " << s;
    if (!s.ok()) {
      EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("drain_retries: "));
    }
  }
}

TEST(BlockingExecutorTest, RunsTasksAndBoundsTheQueue) {
  BlockingExecutor executor("test-exec", /*threads=*/1, /*max_queued=*/1);
  absl::Notification release, started;
  ASSERT_TRUE(executor
                  .Submit([&] {
                    started.Notify();
                    release.WaitForNotification();
                  })
                  .ok());
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::BlockingCounter ran(2);
  ASSERT_TRUE(executor.Submit([&] { ran.DecrementCount(); }).ok());
  ASSERT_TRUE(executor.Submit([&] { ran.DecrementCount(); }).ok());
  const absl::Status full = executor.Submit([] {});
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  release.Notify();
  ran.Wait();
  executor.Shutdown();
  EXPECT_EQ(executor.Submit([] {}).code(), absl::StatusCode::kUnavailable);
  executor.Shutdown();  // Idempotent.
}

TEST(BlockingExecutorTest, ShutdownRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    BlockingExecutor executor("test-exec", 2, 8);
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(executor.Submit([&] { ++ran; }).ok());
  }
  EXPECT_EQ(ran.load(), 8);
}

// ---- ControlServerOptionsFromConfig -------------------------------------------

class ControlConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { config_.set_listen_address("127.0.0.1:0"); }
  absl::Status Load() { return ControlServerOptionsFromConfig(config_).status(); }

  const testing::TempDir dir_;
  retryd::v1::Config config_;
};

TEST_F(ControlConfigTest, DefaultsToNoTokenAndPlaintext) {
  config_.clear_listen_address();
  absl::StatusOr<ControlServerOptions> options = ControlServerOptionsFromConfig(config_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->listen_address, "127.0.0.1:50051");
  EXPECT_FALSE(options->auth_token.has_value());
  EXPECT_FALSE(options->tls.has_value());
}

TEST_F(ControlConfigTest, ReadsTheTokenFromAFileOrTheEnvironment) {
  config_.mutable_control()->set_auth_token_file(dir_.WriteFile("token", "file-token\n"));
  absl::StatusOr<ControlServerOptions> options = ControlServerOptionsFromConfig(config_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->auth_token, "file-token") << "one trailing newline is stripped";

  config_.mutable_control()->clear_auth_token_file();
  config_.mutable_control()->set_auth_token_env("RETRYD_CONTROL_TEST_TOKEN");
  setenv("RETRYD_CONTROL_TEST_TOKEN", "env-token", 1);
  config_.mutable_control()->set_read_only_requires_token(true);
  options = ControlServerOptionsFromConfig(config_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->auth_token, "env-token");
  EXPECT_TRUE(options->read_only_requires_token);
  EXPECT_EQ(options->config.control().auth_token_env(), "RETRYD_CONTROL_TEST_TOKEN")
      << "the effective config names the variable, never the value";
  unsetenv("RETRYD_CONTROL_TEST_TOKEN");
}

// Beyond loopback the config must name a token or mutual TLS, or opt in;
// unix sockets and loopback names are local.
TEST_F(ControlConfigTest, RemoteListenAddressNeedsAuthenticationOrTheOptIn) {
  for (const char* local :
       {"127.0.0.1:0", "127.1.2.3:0", "[::1]:0", "localhost:0", "unix:/run/retryd.sock"}) {
    config_.set_listen_address(local);
    EXPECT_TRUE(Load().ok()) << local << ": " << Load();
  }
  config_.set_listen_address("0.0.0.0:50051");
  const absl::Status refused = Load();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("0.0.0.0:50051"));
  EXPECT_THAT(refused.message(), HasSubstr("control.allow_unauthenticated_remote: true"));

  const std::string pem = dir_.WriteFile("fake.pem", "-----BEGIN SOMETHING-----\n");
  config_.mutable_control()->set_tls_cert_file(pem);
  config_.mutable_control()->set_tls_key_file(pem);
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument) << "TLS alone authenticates no one";
  config_.mutable_control()->set_tls_client_ca_file(pem);
  EXPECT_TRUE(Load().ok()) << "mutual TLS: " << Load();
  config_.mutable_control()->clear_tls_client_ca_file();

  config_.mutable_control()->set_auth_token_file(dir_.WriteFile("token", "t0ken\n"));
  EXPECT_TRUE(Load().ok()) << "token: " << Load();
  config_.mutable_control()->clear_auth_token_file();

  config_.mutable_control()->set_allow_unauthenticated_remote(true);
  absl::StatusOr<ControlServerOptions> options = ControlServerOptionsFromConfig(config_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->allow_unauthenticated_remote);
}

TEST_F(ControlConfigTest, ErrorsNameTheField) {
  struct Case {
    std::function<void(retryd::v1::ControlConfig&)> set;
    std::string field;
  };
  const std::string empty_token = dir_.WriteFile("empty", "\n");
  const std::string spaced_token = dir_.WriteFile("spaced", "two words\n");
  const std::string not_pem = dir_.WriteFile("not-pem", "hello\n");
  const std::vector<Case> cases = {
      {[&](auto& c) { c.set_auth_token_file(dir_.Path("missing")); }, "control.auth_token_file"},
      {[&](auto& c) { c.set_auth_token_file(empty_token); }, "control.auth_token_file"},
      {[&](auto& c) { c.set_auth_token_file(spaced_token); }, "control.auth_token_file"},
      {[&](auto& c) {
         c.set_auth_token_file(empty_token);
         c.set_auth_token_env("X");
       },
       "control.auth_token_file"},
      {[&](auto& c) { c.set_auth_token_env("RETRYD_CONTROL_TEST_UNSET_VARIABLE"); },
       "control.auth_token_env"},
      {[&](auto& c) { c.set_read_only_requires_token(true); }, "control.read_only_requires_token"},
      {[&](auto& c) { c.set_tls_cert_file(not_pem); }, "control.tls_key_file"},
      {[&](auto& c) { c.set_tls_key_file(not_pem); }, "control.tls_cert_file"},
      {[&](auto& c) {
         c.set_tls_cert_file(not_pem);
         c.set_tls_key_file(not_pem);
       },
       "control.tls_cert_file"},
      {[&](auto& c) { c.set_tls_client_ca_file(not_pem); }, "control.tls_client_ca_file"},
  };
  for (const Case& c : cases) {
    config_.clear_control();
    c.set(*config_.mutable_control());
    const absl::Status s = Load();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field + ":")) << s;
  }
  config_.clear_control();
  config_.mutable_control()->set_auth_token_file(dir_.Path("missing"));
  EXPECT_THAT(Load().message(), HasSubstr(dir_.Path("missing"))) << "names the path";
}

}  // namespace
}  // namespace retryd::control
