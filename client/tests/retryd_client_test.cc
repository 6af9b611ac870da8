// RetrydClient against a fake retryd on loopback: requests, status codes,
// the bearer token, deadlines, watch and its cancellation.
#include "client/retryd_client.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/tests/fake_retryd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd {
namespace {

using ::retryd::testing::CallRecord;
using ::retryd::testing::FakeRetryd;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

// Long enough never to fire on a loaded machine; failures show up sooner.
constexpr absl::Duration kWait = absl::Seconds(30);

std::unique_ptr<RetrydClient> Connect(const FakeRetryd& fake, const std::string& token = "") {
  ClientOptions options;
  options.address = fake.address();
  options.token = token;
  absl::StatusOr<std::unique_ptr<RetrydClient>> client = RetrydClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

v1::MetricsSnapshot SnapshotAt(int64_t time_unix_ms) {
  v1::MetricsSnapshot snapshot;
  snapshot.set_time_unix_ms(time_unix_ms);
  return snapshot;
}

TEST(RetrydClientCreateTest, RejectsInconsistentOptions) {
  ClientOptions options;
  options.address = "";
  EXPECT_EQ(RetrydClient::Create(options).status().code(), absl::StatusCode::kInvalidArgument);

  options = ClientOptions();
  options.token = "two\nlines";
  EXPECT_EQ(RetrydClient::Create(options).status().code(), absl::StatusCode::kInvalidArgument);

  options = ClientOptions();
  options.tls_cert_file = "/nonexistent/cert.pem";
  absl::Status status = RetrydClient::Create(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("both a client certificate and its private key"));
}

TEST(RetrydClientCreateTest, UnreadableTlsFileIsNamed) {
  ClientOptions options;
  options.tls_ca_file = "/nonexistent/ca.pem";
  const absl::Status status = RetrydClient::Create(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/ca.pem"));
}

TEST(RetrydClientTest, UnaryCallsSendTheirRequestsAndReturnTheResponses) {
  FakeRetryd fake;
  v1::GetStatusResponse status;
  status.set_retry_backlog(42);
  fake.set_status(status);
  v1::StartRetryThreadsResponse started;
  started.add_thread_ids(5);
  fake.set_start_response(started);
  v1::StopRetryThreadsResponse stopped;
  stopped.add_stopped_thread_ids(5);
  fake.set_stop_response(stopped);
  v1::SetInOrderResponse in_order;
  in_order.set_in_order(true);
  fake.set_in_order_response(in_order);
  std::unique_ptr<RetrydClient> client = Connect(fake);

  absl::StatusOr<v1::GetStatusResponse> got_status = client->GetStatus();
  ASSERT_TRUE(got_status.ok()) << got_status.status();
  EXPECT_EQ(got_status->retry_backlog(), 42);

  absl::StatusOr<v1::StartRetryThreadsResponse> got_started = client->StartRetryThreads(2);
  ASSERT_TRUE(got_started.ok()) << got_started.status();
  EXPECT_THAT(got_started->thread_ids(), ElementsAre(5));
  EXPECT_EQ(fake.last_start_request().count(), 2);

  ASSERT_TRUE(client->StopRetryThreads(3, /*graceful=*/true).ok());
  EXPECT_EQ(fake.last_stop_request().count(), 3);
  EXPECT_TRUE(fake.last_stop_request().has_graceful());
  EXPECT_TRUE(fake.last_stop_request().graceful());

  absl::StatusOr<v1::StopRetryThreadsResponse> got_stopped =
      client->StopRetryThreadsById({5, 6}, /*graceful=*/false);
  ASSERT_TRUE(got_stopped.ok()) << got_stopped.status();
  EXPECT_THAT(got_stopped->stopped_thread_ids(), ElementsAre(5));
  EXPECT_THAT(fake.last_stop_request().thread_ids(), ElementsAre(5, 6));
  EXPECT_EQ(fake.last_stop_request().count(), 0);
  EXPECT_TRUE(fake.last_stop_request().has_graceful());
  EXPECT_FALSE(fake.last_stop_request().graceful());

  absl::StatusOr<v1::SetInOrderResponse> got_in_order = client->SetInOrder(true, true);
  ASSERT_TRUE(got_in_order.ok()) << got_in_order.status();
  EXPECT_TRUE(got_in_order->in_order());
  EXPECT_TRUE(fake.last_in_order_request().in_order());
  EXPECT_TRUE(fake.last_in_order_request().drain_retries());
}

TEST(RetrydClientTest, StatusCodesAndMessagesArePassedThrough) {
  FakeRetryd fake;
  std::unique_ptr<RetrydClient> client = Connect(fake);
  for (const grpc::StatusCode code :
       {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::FAILED_PRECONDITION,
        grpc::StatusCode::NOT_FOUND, grpc::StatusCode::UNAUTHENTICATED,
        grpc::StatusCode::DEADLINE_EXCEEDED, grpc::StatusCode::RESOURCE_EXHAUSTED}) {
    fake.FailWith("SetInOrder", grpc::Status(code, "what to do next"));
    const absl::Status status = client->SetInOrder(true, false).status();
    EXPECT_EQ(static_cast<int>(status.code()), static_cast<int>(code));
    EXPECT_EQ(status.message(), "what to do next");
  }
}

TEST(RetrydClientTest, UnreachableServerIsUnavailable) {
  FakeRetryd fake;
  const std::string address = fake.address();
  fake.Shutdown();
  ClientOptions options;
  options.address = address;
  options.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<RetrydClient>> client = RetrydClient::Create(options);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->GetStatus().status().code(), absl::StatusCode::kUnavailable);
}

TEST(RetrydClientTest, TokenIsSentAsBearerOnEveryCall) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1)}, /*then_end=*/true);
  std::unique_ptr<RetrydClient> client = Connect(fake, "s3cret");
  ASSERT_TRUE(client->GetStatus().ok());
  ASSERT_TRUE(client->StartRetryThreads(1).ok());
  ASSERT_TRUE(client->HealthCheck("").ok());
  ASSERT_TRUE(client->Watch(100, {}, [](const v1::MetricsSnapshot&) { return true; }).ok());
  const std::vector<CallRecord> calls = fake.calls();
  ASSERT_EQ(calls.size(), 4u);
  for (const CallRecord& call : calls) {
    EXPECT_THAT(call.authorization, Optional(std::string("Bearer s3cret"))) << call.method;
  }
}

TEST(RetrydClientTest, NoTokenNoAuthorizationHeader) {
  FakeRetryd fake;
  std::unique_ptr<RetrydClient> client = Connect(fake);
  ASSERT_TRUE(client->GetStatus().ok());
  EXPECT_EQ(fake.last_call("GetStatus")->authorization, std::nullopt);
}

TEST(RetrydClientTest, UnaryCallsHaveTheTimeoutAsDeadlineAndWatchHasNone) {
  FakeRetryd fake;
  fake.set_snapshots({}, /*then_end=*/true);
  ClientOptions options;
  options.address = fake.address();
  options.timeout = absl::Seconds(7);
  absl::StatusOr<std::unique_ptr<RetrydClient>> client = RetrydClient::Create(options);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->GetStatus().ok());
  const std::optional<absl::Duration> deadline_in = fake.last_call("GetStatus")->deadline_in;
  ASSERT_TRUE(deadline_in.has_value());
  // The wire rounds the timeout up a little (grpc-timeout units).
  EXPECT_LE(*deadline_in, absl::Seconds(7) + absl::Milliseconds(100));
  EXPECT_GT(*deadline_in, absl::Seconds(1));

  ASSERT_TRUE((*client)->Watch(100, {}, [](const v1::MetricsSnapshot&) { return true; }).ok());
  EXPECT_EQ(fake.last_call("WatchMetrics")->deadline_in, std::nullopt);
}

TEST(RetrydClientTest, HealthCheck) {
  FakeRetryd fake;
  fake.set_health(grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  std::unique_ptr<RetrydClient> client = Connect(fake);
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> health =
      client->HealthCheck("retryd.v1.Control");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(fake.last_health_request().service(), "retryd.v1.Control");
}

TEST(RetrydClientWatchTest, StreamsUntilTheServerEndsIt) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1), SnapshotAt(2), SnapshotAt(3)}, /*then_end=*/true);
  std::unique_ptr<RetrydClient> client = Connect(fake);
  std::vector<int64_t> seen;
  const absl::Status status = client->Watch(250, {1, 2}, [&](const v1::MetricsSnapshot& s) {
    seen.push_back(s.time_unix_ms());
    return true;
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_THAT(seen, ElementsAre(1, 2, 3));
  EXPECT_EQ(fake.last_watch_request().interval_ms(), 250u);
  EXPECT_THAT(fake.last_watch_request().thread_ids(), ElementsAre(1, 2));
}

TEST(RetrydClientWatchTest, CallbackReturningFalseStopsAndCancelsTheStream) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1), SnapshotAt(2), SnapshotAt(3)}, /*then_end=*/false);
  std::unique_ptr<RetrydClient> client = Connect(fake);
  int seen = 0;
  const absl::Status status =
      client->Watch(100, {}, [&](const v1::MetricsSnapshot&) { return ++seen < 2; });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(seen, 2);
  EXPECT_TRUE(fake.watch_cancelled().WaitForNotificationWithTimeout(kWait));
}

TEST(RetrydClientWatchTest, CancelFromAnotherThreadEndsTheWatchWithOk) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1)}, /*then_end=*/false);  // Then holds the stream open.
  std::unique_ptr<RetrydClient> client = Connect(fake);
  absl::Notification got_snapshot;
  absl::Status status = absl::UnknownError("not returned");
  std::thread watcher([&] {
    status = client->Watch(100, {}, [&](const v1::MetricsSnapshot&) {
      if (!got_snapshot.HasBeenNotified()) got_snapshot.Notify();
      return true;
    });
  });
  // Ended and joined before asserting, so a failure cannot leave it joinable.
  const bool got = got_snapshot.WaitForNotificationWithTimeout(kWait);
  client->Cancel();
  watcher.join();
  ASSERT_TRUE(got);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(fake.watch_cancelled().WaitForNotificationWithTimeout(kWait));

  // A later watch is not affected by the earlier Cancel().
  int seen = 0;
  EXPECT_TRUE(client->Watch(100, {}, [&](const v1::MetricsSnapshot&) { return ++seen < 1; }).ok());
  EXPECT_EQ(seen, 1);
}

TEST(RetrydClientWatchTest, ServerErrorIsReturned) {
  FakeRetryd fake;
  fake.FailWith("WatchMetrics",
                grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "interval_ms must be 100..60000"));
  std::unique_ptr<RetrydClient> client = Connect(fake);
  bool called = false;
  const absl::Status status = client->Watch(5, {}, [&](const v1::MetricsSnapshot&) {
    called = true;
    return true;
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "interval_ms must be 100..60000");
  EXPECT_FALSE(called);
}

TEST(RetrydClientWatchTest, ServerShutdownEndsAnOpenStream) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1)}, /*then_end=*/false);
  std::unique_ptr<RetrydClient> client = Connect(fake);
  absl::Notification got_snapshot;
  absl::Status status;
  std::thread watcher([&] {
    status = client->Watch(100, {}, [&](const v1::MetricsSnapshot&) {
      if (!got_snapshot.HasBeenNotified()) got_snapshot.Notify();
      return true;
    });
  });
  const bool got = got_snapshot.WaitForNotificationWithTimeout(kWait);
  fake.Shutdown();
  watcher.join();
  ASSERT_TRUE(got);
  // Not hidden as OK: the client did not cancel.
  EXPECT_FALSE(status.ok());
}

TEST(RetrydClientTest, ConcurrentCallsFromManyThreads) {
  FakeRetryd fake;
  std::unique_ptr<RetrydClient> client = Connect(fake);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        if (!client->GetStatus().ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(fake.calls().size(), 160u);
}

}  // namespace
}  // namespace retryd
