// The control API end to end: a real ControlServer on 127.0.0.1:0 in front
// of a real engine on the mock cluster, driven through RetrydClient (and the
// generated stub where a test needs a request or a status RetrydClient does
// not give).
// The suite shares one engine (a new consumer group takes seconds to get
// its first assignment); each test leaves it with one retry thread, not in
// order (unordered).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/error_reason.h"
#include "server/control/control_server.h"
#include "tests/control/control_test_util.h"
#include "tests/support/wait_for.h"

namespace retryd::control {
namespace {

using ::retryd::testing::Broker;
using ::retryd::testing::Channel;
using ::retryd::testing::Client;
using ::retryd::testing::EngineUnderTest;
using ::retryd::testing::RetryThreadIds;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WatchStatus;
using ::testing::ContainsRegex;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr int kMaxRetryThreads = 4;

// A WatchMetrics stream on the generated stub, for the tests that assert the
// status a stream ends with once the client cancels it: RetrydClient reports
// its own cancellation as OK, not as the CANCELLED the stream ends with.
std::unique_ptr<grpc::ClientReader<v1::MetricsSnapshot>> WatchOnStub(v1::Control::Stub& stub,
                                                                     grpc::ClientContext& context,
                                                                     uint32_t interval_ms) {
  v1::WatchMetricsRequest request;
  request.set_interval_ms(interval_ms);
  return stub.WatchMetrics(&context, request);
}

class ControlApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = testing::StartEngineUnderTest("control-api", /*retry_threads=*/1, kMaxRetryThreads)
                  .release();
    if (engine_ == nullptr) return;
    // What the Kubernetes example's Downward API sets; GetStatus shows it.
    setenv("POD_NAME", "retryd-test-0", 1);
    setenv("POD_NAMESPACE", "retryd-tests", 1);
    server_ = new ControlServer(*engine_->engine);
    ControlServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.config.set_group_id("control-api-config");
    options.probe_interval = absl::Milliseconds(200);
    if (absl::Status s = server_->Start(options); !s.ok()) {
      ADD_FAILURE() << s;
      return;
    }
    ready_ = true;
  }

  static void TearDownTestSuite() {
    if (server_ != nullptr) server_->Stop();
    delete server_;
    server_ = nullptr;
    if (engine_ != nullptr) engine_->engine->Stop();
    delete engine_;
    engine_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(ready_) << "the suite's engine or server did not start";
    client_ = Client(Channel(Target()));
  }

  // Every test leaves one retry thread and the engine unordered, as it
  // found them.
  void TearDown() override {
    if (!ready_ || client_ == nullptr) return;
    engine_->processor->set_failing(false);
    if (engine_->engine->ordering() != engine::Ordering::kUnordered) {
      EXPECT_TRUE(client_->SetOrderingMode(v1::ORDERING_UNORDERED, false).ok());
    }
    std::vector<uint32_t> retry = RetryThreadIds(*client_);
    if (retry.size() > 1) {
      std::vector<uint32_t> extra(retry.begin() + 1, retry.end());
      EXPECT_TRUE(client_->StopRetryThreadsById(extra, /*graceful=*/true).ok());
    } else if (retry.empty()) {
      EXPECT_TRUE(client_->StartRetryThreads(1).ok());
    }
  }

  static std::string Target() { return absl::StrCat("127.0.0.1:", server_->port()); }

  static EngineUnderTest* engine_;
  static ControlServer* server_;
  static bool ready_;
  std::unique_ptr<RetrydClient> client_;
};

EngineUnderTest* ControlApiTest::engine_ = nullptr;
ControlServer* ControlApiTest::server_ = nullptr;
bool ControlApiTest::ready_ = false;

TEST_F(ControlApiTest, GetStatusReportsEngineThreadsAndConfig) {
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::GetStatusResponse> s = client_->GetStatus();
        return s.ok() && s->kafka_reachable();
      },
      absl::Seconds(30)))
      << "kafka_reachable never became true";
  const absl::StatusOr<v1::GetStatusResponse> response = client_->GetStatus();
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::GetStatusResponse& status = *response;
  EXPECT_EQ(status.state(), v1::ENGINE_STATE_RUNNING);
  EXPECT_FALSE(status.in_order());
  EXPECT_EQ(status.ordering(), v1::ORDERING_UNORDERED);
  EXPECT_EQ(status.parked_keys().keys(), 0);
  EXPECT_EQ(status.parked_keys().records(), 0);
  EXPECT_EQ(status.parked_keys().oldest_unix_ms(), 0);
  EXPECT_EQ(status.kafka_bootstrap_servers(), testing::BootstrapServers());
  EXPECT_EQ(status.max_retry_threads(), static_cast<uint32_t>(kMaxRetryThreads));
  EXPECT_EQ(status.config().group_id(), "control-api-config");
  EXPECT_FALSE(status.version().empty());
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(status.instance().host_name(), host);
  EXPECT_EQ(status.instance().pod_name(), "retryd-test-0");
  EXPECT_EQ(status.instance().pod_namespace(), "retryd-tests");
  EXPECT_GT(status.instance().start_time_unix_ms(), 0);
  EXPECT_LE(status.instance().start_time_unix_ms(), absl::ToUnixMillis(absl::Now()));
  EXPECT_TRUE(status.has_totals());
  std::map<v1::ThreadRole, int> roles;
  std::set<std::string> member_ids;
  for (const v1::ThreadInfo& t : status.threads()) {
    ++roles[t.role()];
    EXPECT_GT(t.thread_id(), 0u);
    EXPECT_NE(t.state(), v1::THREAD_STATE_UNSPECIFIED);
    EXPECT_GT(t.state_since_unix_ms(), 0);
    EXPECT_FALSE(t.assigned_partitions().empty()) << "thread " << t.thread_id();
    for (const v1::TopicPartition& tp : t.assigned_partitions()) {
      EXPECT_EQ(tp.topic(), t.role() == v1::THREAD_ROLE_PRIMARY ? engine_->topics.input
                                                                : engine_->topics.retry);
    }
    // Joined: the group and the member id its coordinator gave it.
    const std::string group = engine_->engine->options().group_id;
    EXPECT_EQ(t.group_id(),
              t.role() == v1::THREAD_ROLE_PRIMARY ? group : absl::StrCat(group, ".retry"));
    EXPECT_FALSE(t.group_member_id().empty()) << "thread " << t.thread_id();
    EXPECT_TRUE(member_ids.insert(t.group_member_id()).second) << "each its own member id";
  }
  EXPECT_EQ(roles[v1::THREAD_ROLE_PRIMARY], 1);
  EXPECT_EQ(roles[v1::THREAD_ROLE_RETRY], 1);
  // Without retry.tiers: one tier, the retry topic with the backoff, making
  // attempts 2..max_attempts, read by the retry thread.
  ASSERT_EQ(status.retry_tiers_size(), 1);
  const v1::RetryTierStatus& tier = status.retry_tiers(0);
  EXPECT_EQ(tier.topic(), engine_->topics.retry);
  EXPECT_EQ(tier.delay_ms(), 0u);
  EXPECT_EQ(tier.max_attempts(), 999u);
  EXPECT_EQ(tier.first_attempt(), 2u);
  EXPECT_EQ(tier.last_attempt(), 1000u);
  EXPECT_EQ(tier.backlog(), status.retry_backlog());
  for (const v1::ThreadInfo& t : status.threads()) {
    if (t.role() == v1::THREAD_ROLE_RETRY) {
      EXPECT_EQ(t.tier(), engine_->topics.retry);
      EXPECT_THAT(tier.thread_ids(), ElementsAreArray({t.thread_id()}));
    } else {
      EXPECT_EQ(t.tier(), "");
    }
  }
}

TEST_F(ControlApiTest, ATierIsNamedByItsTopic) {
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
  grpc::ClientContext context;
  testing::Prepare(context, absl::Seconds(60));
  v1::StartRetryThreadsRequest request;
  request.set_count(1);
  request.set_tier("no-such-tier");
  v1::StartRetryThreadsResponse response;
  const grpc::Status refused = stub->StartRetryThreads(&context, request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(
      refused.error_message(),
      HasSubstr(absl::StrCat("tier: no retry tier has topic \"no-such-tier\"; the tiers are ",
                             engine_->topics.retry)));
  EXPECT_EQ(RetryThreadIds(*client_).size(), 1u) << "nothing started";

  grpc::ClientContext named;
  testing::Prepare(named, absl::Seconds(60));
  request.set_tier(engine_->topics.retry);
  ASSERT_TRUE(stub->StartRetryThreads(&named, request, &response).ok());
  EXPECT_EQ(response.thread_ids_size(), 1);
  EXPECT_EQ(RetryThreadIds(*client_).size(), 2u);
}

TEST_F(ControlApiTest, StartRetryThreadsValidatesCount) {
  for (int count : {0, -1, kMaxRetryThreads}) {
    const absl::Status s = client_->StartRetryThreads(count).status();
    // Below 1 is a bad request; past the cap, the engine's state.
    EXPECT_EQ(s.code(), count < 1 ? absl::StatusCode::kInvalidArgument
                                  : absl::StatusCode::kFailedPrecondition)
        << count;
    EXPECT_THAT(s.message(), HasSubstr("count: must be between 1 and 3"));
    EXPECT_THAT(s.message(), HasSubstr("retry.max_threads is 4"));
  }
  EXPECT_EQ(RetryThreadIds(*client_).size(), 1u) << "nothing started";
}

TEST_F(ControlApiTest, StartAndStopRetryThreads) {
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  ASSERT_EQ(before.size(), 1u);
  const absl::StatusOr<v1::StartRetryThreadsResponse> start = client_->StartRetryThreads(2);
  ASSERT_TRUE(start.ok()) << start.status();
  const std::vector<uint32_t> started(start->thread_ids().begin(), start->thread_ids().end());
  ASSERT_EQ(started.size(), 2u);
  EXPECT_NE(started[0], started[1]);
  std::vector<uint32_t> all = before;
  all.insert(all.end(), started.begin(), started.end());
  EXPECT_THAT(RetryThreadIds(*client_), UnorderedElementsAreArray(all));

  // On the generated stub: this request leaves `graceful` unset, to stop a
  // thread with the server's default, which RetrydClient always sets.
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
  grpc::ClientContext context;
  testing::Prepare(context, absl::Seconds(60));
  v1::StopRetryThreadsRequest request;
  request.add_thread_ids(started[0]);
  v1::StopRetryThreadsResponse by_id;
  ASSERT_TRUE(stub->StopRetryThreads(&context, request, &by_id).ok());
  EXPECT_THAT(by_id.stopped_thread_ids(), ElementsAreArray({started[0]}));
  const absl::StatusOr<v1::StopRetryThreadsResponse> by_count =
      client_->StopRetryThreads(1, /*graceful=*/true);
  ASSERT_TRUE(by_count.ok()) << by_count.status();
  EXPECT_THAT(by_count->stopped_thread_ids(), ElementsAreArray({started[1]}))
      << "count stops the most recent";
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(before));
}

// On the generated stub: the requests leave `graceful` unset, and one sets
// both count and thread_ids, which RetrydClient cannot send.
TEST_F(ControlApiTest, StopRetryThreadsValidatesArguments) {
  const std::vector<uint32_t> retry = RetryThreadIds(*client_);
  ASSERT_EQ(retry.size(), 1u);
  struct Case {
    int count;
    std::vector<uint32_t> ids;
    grpc::StatusCode code;
    std::string message;
  };
  uint32_t primary = 0;
  for (const auto& stats : engine_->engine->Threads()) {
    if (stats->role() == engine::ThreadRole::kPrimary) primary = static_cast<uint32_t>(stats->id());
  }
  const std::vector<Case> cases = {
      {0, {}, grpc::StatusCode::INVALID_ARGUMENT, "count: must be at least 1"},
      {-3, {}, grpc::StatusCode::INVALID_ARGUMENT, "count: must be at least 1"},
      {0, {0}, grpc::StatusCode::INVALID_ARGUMENT, "thread_ids: 0 is not a thread id"},
      {0, {retry[0], retry[0]}, grpc::StatusCode::INVALID_ARGUMENT, "listed twice"},
      {1, {retry[0]}, grpc::StatusCode::INVALID_ARGUMENT, "count and thread_ids"},
      {0, {999'999}, grpc::StatusCode::NOT_FOUND, "999999"},
      {0, {primary}, grpc::StatusCode::NOT_FOUND, absl::StrCat(primary)},
      {0, {retry[0], 999'999}, grpc::StatusCode::NOT_FOUND, "999999"},
  };
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
  for (const Case& c : cases) {
    grpc::ClientContext context;
    testing::Prepare(context, absl::Seconds(60));
    v1::StopRetryThreadsRequest request;
    request.set_count(c.count);
    for (uint32_t id : c.ids) request.add_thread_ids(id);
    v1::StopRetryThreadsResponse response;
    const grpc::Status s = stub->StopRetryThreads(&context, request, &response);
    EXPECT_EQ(s.error_code(), c.code) << c.message << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
  }
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(retry)) << "an error stops nothing";
}

TEST_F(ControlApiTest, ListInFlightValidatesTheLimitAndEveryThreadAnswers) {
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
  for (uint32_t limit : {10'001u, 4'000'000'000u}) {
    grpc::ClientContext context;
    testing::Prepare(context, absl::Seconds(60));
    v1::ListInFlightRequest request;
    request.set_limit(limit);
    v1::ListInFlightResponse response;
    const grpc::Status s = stub->ListInFlight(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << limit;
    EXPECT_THAT(s.error_message(), HasSubstr("limit: must be between 1 and 10000"));
  }
  for (uint32_t limit : {0u, 1u, 10'000u}) {
    absl::StatusOr<v1::ListInFlightResponse> list = client_->ListInFlight(limit);
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_THAT(list->unanswered_thread_ids(), IsEmpty()) << "every running thread answers";
    EXPECT_LE(list->records_size(), std::max<uint32_t>(limit, 1));
  }
}

TEST_F(ControlApiTest, DeadLetterRecordValidatesArgumentsAndNamesAnUnknownRecord) {
  struct Case {
    std::string topic;
    int32_t partition;
    int64_t offset;
    grpc::StatusCode code;
    std::string message;
  };
  const std::string topic = engine_->topics.input;
  const std::vector<Case> cases = {
      {"", 0, 0, grpc::StatusCode::INVALID_ARGUMENT, "topic: must name"},
      {std::string(250, 't'), 0, 0, grpc::StatusCode::INVALID_ARGUMENT, "250 characters"},
      {topic, -1, 0, grpc::StatusCode::INVALID_ARGUMENT, "partition: must be 0 or more"},
      {topic, 0, -5, grpc::StatusCode::INVALID_ARGUMENT, "offset: must be 0 or more, got -5"},
      {topic, 0, 123'456, grpc::StatusCode::NOT_FOUND,
       absl::StrCat("no thread holds ", topic, "/0@123456")},
  };
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
  for (const Case& c : cases) {
    grpc::ClientContext context;
    testing::Prepare(context, absl::Seconds(60));
    v1::DeadLetterRecordRequest request;
    request.set_topic(c.topic);
    request.set_partition(c.partition);
    request.set_offset(c.offset);
    v1::DeadLetterRecordResponse response;
    const grpc::Status s = stub->DeadLetterRecord(&context, request, &response);
    EXPECT_EQ(s.error_code(), c.code) << c.message << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
  }
}

TEST_F(ControlApiTest, CountAboveRunningStopsThemAll) {
  ASSERT_TRUE(client_->StartRetryThreads(1).ok());
  const std::vector<uint32_t> running = RetryThreadIds(*client_);
  ASSERT_EQ(running.size(), 2u);
  const absl::StatusOr<v1::StopRetryThreadsResponse> stopped =
      client_->StopRetryThreads(10, /*graceful=*/false);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_THAT(stopped->stopped_thread_ids(), UnorderedElementsAreArray(running));
  EXPECT_THAT(RetryThreadIds(*client_), IsEmpty());
}

TEST_F(ControlApiTest, InOrderConflictsAreRefused) {
  absl::Status s = client_->SetInOrder(false, /*drain_retries=*/true).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("drain_retries"));

  s = client_->SetInOrder(true, /*drain_retries=*/false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), ContainsRegex("(drain_retries|StopRetryThreads)"))
      << "the message says what to do";
  EXPECT_FALSE(engine_->engine->in_order());
  EXPECT_EQ(RetryThreadIds(*client_).size(), 1u);
}

TEST_F(ControlApiTest, DrainWithATooShortDeadlineLeavesTheEngineAsItWas) {
  engine_->processor->set_failing(true);
  const int64_t sent_before = engine_->engine->Totals().sent_to_retry;
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) keys.push_back(absl::StrCat("fail-", i));
  testing::ProduceKeys(engine_->topics.input, keys);
  // Wait until every record has been through the retry topic at least once;
  // with failing on they keep circulating, so the backlog cannot empty. (Not
  // on retry_backlog: it counts only what retry threads hold or lag behind,
  // and reads 0 for seconds while records are on their way through the
  // topic.)
  ASSERT_TRUE(WaitFor([&] { return engine_->engine->Totals().sent_to_retry >= sent_before + 30; },
                      absl::Seconds(30)))
      << "the failing records did not reach the retry topic";
  const std::vector<uint32_t> before = RetryThreadIds(*client_);

  const absl::Status s =
      Client(Channel(Target()), "", absl::Milliseconds(1500))->SetInOrder(true, true).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;

  // The engine rolls the drain back before it answers; allow for the answer
  // having been lost to the client's own deadline.
  EXPECT_TRUE(WaitFor([&] { return engine_->engine->state() == engine::EngineState::kRunning; },
                      absl::Seconds(10)));
  const absl::StatusOr<v1::GetStatusResponse> status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_FALSE(status->in_order());
  EXPECT_EQ(status->state(), v1::ENGINE_STATE_RUNNING);
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(before)) << "same retry threads";
}

// Ctrl-C on `retryctl inorder on --drain`, or a client gone: the cancelled
// call ends the drain at once, input resumes and the engine is as it was,
// long before the call's own deadline.
TEST_F(ControlApiTest, CancelledDrainResumesInputAtOnce) {
  engine_->processor->set_failing(true);  // The backlog cannot empty.
  const int64_t sent_before = engine_->engine->Totals().sent_to_retry;
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back(absl::StrCat("fail-cancel-", i));
  testing::ProduceKeys(engine_->topics.input, keys);
  ASSERT_TRUE(WaitFor([&] { return engine_->engine->Totals().sent_to_retry >= sent_before + 10; },
                      absl::Seconds(30)))
      << "the failing records did not reach the retry topic";
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  auto state = [&] {
    const absl::StatusOr<v1::GetStatusResponse> status = client_->GetStatus();
    return status.ok() ? status->state() : v1::ENGINE_STATE_UNSPECIFIED;
  };

  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
  grpc::ClientContext context;
  testing::Prepare(context, absl::Minutes(5));
  v1::SetInOrderRequest request;
  request.set_in_order(true);
  request.set_drain_retries(true);
  v1::SetInOrderResponse response;
  grpc::Status drain;
  std::thread caller([&] { drain = stub->SetInOrder(&context, request, &response); });
  const bool draining =
      WaitFor([&] { return state() == v1::ENGINE_STATE_DRAINING; }, absl::Seconds(30));
  context.TryCancel();
  caller.join();
  ASSERT_TRUE(draining) << "the drain did not begin";
  EXPECT_EQ(drain.error_code(), grpc::StatusCode::CANCELLED) << drain.error_message();

  EXPECT_TRUE(WaitFor([&] { return state() == v1::ENGINE_STATE_RUNNING; }, absl::Seconds(10)))
      << "input stays paused after the call was cancelled";
  const absl::StatusOr<v1::GetStatusResponse> status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_FALSE(status->in_order());
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(before)) << "same retry threads";
  const int64_t consumed = engine_->engine->Totals().consumed;
  testing::ProduceKeys(engine_->topics.input, {"ok-after-cancelled-drain"});
  EXPECT_TRUE(
      WaitFor([&] { return engine_->engine->Totals().consumed > consumed; }, absl::Seconds(30)))
      << "input does not flow again";
}

TEST_F(ControlApiTest, DrainSwitchesToInOrderThenStartIsRefused) {
  engine_->processor->set_failing(false);  // The backlog can now empty.
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  ASSERT_EQ(before.size(), 1u);
  absl::StatusOr<v1::SetInOrderResponse> response =
      Client(Channel(Target()), "", absl::Seconds(90))->SetInOrder(true, true);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->in_order());
  EXPECT_THAT(response->stopped_thread_ids(), ElementsAreArray(before));
  const absl::StatusOr<v1::GetStatusResponse> status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->in_order());
  EXPECT_THAT(RetryThreadIds(*client_), IsEmpty());
  EXPECT_EQ(status->retry_backlog(), 0);

  const absl::Status s = client_->StartRetryThreads(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), ContainsRegex("[Ii]n.order"));

  response = client_->SetInOrder(false, false);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->in_order());
  EXPECT_FALSE(engine_->engine->in_order());
  EXPECT_EQ(response->started_thread_ids_size(), 1) << "retry.threads read the retry topic again";
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(response->started_thread_ids()));
  ASSERT_TRUE(client_->StartRetryThreads(1).ok()) << "allowed again once in-order is off";
}

TEST_F(ControlApiTest, SetOrderingModeValidatesArguments) {
  struct Case {
    v1::Ordering mode;
    bool drain;
    std::string message;
  };
  const std::vector<Case> cases = {
      {v1::ORDERING_UNSPECIFIED, false,
       "mode: must be ORDERING_UNORDERED, ORDERING_IN_ORDER or ORDERING_KEY"},
      {static_cast<v1::Ordering>(7), false,
       "mode: must be ORDERING_UNORDERED, ORDERING_IN_ORDER or ORDERING_KEY, got 7"},
      {v1::ORDERING_KEY, true, "drain_retries: only with mode ORDERING_IN_ORDER"},
      {v1::ORDERING_UNORDERED, true, "drain_retries: only with mode ORDERING_IN_ORDER"},
  };
  for (const Case& c : cases) {
    const absl::Status s = client_->SetOrderingMode(c.mode, c.drain).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
  EXPECT_EQ(engine_->engine->ordering(), engine::Ordering::kUnordered) << "nothing changed";
  EXPECT_EQ(RetryThreadIds(*client_).size(), 1u);
}

// Only in order excludes retry threads: from unordered and from key order
// alike, the switch is refused while one runs, and nothing changes.
TEST_F(ControlApiTest, SetOrderingModeRefusesInOrderWhileRetryThreadsRun) {
  for (const v1::Ordering from : {v1::ORDERING_UNORDERED, v1::ORDERING_KEY}) {
    SCOPED_TRACE(v1::Ordering_Name(from));
    const absl::StatusOr<v1::SetOrderingModeResponse> set = client_->SetOrderingMode(from, false);
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(set->mode(), from);
    const absl::Status s = client_->SetOrderingMode(v1::ORDERING_IN_ORDER, false).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), ContainsRegex("(drain_retries|StopRetryThreads)"))
        << "the message says what to do";
    const absl::StatusOr<v1::GetStatusResponse> status = client_->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->ordering(), from);
    EXPECT_FALSE(status->in_order());
    EXPECT_EQ(RetryThreadIds(*client_).size(), 1u);
  }
}

// UNORDERED -> KEY -> UNORDERED on the real engine: in key order a failing
// key is parked and its later records follow it through the retry topic,
// which GetStatus (parked_keys, totals.followed) and WatchMetrics (ordering,
// a retry thread's parked gauge) report; once the key recovers it is
// released, and unordered forgets parking altogether.
TEST_F(ControlApiTest, SetOrderingModeKeyReportsParkedKeysAndBack) {
  const absl::StatusOr<v1::SetOrderingModeResponse> key =
      client_->SetOrderingMode(v1::ORDERING_KEY, false);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->mode(), v1::ORDERING_KEY);
  EXPECT_THAT(key->stopped_thread_ids(), IsEmpty());
  EXPECT_THAT(key->started_thread_ids(), IsEmpty()) << "a retry thread runs already";
  EXPECT_EQ(engine_->engine->ordering(), engine::Ordering::kKey);

  engine_->processor->set_failing(true);
  const int64_t followed_before = engine_->engine->Totals().followed;
  const int64_t start_ms = absl::ToUnixMillis(absl::Now());
  testing::ProduceKeys(engine_->topics.input, {"fail-parked", "fail-parked", "fail-parked"});
  v1::GetStatusResponse status;
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::GetStatusResponse> s = client_->GetStatus();
        if (!s.ok()) return false;
        status = *std::move(s);
        return status.parked_keys().records() >= 3 &&
               status.totals().followed() >= followed_before + 2;
      },
      absl::Seconds(30)))
      << "the key was not parked with its records: " << status.ShortDebugString();
  EXPECT_EQ(status.ordering(), v1::ORDERING_KEY);
  EXPECT_FALSE(status.in_order());
  EXPECT_GE(status.parked_keys().keys(), 1);
  EXPECT_GE(status.parked_keys().oldest_unix_ms(), start_ms - 1000);
  EXPECT_LE(status.parked_keys().oldest_unix_ms(), absl::ToUnixMillis(absl::Now()));

  // The retry thread holds the later records behind the first, which it
  // retries in place.
  bool held = false;
  int snapshots = 0;
  const absl::Status watched = client_->Watch(100, {}, [&](const v1::MetricsSnapshot& snapshot) {
    EXPECT_EQ(snapshot.ordering(), v1::ORDERING_KEY);
    EXPECT_FALSE(snapshot.in_order());
    for (const v1::ThreadMetrics& t : snapshot.threads()) {
      held = held || (t.role() == v1::THREAD_ROLE_RETRY && t.parked() >= 2);
    }
    return !held && ++snapshots < 300;
  });
  EXPECT_TRUE(watched.ok()) << watched;
  EXPECT_TRUE(held) << "no retry thread held the key's later records";

  engine_->processor->set_failing(false);
  EXPECT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::GetStatusResponse> s = client_->GetStatus();
        return s.ok() && s->parked_keys().keys() == 0 && s->parked_keys().records() == 0;
      },
      absl::Seconds(30)))
      << "the key was not released once it recovered";

  const absl::StatusOr<v1::SetOrderingModeResponse> unordered =
      client_->SetOrderingMode(v1::ORDERING_UNORDERED, false);
  ASSERT_TRUE(unordered.ok()) << unordered.status();
  EXPECT_EQ(unordered->mode(), v1::ORDERING_UNORDERED);
  EXPECT_EQ(unordered->parked_keys(), 0);
  const absl::StatusOr<v1::GetStatusResponse> after = client_->GetStatus();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->ordering(), v1::ORDERING_UNORDERED);
  EXPECT_EQ(after->parked_keys().keys(), 0);
  EXPECT_EQ(after->parked_keys().oldest_unix_ms(), 0);
  EXPECT_EQ(RetryThreadIds(*client_).size(), 1u);
}

// A drain into in order, then out of it into key order, which starts a
// retry thread again and allows more.
TEST_F(ControlApiTest, SetOrderingModeDrainsIntoInOrderAndLeavesIntoKey) {
  engine_->processor->set_failing(false);  // The backlog can empty.
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  ASSERT_EQ(before.size(), 1u);
  absl::StatusOr<v1::SetOrderingModeResponse> response =
      Client(Channel(Target()), "", absl::Seconds(90))
          ->SetOrderingMode(v1::ORDERING_IN_ORDER, true);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->mode(), v1::ORDERING_IN_ORDER);
  EXPECT_THAT(response->stopped_thread_ids(), ElementsAreArray(before));
  absl::StatusOr<v1::GetStatusResponse> status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->ordering(), v1::ORDERING_IN_ORDER);
  EXPECT_TRUE(status->in_order()) << "kept for older clients";
  EXPECT_THAT(RetryThreadIds(*client_), IsEmpty());

  response = client_->SetOrderingMode(v1::ORDERING_KEY, false);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->mode(), v1::ORDERING_KEY);
  EXPECT_EQ(response->started_thread_ids_size(), 1) << "retry.threads read the retry topic again";
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(response->started_thread_ids()));
  status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->ordering(), v1::ORDERING_KEY);
  EXPECT_FALSE(status->in_order());
  ASSERT_TRUE(client_->StartRetryThreads(1).ok()) << "key order allows retry threads";
}

v1::SetRetryThreadCountRequest TargetRequest(int target, const std::string& request_id = "") {
  v1::SetRetryThreadCountRequest request;
  request.set_target(target);
  request.set_request_id(request_id);
  return request;
}

std::vector<uint32_t> Ids(const google::protobuf::RepeatedField<uint32_t>& ids) {
  return {ids.begin(), ids.end()};
}

TEST_F(ControlApiTest, SetRetryThreadCountIsDesiredState) {
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  ASSERT_EQ(before.size(), 1u);
  absl::StatusOr<v1::SetRetryThreadCountResponse> up =
      client_->SetRetryThreadCount(TargetRequest(3));
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->started_thread_ids_size(), 2);
  EXPECT_THAT(up->stopped_thread_ids(), IsEmpty());
  EXPECT_EQ(up->running_thread_ids_size(), 3);
  EXPECT_THAT(RetryThreadIds(*client_), UnorderedElementsAreArray(Ids(up->running_thread_ids())));

  // The target met already: nothing changes.
  absl::StatusOr<v1::SetRetryThreadCountResponse> again =
      client_->SetRetryThreadCount(TargetRequest(3));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->started_thread_ids(), IsEmpty());
  EXPECT_THAT(again->stopped_thread_ids(), IsEmpty());
  EXPECT_THAT(again->running_thread_ids(), ElementsAreArray(up->running_thread_ids()));

  // Down: the most recently started go first.
  absl::StatusOr<v1::SetRetryThreadCountResponse> down =
      client_->SetRetryThreadCount(TargetRequest(1));
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_THAT(down->stopped_thread_ids(), UnorderedElementsAreArray(Ids(up->started_thread_ids())));
  EXPECT_THAT(down->running_thread_ids(), ElementsAreArray(before));
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(before));
}

TEST_F(ControlApiTest, RefusalsCarryAReasonAndChangeNothing) {
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  struct Case {
    absl::Status status;
    absl::StatusCode code;
    const char* reason;
  };
  v1::StopRetryThreadsRequest unknown;
  unknown.add_thread_ids(999);
  const Case cases[] = {
      {client_->SetRetryThreadCount(TargetRequest(kMaxRetryThreads + 1)).status(),
       absl::StatusCode::kFailedPrecondition, "MAX_THREADS_REACHED"},
      {client_->StartRetryThreads(kMaxRetryThreads).status(), absl::StatusCode::kFailedPrecondition,
       "MAX_THREADS_REACHED"},
      {client_->SetRetryThreadCount(TargetRequest(-1)).status(), absl::StatusCode::kInvalidArgument,
       "INVALID_FIELD"},
      {client_->StopRetryThreadsById({999}, true).status(), absl::StatusCode::kNotFound,
       "THREAD_NOT_FOUND"},
      {client_->GetOperation("no-such-operation").status(), absl::StatusCode::kNotFound,
       "OPERATION_NOT_FOUND"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.status;
    // Read from the call's google.rpc.ErrorInfo (domain retryd.io).
    EXPECT_EQ(ReasonOf(c.status), c.reason) << c.status;
  }
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(before));
}

TEST_F(ControlApiTest, ARequestIdIsAppliedOnce) {
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  const std::string id = "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b";
  v1::StartRetryThreadsRequest start;
  start.set_count(1);
  start.set_request_id(id);
  absl::StatusOr<v1::StartRetryThreadsResponse> first = client_->StartRetryThreads(start);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->thread_ids_size(), 1);
  absl::StatusOr<v1::StartRetryThreadsResponse> retry = client_->StartRetryThreads(start);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_THAT(retry->thread_ids(), ElementsAreArray(first->thread_ids())) << "the first answer";
  EXPECT_EQ(RetryThreadIds(*client_).size(), before.size() + 1) << "started once";

  // The same id with another request.
  start.set_count(2);
  absl::Status reused = client_->StartRetryThreads(start).status();
  EXPECT_EQ(reused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(reused), "REQUEST_ID_REUSED");
  reused = client_->SetRetryThreadCount(TargetRequest(1, id)).status();
  EXPECT_EQ(ReasonOf(reused), "REQUEST_ID_REUSED") << "another method";
  start.set_request_id("not-a-uuid");
  EXPECT_EQ(ReasonOf(client_->StartRetryThreads(start).status()), "INVALID_FIELD");
  EXPECT_EQ(RetryThreadIds(*client_).size(), before.size() + 1) << "nothing more started";
}

TEST_F(ControlApiTest, ConcurrentChangesAreAppliedTogether) {
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  ASSERT_EQ(before.size(), 1u);
  const int64_t batches_before = engine_->engine->Totals().rebalances;
  // Three clients at once, each starting one thread and stopping it again:
  // the cap (4) leaves room for all three only if no call is lost.
  constexpr int kClients = 3;
  std::vector<absl::Status> results(kClients);
  std::vector<uint32_t> started(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      std::unique_ptr<RetrydClient> client = Client(Channel(Target()), "", absl::Seconds(120));
      absl::StatusOr<v1::StartRetryThreadsResponse> start = client->StartRetryThreads(1);
      if (!start.ok()) {
        results[i] = start.status();
        return;
      }
      if (start->thread_ids_size() != 1) {
        results[i] = absl::InternalError("not one thread id");
        return;
      }
      started[i] = start->thread_ids(0);
      results[i] = client->StopRetryThreadsById({started[i]}, true).status();
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
  EXPECT_EQ(std::set<uint32_t>(started.begin(), started.end()).size(), size_t{kClients})
      << "each call caused its own thread";
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(before));
  // The thread that ran throughout went through each change's rebalance:
  // six changes, applied one by one, would be at least six.
  const int64_t rebalances = engine_->engine->Totals().rebalances - batches_before;
  EXPECT_GT(rebalances, 0);
  RecordProperty("rebalances", static_cast<int>(rebalances));
}

TEST_F(ControlApiTest, StartDrainIsAnOperationThatSucceeds) {
  engine_->processor->set_failing(false);
  const std::vector<uint32_t> before = RetryThreadIds(*client_);
  v1::StartDrainRequest request;
  request.set_request_id("0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d");
  absl::StatusOr<v1::Operation> op = client_->StartDrain(request);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->kind(), v1::OPERATION_KIND_DRAIN);
  EXPECT_FALSE(op->id().empty());
  EXPECT_EQ(op->request_id(), request.request_id());
  std::vector<v1::Operation> seen;
  const absl::Status watched =
      Client(Channel(Target()), "", absl::Seconds(90))
          ->WatchOperation(op->id(), [&](const v1::Operation& o) { seen.push_back(o); });
  ASSERT_TRUE(watched.ok()) << watched;
  ASSERT_FALSE(seen.empty());
  const v1::Operation& last = seen.back();
  EXPECT_TRUE(last.done());
  EXPECT_EQ(last.state(), v1::OPERATION_STATE_SUCCEEDED) << last.error().message();
  EXPECT_THAT(last.drain().stopped_thread_ids(), ElementsAreArray(before));
  EXPECT_GT(last.end_time_unix_ms(), 0);
  EXPECT_TRUE(engine_->engine->in_order());
  // A retry of the call is not a second drain: the same operation.
  absl::StatusOr<v1::Operation> retry = client_->StartDrain(request);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->id(), op->id());
  const absl::StatusOr<v1::ListOperationsResponse> list = client_->ListOperations();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_GE(list->operations_size(), 1);
  EXPECT_EQ(list->operations(0).id(), op->id()) << "newest first";
  // Ended: cancelling changes nothing.
  absl::StatusOr<v1::Operation> cancelled = client_->CancelOperation(op->id());
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), v1::OPERATION_STATE_SUCCEEDED);
}

TEST_F(ControlApiTest, CancelOperationEndsADrainAndLeavesTheEngineAsItWas) {
  engine_->processor->set_failing(true);  // The backlog cannot empty.
  const int64_t sent_before = engine_->engine->Totals().sent_to_retry;
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) keys.push_back(absl::StrCat("fail-op-", i));
  testing::ProduceKeys(engine_->topics.input, keys);
  ASSERT_TRUE(WaitFor([&] { return engine_->engine->Totals().sent_to_retry >= sent_before + 5; },
                      absl::Seconds(30)))
      << "the failing records did not reach the retry topic";
  const std::vector<uint32_t> before = RetryThreadIds(*client_);

  // The blocking SetInOrder(drain) is an operation too: cancelling the
  // operation ends the call's drain.
  absl::StatusOr<v1::SetInOrderResponse> blocking = absl::UnknownError("not called");
  std::thread caller(
      [&] { blocking = Client(Channel(Target()), "", absl::Minutes(5))->SetInOrder(true, true); });
  std::string id;
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::ListOperationsResponse> list = client_->ListOperations();
        for (const v1::Operation& op :
             list.ok() ? list->operations() : google::protobuf::RepeatedPtrField<v1::Operation>()) {
          if (op.state() == v1::OPERATION_STATE_RUNNING) id = op.id();
        }
        return !id.empty() && engine_->engine->state() == engine::EngineState::kDraining;
      },
      absl::Seconds(30)))
      << "the drain did not show as a running operation";
  // Meanwhile, changes of the retry threads and another drain are refused.
  EXPECT_EQ(ReasonOf(client_->SetRetryThreadCount(TargetRequest(2)).status()), "DRAIN_RUNNING");
  EXPECT_EQ(ReasonOf(client_->StartDrain(v1::StartDrainRequest()).status()), "DRAIN_RUNNING");
  absl::StatusOr<v1::Operation> cancelled = client_->CancelOperation(id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  caller.join();
  EXPECT_EQ(blocking.status().code(), absl::StatusCode::kCancelled) << blocking.status();
  absl::StatusOr<v1::Operation> ended = client_->GetOperation(id);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::OPERATION_STATE_CANCELLED);
  EXPECT_EQ(ended->error().code(), static_cast<int>(grpc::StatusCode::CANCELLED));
  EXPECT_EQ(ended->progress().unit(), "records");
  EXPECT_THAT(ended->progress().description(), HasSubstr("retry records left"));
  EXPECT_LE(ended->progress().done(), ended->progress().total());
  EXPECT_FALSE(engine_->engine->in_order());
  EXPECT_EQ(engine_->engine->state(), engine::EngineState::kRunning);
  EXPECT_THAT(RetryThreadIds(*client_), ElementsAreArray(before)) << "same retry threads";

  // A StartDrain is cancelled the same way, at once.
  absl::StatusOr<v1::Operation> started = client_->StartDrain(v1::StartDrainRequest());
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->state(), v1::OPERATION_STATE_RUNNING);
  ASSERT_TRUE(client_->CancelOperation(started->id()).ok());
  v1::Operation last;
  ASSERT_TRUE(
      client_->WatchOperation(started->id(), [&](const v1::Operation& o) { last = o; }).ok());
  EXPECT_EQ(last.state(), v1::OPERATION_STATE_CANCELLED);
  EXPECT_FALSE(engine_->engine->in_order());
}

TEST_F(ControlApiTest, WatchMetricsValidatesArguments) {
  for (uint32_t interval : {0u, 99u, 60'001u}) {
    const absl::Status s = WatchStatus(*client_, interval);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << interval;
    EXPECT_THAT(s.message(), HasSubstr("interval_ms: must be between 100 and 60000"));
  }
  const absl::Status s = WatchStatus(*client_, 100, {0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("thread_ids"));
  EXPECT_TRUE(WatchStatus(*client_, 100).ok());
  EXPECT_TRUE(WatchStatus(*client_, 60'000).ok());
}

TEST_F(ControlApiTest, WatchMetricsStreamsSnapshots) {
  std::set<uint32_t> want;
  for (const auto& stats : engine_->engine->Threads()) want.insert(stats->id());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  // On the generated stub: the test asserts the stream ends CANCELLED.
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
  const absl::Time start = absl::Now();
  auto reader = WatchOnStub(*stub, context, 100);
  v1::MetricsSnapshot snapshot;
  ASSERT_TRUE(reader->Read(&snapshot));
  EXPECT_EQ(snapshot.interval_ms(), 0u) << "the first snapshot is the one sent at once";
  int64_t last_time = snapshot.time_unix_ms();
  constexpr int kMore = 6;
  for (int i = 0; i < kMore; ++i) {
    ASSERT_TRUE(reader->Read(&snapshot));
    EXPECT_GE(snapshot.time_unix_ms(), last_time);
    last_time = snapshot.time_unix_ms();
    EXPECT_EQ(snapshot.engine_state(), v1::ENGINE_STATE_RUNNING);
    std::set<uint32_t> got;
    for (const v1::ThreadMetrics& t : snapshot.threads()) {
      got.insert(t.thread_id());
      EXPECT_NE(t.role(), v1::THREAD_ROLE_UNSPECIFIED);
      EXPECT_NE(t.state(), v1::THREAD_STATE_STOPPED);
      EXPECT_GE(t.time_in_state_ms(), 0);
      EXPECT_GE(t.processed(), t.succeeded());
    }
    EXPECT_EQ(got, want);
  }
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, absl::Milliseconds(100 * (kMore - 1))) << "one per interval, not faster";
  EXPECT_GT(snapshot.interval_ms(), 0u);
  context.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(ControlApiTest, WatchMetricsFiltersThreadsAndIgnoresUnknownIds) {
  uint32_t primary = 0;
  for (const auto& stats : engine_->engine->Threads()) {
    if (stats->role() == engine::ThreadRole::kPrimary) primary = static_cast<uint32_t>(stats->id());
  }
  int snapshots = 0;
  const absl::Status s =
      client_->Watch(100, {primary, 4242}, [&](const v1::MetricsSnapshot& snapshot) {
        ++snapshots;
        EXPECT_EQ(snapshot.threads_size(), 1);
        if (snapshot.threads_size() != 1) return false;
        EXPECT_EQ(snapshot.threads(0).thread_id(), primary);
        EXPECT_EQ(snapshot.threads(0).role(), v1::THREAD_ROLE_PRIMARY);
        return snapshots < 3;
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(snapshots, 3) << "the stream ended early";
}

// A watcher that cancels is released by the server: with room for one
// stream, a second is refused until the first is cancelled.
TEST_F(ControlApiTest, CancelledWatcherIsReleased) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.max_watchers = 1;
  ASSERT_TRUE(server.Start(options).ok());
  const std::shared_ptr<grpc::Channel> channel = Channel(absl::StrCat("127.0.0.1:", server.port()));
  std::unique_ptr<RetrydClient> client = Client(channel);

  // The first stream on the generated stub: the test asserts it ends
  // CANCELLED.
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(channel);
  grpc::ClientContext first;
  auto reader = WatchOnStub(*stub, first, 100);
  v1::MetricsSnapshot snapshot;
  ASSERT_TRUE(reader->Read(&snapshot));
  const absl::Status refused = WatchStatus(*client, 100);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("too many WatchMetrics streams"));

  first.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return WatchStatus(*client, 100).ok(); }, absl::Seconds(10)))
      << "the cancelled stream still holds its slot";
  server.Stop();
}

// What one watcher saw, per thread id.
struct WatcherLog {
  absl::Mutex mu;
  int snapshots ABSL_GUARDED_BY(mu) = 0;
  std::map<uint32_t, int> stopped ABSL_GUARDED_BY(mu);     // STOPPED/FAILED reports.
  std::set<uint32_t> seen ABSL_GUARDED_BY(mu);             // Any report.
  std::set<uint32_t> seen_after_stop ABSL_GUARDED_BY(mu);  // Reported again after it.
  grpc::Status status;  // Written by the watcher thread before it exits.
};

TEST_F(ControlApiTest, TwentyWatchersWhileThreadsStartAndStop) {
  constexpr int kWatchers = 20;
  constexpr int kRounds = 3;
  std::vector<std::unique_ptr<WatcherLog>> logs;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWatchers; ++i) {
    logs.push_back(std::make_unique<WatcherLog>());
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(240)));
  }
  for (int i = 0; i < kWatchers; ++i) {
    threads.emplace_back([&, i] {
      WatcherLog& log = *logs[i];
      // On the generated stub: the test asserts every stream ends CANCELLED.
      std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(Channel(Target()));
      auto reader = WatchOnStub(*stub, *contexts[i], 100);
      v1::MetricsSnapshot snapshot;
      while (reader->Read(&snapshot)) {
        absl::MutexLock lock(&log.mu);
        ++log.snapshots;
        for (const v1::ThreadMetrics& t : snapshot.threads()) {
          if (log.stopped.count(t.thread_id()) > 0) log.seen_after_stop.insert(t.thread_id());
          log.seen.insert(t.thread_id());
          if (t.state() == v1::THREAD_STATE_STOPPED || t.state() == v1::THREAD_STATE_FAILED)
            ++log.stopped[t.thread_id()];
        }
      }
      log.status = reader->Finish();
    });
  }
  // Whatever assertion fails below, the watchers end and are joined.
  absl::Cleanup end_watchers = [&] {
    for (auto& context : contexts) context->TryCancel();
    for (std::thread& t : threads) {
      if (t.joinable()) t.join();
    }
  };
  auto all_saw = [&](uint32_t id, bool stopped) {
    return std::all_of(logs.begin(), logs.end(), [&](const auto& log) {
      absl::MutexLock lock(&log->mu);
      return stopped ? log->stopped.count(id) > 0 : log->seen.count(id) > 0;
    });
  };

  std::vector<uint32_t> cycled;
  for (int round = 0; round < kRounds; ++round) {
    const absl::StatusOr<v1::StartRetryThreadsResponse> started = client_->StartRetryThreads(1);
    ASSERT_TRUE(started.ok()) << started.status();
    const std::vector<uint32_t> ids(started->thread_ids().begin(), started->thread_ids().end());
    ASSERT_EQ(ids.size(), 1u);
    cycled.push_back(ids[0]);
    ASSERT_TRUE(WaitFor([&] { return all_saw(ids[0], false); }, absl::Seconds(20)))
        << "round " << round << ": not every watcher saw thread " << ids[0] << " start";
    ASSERT_TRUE(client_->StopRetryThreadsById(ids, /*graceful=*/true).ok());
    ASSERT_TRUE(WaitFor([&] { return all_saw(ids[0], true); }, absl::Seconds(20)))
        << "round " << round << ": not every watcher saw thread " << ids[0] << " stop";
  }
  // A few more snapshots, so a second STOPPED report would have shown.
  std::vector<int> counts(kWatchers);
  for (int i = 0; i < kWatchers; ++i) {
    absl::MutexLock lock(&logs[i]->mu);
    counts[i] = logs[i]->snapshots;
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < kWatchers; ++i) {
          absl::MutexLock lock(&logs[i]->mu);
          if (logs[i]->snapshots < counts[i] + 3) return false;
        }
        return true;
      },
      absl::Seconds(20)));
  std::move(end_watchers).Invoke();

  for (int i = 0; i < kWatchers; ++i) {
    WatcherLog& log = *logs[i];
    absl::MutexLock lock(&log.mu);
    SCOPED_TRACE(absl::StrCat("watcher ", i));
    EXPECT_GE(log.snapshots, 2 * kRounds);
    for (uint32_t id : cycled) {
      EXPECT_EQ(log.stopped[id], 1) << "thread " << id << " must be reported stopped once";
      EXPECT_EQ(log.seen_after_stop.count(id), 0u) << "thread " << id << " came back";
    }
    EXPECT_EQ(log.status.error_code(), grpc::StatusCode::CANCELLED) << log.status.error_message();
  }
}

}  // namespace
}  // namespace retryd::control
