// retryctl end to end against a fake retryd on loopback: what each command
// sends and prints, --json, exit status 1 with the gRPC code name, the
// token, and how a watch ends (--count, Ctrl-C, the server).
#include "client/retryctl.h"

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/tests/fake_retryd.h"
#include "client/tests/run_retryctl.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace retryd::retryctl {
namespace {

using ::retryd::testing::FakeRetryd;
using ::retryd::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr absl::Duration kWait = absl::Seconds(30);

v1::MetricsSnapshot SnapshotAt(int64_t time_unix_ms, int64_t processed) {
  v1::MetricsSnapshot snapshot;
  snapshot.set_time_unix_ms(time_unix_ms);
  snapshot.set_interval_ms(1000);
  snapshot.set_engine_state(v1::ENGINE_STATE_RUNNING);
  v1::ThreadMetrics* thread = snapshot.add_threads();
  thread->set_thread_id(0);
  thread->set_role(v1::THREAD_ROLE_PRIMARY);
  thread->set_state(v1::THREAD_STATE_RUNNING);
  thread->set_processed(processed);
  return snapshot;
}

// ---- commands -----------------------------------------------------------------

TEST(RetryctlTest, StatusPrintsASummary) {
  FakeRetryd fake;
  v1::GetStatusResponse status;
  status.set_state(v1::ENGINE_STATE_RUNNING);
  status.set_in_order(true);
  status.set_retry_backlog(3);
  status.set_kafka_bootstrap_servers("127.0.0.1:9092");
  status.set_kafka_reachable(true);
  v1::ThreadInfo* thread = status.add_threads();
  thread->set_thread_id(0);
  thread->set_role(v1::THREAD_ROLE_PRIMARY);
  thread->set_state(v1::THREAD_STATE_IDLE);
  fake.set_status(status);

  const RunResult run = RunAgainst(fake, {"status"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_THAT(run.out, StartsWith("engine        RUNNING\nordering      in-order\n"));
  EXPECT_THAT(run.out, HasSubstr("kafka         127.0.0.1:9092 (reachable)\n"));
  EXPECT_THAT(run.out, HasSubstr("retry backlog 3 records\n"));
  EXPECT_THAT(run.out, HasSubstr("   0  primary  IDLE"));
}

TEST(RetryctlTest, StatusJsonIsTheResponse) {
  FakeRetryd fake;
  v1::GetStatusResponse status;
  status.set_state(v1::ENGINE_STATE_RUNNING);
  status.set_retry_backlog(1234);
  status.add_threads()->set_thread_id(7);
  fake.set_status(status);

  const RunResult run = RunAgainst(fake, {"--json", "status"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  v1::GetStatusResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &parsed).ok()) << run.out;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, status));
  EXPECT_THAT(run.out, HasSubstr("\"retry_backlog\": \"1234\""));
}

TEST(RetryctlTest, ThreadsStart) {
  FakeRetryd fake;
  v1::StartRetryThreadsResponse started;
  started.add_thread_ids(5);
  started.add_thread_ids(6);
  fake.set_start_response(started);

  RunResult run = RunAgainst(fake, {"threads", "start", "2"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "started 2 retry threads: 5, 6\n");
  EXPECT_EQ(fake.last_start_request().count(), 2);

  run = RunAgainst(fake, {"threads", "start", "2", "--json"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "{\n \"thread_ids\": [\n  5,\n  6\n ]\n}\n");
}

TEST(RetryctlTest, ThreadsStopByCountIsGracefulByDefault) {
  FakeRetryd fake;
  v1::StopRetryThreadsResponse stopped;
  stopped.add_stopped_thread_ids(6);
  fake.set_stop_response(stopped);

  const RunResult run = RunAgainst(fake, {"threads", "stop", "1"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "stopped 1 retry thread: 6\n");
  const v1::StopRetryThreadsRequest request = fake.last_stop_request();
  EXPECT_EQ(request.count(), 1);
  EXPECT_TRUE(request.thread_ids().empty());
  EXPECT_TRUE(request.has_graceful());
  EXPECT_TRUE(request.graceful());
}

TEST(RetryctlTest, ThreadsStopByIdNow) {
  FakeRetryd fake;
  const RunResult run = RunAgainst(fake, {"threads", "stop", "--id", "3", "--id", "4", "--now"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "no retry threads were running\n");
  const v1::StopRetryThreadsRequest request = fake.last_stop_request();
  EXPECT_THAT(request.thread_ids(), ElementsAre(3, 4));
  EXPECT_EQ(request.count(), 0);
  EXPECT_TRUE(request.has_graceful());
  EXPECT_FALSE(request.graceful());
}

TEST(RetryctlTest, InOrderOnWithDrain) {
  FakeRetryd fake;
  v1::SetInOrderResponse response;
  response.set_in_order(true);
  response.add_stopped_thread_ids(3);
  response.set_drained_records(12);
  fake.set_in_order_response(response);

  RunResult run = RunAgainst(fake, {"inorder", "on", "--drain"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "in_order: on\ndrained 12 retry records and stopped retry threads 3\n");
  EXPECT_TRUE(fake.last_in_order_request().in_order());
  EXPECT_TRUE(fake.last_in_order_request().drain_retries());

  run = RunAgainst(fake, {"--json", "inorder", "on", "--drain"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  v1::SetInOrderResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &parsed).ok()) << run.out;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, response));
  EXPECT_THAT(run.out, HasSubstr("\"stopped_thread_ids\""));
}

TEST(RetryctlTest, InOrderOff) {
  FakeRetryd fake;
  const RunResult run = RunAgainst(fake, {"inorder", "off"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "in_order: off\n");
  EXPECT_FALSE(fake.last_in_order_request().in_order());
  EXPECT_FALSE(fake.last_in_order_request().drain_retries());
}

TEST(RetryctlTest, OrderingKey) {
  FakeRetryd fake;
  v1::SetOrderingModeResponse response;
  response.set_mode(v1::ORDERING_KEY);
  response.set_parked_keys(3);
  fake.set_ordering_response(response);

  RunResult run = RunAgainst(fake, {"ordering", "KEY"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "ordering: key\nfound 3 parked keys in the retry topic\n");
  EXPECT_EQ(fake.last_ordering_request().mode(), v1::ORDERING_KEY);
  EXPECT_FALSE(fake.last_ordering_request().drain_retries());

  run = RunAgainst(fake, {"--json", "ordering", "key"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  v1::SetOrderingModeResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &parsed).ok()) << run.out;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, response));
  EXPECT_THAT(run.out, HasSubstr("\"mode\": \"ORDERING_KEY\""));

  // The API's current name is taken as well as the older one above.
  run = RunAgainst(fake, {"ordering", "ORDERING_KEY"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(fake.last_ordering_request().mode(), v1::ORDERING_KEY);
}

TEST(RetryctlTest, OrderingInOrderWithDrainAndBackToUnordered) {
  FakeRetryd fake;
  v1::SetOrderingModeResponse response;
  response.set_mode(v1::ORDERING_IN_ORDER);
  response.add_stopped_thread_ids(3);
  response.set_drained_records(12);
  fake.set_ordering_response(response);
  RunResult run = RunAgainst(fake, {"ordering", "in-order", "--drain"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "ordering: in-order\ndrained 12 retry records and stopped retry threads 3\n");
  EXPECT_EQ(fake.last_ordering_request().mode(), v1::ORDERING_IN_ORDER);
  EXPECT_TRUE(fake.last_ordering_request().drain_retries());

  response.Clear();
  response.set_mode(v1::ORDERING_UNORDERED);
  response.add_started_thread_ids(4);
  fake.set_ordering_response(response);
  run = RunAgainst(fake, {"ordering", "Unordered"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "ordering: unordered\nstarted 1 retry thread to read the retry topic: 4\n");
  EXPECT_EQ(fake.last_ordering_request().mode(), v1::ORDERING_UNORDERED);
  EXPECT_FALSE(fake.last_ordering_request().drain_retries());
}

// ---- failures: exit 64 + the gRPC code and "retryctl: CODE: message" ---------------

TEST(RetryctlTest, RpcFailureExitsWith64PlusTheCodeAndItsName) {
  FakeRetryd fake;
  fake.FailWith("StartRetryThreads", grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                                  "in order: run 'retryctl inorder off' first"));
  const RunResult run = RunAgainst(fake, {"threads", "start", "1"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "retryctl: FAILED_PRECONDITION: in order: run 'retryctl inorder off' first\n");
}

TEST(RetryctlTest, EveryCommandReportsItsRpcFailure) {
  FakeRetryd fake;
  for (const char* method :
       {"GetStatus", "StopRetryThreads", "SetInOrder", "SetOrderingMode", "WatchMetrics"}) {
    fake.FailWith(method, grpc::Status(grpc::StatusCode::NOT_FOUND, "no thread 9"));
  }
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"status"},
                                             {"threads", "stop", "--id", "9"},
                                             {"inorder", "on"},
                                             {"ordering", "key"},
                                             {"watch"}}) {
    const RunResult run = RunAgainst(fake, args);
    EXPECT_EQ(run.exit_code, 69) << args[0];
    EXPECT_EQ(run.err, "retryctl: NOT_FOUND: no thread 9\n") << args[0];
  }
}

// With --json a failed call's error is one JSON line on stderr, for scripts;
// the exit status is the same.
TEST(RetryctlTest, JsonErrorIsOneLineOfJson) {
  FakeRetryd fake;
  fake.FailWith("StartRetryThreads",
                grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "in order: \"off\" first"));
  const RunResult run = RunAgainst(fake, {"--json", "threads", "start", "1"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_EQ(run.out, "");
  google::protobuf::Struct error;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.err, &error).ok()) << run.err;
  EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << "one line: " << run.err;
  EXPECT_EQ(error.fields().at("code").number_value(), 9);
  EXPECT_EQ(error.fields().at("status").string_value(), "FAILED_PRECONDITION");
  EXPECT_EQ(error.fields().at("message").string_value(), "in order: \"off\" first");
}

TEST(RetryctlTest, ExitStatusIs64PlusTheCode) {
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kCancelled), 65);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kUnauthenticated), 80);
}

TEST(RetryctlTest, VersionPrintsTheClientsAndTheServersRelease) {
  FakeRetryd fake;
  v1::GetStatusResponse status;
  status.set_version("9.8.7");
  fake.set_status(status);
  RunResult run = RunAgainst(fake, {"version"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, absl::StrCat("retryctl ", RETRYD_VERSION, "\nretryd   9.8.7 at ",
                                  fake.address(), "\n"));
  run = RunAgainst(fake, {"--json", "version"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  google::protobuf::Struct versions;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &versions).ok()) << run.out;
  EXPECT_EQ(versions.fields().at("client").string_value(), RETRYD_VERSION);
  EXPECT_EQ(versions.fields().at("server").string_value(), "9.8.7");
}

// `retryctl health [SERVICE]`: the Check answer, exit 0 only for SERVING,
// so that a script (or a probe) can use it.
TEST(RetryctlTest, HealthPrintsTheStatusAndExitsZeroOnlyWhenServing) {
  FakeRetryd fake;
  RunResult run = RunAgainst(fake, {"health"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "SERVING\n");
  EXPECT_EQ(fake.last_health_request().service(), "");

  fake.set_health(grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  run = RunAgainst(fake, {"health", "retryd.downstream"});
  EXPECT_EQ(run.exit_code, kExitNotServing);
  EXPECT_EQ(run.out, "NOT_SERVING\n");
  EXPECT_EQ(fake.last_health_request().service(), "retryd.downstream");

  run = RunAgainst(fake, {"--json", "health"});
  EXPECT_EQ(run.exit_code, kExitNotServing);
  google::protobuf::Struct health;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &health).ok()) << run.out;
  EXPECT_EQ(health.fields().at("status").string_value(), "NOT_SERVING");

  fake.FailWith("Check", grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  run = RunAgainst(fake, {"health", "nope"});
  EXPECT_EQ(run.exit_code, 69);
  EXPECT_EQ(run.err, "retryctl: NOT_FOUND: unknown service\n");

  run = RunAgainst(fake, {"health", "a", "b"});
  EXPECT_EQ(run.exit_code, kExitUsage);
}

// An unreachable server: 78 (UNAVAILABLE) and where retryctl looked;
// `version` still prints the client's release.
TEST(RetryctlTest, UnreachableServerSaysWhereItLooked) {
  FakeRetryd fake;
  const std::string address = fake.address();
  fake.Shutdown();
  for (const char* command : {"status", "version"}) {
    const RunResult run = RunAgainst(fake, {"--timeout", "10", command}, Environment{address, ""});
    EXPECT_EQ(run.exit_code, 78) << command;
    EXPECT_THAT(run.err, StartsWith("retryctl: UNAVAILABLE: ")) << command;
    EXPECT_THAT(run.err, HasSubstr("is retryd running and listening on " + address)) << command;
    EXPECT_EQ(run.out, command == std::string("version")
                           ? absl::StrCat("retryctl ", RETRYD_VERSION, "\n")
                           : "")
        << command;
  }
}

// ---- the token ---------------------------------------------------------------

TEST(RetryctlTest, TokenFromFileIsSentAsBearer) {
  FakeRetryd fake;
  const TempDir dir;
  const RunResult run =
      RunAgainst(fake, {"--token-file", dir.WriteFile("token", "s3cret\n"), "status"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(fake.last_call("GetStatus")->authorization, Optional(std::string("Bearer s3cret")));
}

TEST(RetryctlTest, TokenFileFromTheEnvironment) {
  FakeRetryd fake;
  const TempDir dir;
  const std::string token = dir.WriteFile("env-token", "  from-env  \n");
  const RunResult run = RunAgainst(fake, {"inorder", "off"}, Environment{"", token});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(fake.last_call("SetInOrder")->authorization,
              Optional(std::string("Bearer from-env")));
}

TEST(RetryctlTest, NoTokenFileNoHeaderAndAHintWhenRefused) {
  FakeRetryd fake;
  fake.FailWith("StartRetryThreads",
                grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing bearer token"));
  const RunResult run = RunAgainst(fake, {"threads", "start", "1"});
  EXPECT_EQ(run.exit_code, 80);
  EXPECT_EQ(fake.last_call("StartRetryThreads")->authorization, std::nullopt);
  EXPECT_EQ(run.err,
            "retryctl: UNAUTHENTICATED: missing bearer token\n"
            "retryctl: retryd wants a token: pass --token-file FILE or set RETRYD_TOKEN_FILE\n");
}

TEST(RetryctlTest, UnreadableOrEmptyTokenFileIsAUsageError) {
  FakeRetryd fake;
  RunResult run = RunAgainst(fake, {"--token-file", "/nonexistent/token", "status"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_THAT(run.err, StartsWith("retryctl: --token-file: cannot read /nonexistent/token"));

  const TempDir dir;
  run = RunAgainst(fake, {"--token-file", dir.WriteFile("empty-token", "\n"), "status"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_THAT(run.err, HasSubstr("is empty"));
  EXPECT_TRUE(fake.calls().empty());
}

TEST(RetryctlTest, TimeoutBecomesTheDeadline) {
  FakeRetryd fake;
  ASSERT_EQ(RunAgainst(fake, {"--timeout", "5", "status"}).exit_code, kExitOk);
  const std::optional<absl::Duration> deadline_in = fake.last_call("GetStatus")->deadline_in;
  ASSERT_TRUE(deadline_in.has_value());
  // The wire rounds the timeout up a little (grpc-timeout units).
  EXPECT_LE(*deadline_in, absl::Seconds(5) + absl::Milliseconds(100));
  EXPECT_GT(*deadline_in, absl::Seconds(1));
}

// ---- watch --------------------------------------------------------------------

TEST(RetryctlWatchTest, CountStopsAfterNTablesSeparatedByABlankLine) {
  FakeRetryd fake;
  // A third snapshot is ready and the stream stays open: only --count ends it.
  fake.set_snapshots({SnapshotAt(10'000, 100), SnapshotAt(11'000, 350), SnapshotAt(12'000, 400)},
                     /*then_end=*/false);
  const RunResult run =
      RunAgainst(fake, {"watch", "--count", "2", "--interval", "500", "--thread", "0"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(fake.last_watch_request().interval_ms(), 500u);
  EXPECT_THAT(fake.last_watch_request().thread_ids(), ElementsAre(0));
  EXPECT_TRUE(fake.watch_cancelled().WaitForNotificationWithTimeout(kWait));

  const std::vector<std::string> tables = absl::StrSplit(run.out, "\n\n");
  ASSERT_THAT(tables, SizeIs(2)) << run.out;
  EXPECT_THAT(tables[0], StartsWith("retryd "));
  EXPECT_THAT(tables[1], StartsWith("retryd "));
  EXPECT_THAT(run.out, Not(HasSubstr("\x1b")));
  // The second table's rate: (350 - 100) / 1 s.
  const std::vector<std::string> rows = Lines(tables[1]);
  ASSERT_THAT(rows, SizeIs(3));
  const std::vector<std::string> cells = absl::StrSplit(rows[2], ' ', absl::SkipEmpty());
  ASSERT_GT(cells.size(), 5u);
  EXPECT_EQ(cells[5], "250.0");
}

TEST(RetryctlWatchTest, JsonPrintsOneSnapshotPerLine) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1, 1), SnapshotAt(2, 2), SnapshotAt(3, 3)}, /*then_end=*/false);
  const RunResult run = RunAgainst(fake, {"watch", "--json", "--count", "2"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  const std::vector<std::string> lines = absl::StrSplit(run.out, '\n');
  ASSERT_THAT(lines, SizeIs(3));  // Two lines and the empty rest.
  EXPECT_EQ(lines[2], "");
  for (int i = 0; i < 2; ++i) {
    v1::MetricsSnapshot parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i], &parsed).ok()) << lines[i];
    EXPECT_EQ(parsed.time_unix_ms(), i + 1);
    EXPECT_THAT(lines[i], HasSubstr("\"time_unix_ms\":"));
  }
}

TEST(RetryctlWatchTest, TerminalRedrawsInPlace) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1, 1), SnapshotAt(2, 2)}, /*then_end=*/false);
  const RunResult run = RunAgainst(fake, {"watch", "--count", "2"}, {}, /*tty=*/true);
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  const std::vector<std::string> frames = absl::StrSplit(run.out, "\x1b[H\x1b[2J");
  ASSERT_THAT(frames, SizeIs(3)) << run.out;  // Nothing before the first clear.
  EXPECT_EQ(frames[0], "");
  EXPECT_THAT(frames[1], StartsWith("retryd "));
  EXPECT_THAT(frames[2], StartsWith("retryd "));
}

TEST(RetryctlWatchTest, InterruptEndsTheWatchWithExitZero) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1, 1)}, /*then_end=*/false);  // Then silence.
  Interrupt interrupt;
  RunResult run{-1, "", ""};
  std::thread retryctl([&] { run = RunAgainst(fake, {"watch"}, {}, false, &interrupt); });
  // Ended and joined before asserting, so a failure cannot leave it joinable.
  const bool written = fake.first_snapshot_written().WaitForNotificationWithTimeout(kWait);
  if (written) {
    // The watch is attached before its call reaches the server.
    EXPECT_TRUE(interrupt.Trigger());
  } else {
    fake.Shutdown();
  }
  retryctl.join();
  ASSERT_TRUE(written);
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_TRUE(fake.watch_cancelled().WaitForNotificationWithTimeout(kWait));
}

TEST(RetryctlWatchTest, InterruptWithoutAWatchIsLeftToTheCaller) {
  Interrupt interrupt;
  EXPECT_FALSE(interrupt.Trigger());
  EXPECT_TRUE(interrupt.triggered());
}

TEST(RetryctlWatchTest, ServerEndingTheStreamIsReported) {
  FakeRetryd fake;
  fake.set_snapshots({SnapshotAt(1, 1)}, /*then_end=*/true);
  const RunResult run = RunAgainst(fake, {"watch", "--count", "5"});
  EXPECT_EQ(run.exit_code, kExitOk);
  EXPECT_THAT(run.out, StartsWith("retryd "));
  EXPECT_EQ(run.err, "retryctl: retryd ended the stream\n");
}

TEST(RetryctlWatchTest, ServerRefusingTheWatchExitsOne) {
  FakeRetryd fake;
  fake.FailWith("WatchMetrics", grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                             "interval_ms must be in 100..60000"));
  const RunResult run = RunAgainst(fake, {"watch"});
  EXPECT_EQ(run.exit_code, 67);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "retryctl: INVALID_ARGUMENT: interval_ms must be in 100..60000\n");
}

}  // namespace
}  // namespace retryd::retryctl
