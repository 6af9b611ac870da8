// retryctl's newer commands: threads set, drain, operations and operation;
// --request-id; and the reason a failed call carries, in its error line and
// its JSON. Calls run against a fake retryd on loopback.
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/request_id.h"
#include "client/retryctl.h"
#include "client/retryctl_format.h"
#include "client/retryctl_help.h"
#include "client/tests/fake_retryd.h"
#include "client/tests/run_retryctl.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/common/error_reason.h"

namespace retryd::retryctl {
namespace {

using ::retryd::testing::FakeRetryd;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr absl::Duration kWait = absl::Seconds(30);

v1::Operation Drain(const std::string& id, v1::OperationState state) {
  return MakeOperation(id, v1::OPERATION_KIND_DRAIN, state);
}

// ---- the request id ----------------------------------------------------------

TEST(RequestIdTest, UuidsAreRecognisedAndMade) {
  EXPECT_TRUE(IsUuid(kUuid));
  EXPECT_TRUE(IsUuid("0B6F6F1E-4AD4-4C31-9D55-5B1E1F2F7A10"));
  EXPECT_FALSE(IsUuid("0b6f6f1e4ad44c319d555b1e1f2f7a10"));
  EXPECT_FALSE(IsUuid("0b6f6f1e-4ad4-4c31-9d55-5b1e1f2f7a1g"));
  EXPECT_FALSE(IsUuid(""));

  std::array<uint8_t, 16> bytes;
  bytes.fill(0xff);
  EXPECT_EQ(UuidV4(bytes), "ffffffff-ffff-4fff-bfff-ffffffffffff");
  bytes.fill(0);
  EXPECT_EQ(UuidV4(bytes), "00000000-0000-4000-8000-000000000000");

  const absl::StatusOr<std::string> a = NewRequestId();
  const absl::StatusOr<std::string> b = NewRequestId();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(IsUuid(*a)) << *a;
  EXPECT_EQ((*a)[14], '4');
  EXPECT_NE(*a, *b);
}

TEST(RetryctlRequestIdArgsTest, TakenByCommandsThatChangeRetryd) {
  EXPECT_EQ(Parse({"--request-id", kUuid, "threads", "set", "2"}).flags.request_id, kUuid);
  EXPECT_EQ(Parse({"drain", "--request-id=auto"}).flags.request_id, "auto");
  EXPECT_EQ(Parse({"threads", "start", "1"}).flags.request_id, "");
  EXPECT_THAT(ErrorOf({"--request-id", "123", "threads", "start", "1"}),
              HasSubstr("--request-id must be a UUID"));
  EXPECT_THAT(ErrorOf({"--request-id", kUuid, "status"}),
              HasSubstr("--request-id applies only to a command that changes retryd"));
  EXPECT_THAT(ErrorOf({"--request-id", kUuid, "operation", "watch", "x"}),
              HasSubstr("not to 'operation'"));
  EXPECT_TRUE(IsMutating(Command::kOperationCancel));
  EXPECT_FALSE(IsMutating(Command::kOperations));
}

// Every mutating command sends the id it was given.
TEST(RetryctlRequestIdTest, SentWithEveryMutatingCall) {
  FakeRetryd fake;
  const std::vector<std::string> id = {"--request-id", kUuid};
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), id.begin(), id.end());
    const RunResult result = RunAgainst(fake, args);
    EXPECT_EQ(result.exit_code, kExitOk) << args[2] << ": " << result.err;
  };
  run({"threads", "start", "1"});
  EXPECT_EQ(fake.last_start_request().request_id(), kUuid);
  run({"threads", "stop", "1"});
  EXPECT_EQ(fake.last_stop_request().request_id(), kUuid);
  run({"threads", "set", "1"});
  EXPECT_EQ(fake.last_request<v1::SetRetryThreadCountRequest>("SetRetryThreadCount").request_id(),
            kUuid);
  run({"inorder", "off"});
  EXPECT_EQ(fake.last_in_order_request().request_id(), kUuid);
  run({"ordering", "key"});
  EXPECT_EQ(fake.last_ordering_request().request_id(), kUuid);
  run({"dlq-record", "orders", "0", "2"});
  EXPECT_EQ(fake.last_request<v1::DeadLetterRecordRequest>("DeadLetterRecord").request_id(), kUuid);
  run({"drain"});
  EXPECT_EQ(fake.last_request<v1::StartDrainRequest>("StartDrain").request_id(), kUuid);
  run({"operation", "cancel", "op-1"});
  EXPECT_EQ(fake.last_request<v1::CancelOperationRequest>("CancelOperation").request_id(), kUuid);

  // Without the flag, none.
  ASSERT_EQ(RunAgainst(fake, {"threads", "start", "1"}).exit_code, kExitOk);
  EXPECT_EQ(fake.last_start_request().request_id(), "");
}

TEST(RetryctlRequestIdTest, AutoMakesOneAndShowsItWhenTheOutcomeIsUnknown) {
  FakeRetryd fake;
  fake.FailWith("StartRetryThreads",
                grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
  RunResult run = RunAgainst(fake, {"--request-id", "auto", "threads", "start", "1"});
  EXPECT_EQ(run.exit_code, 68);
  const std::string sent = fake.last_start_request().request_id();
  EXPECT_TRUE(IsUuid(sent)) << sent;
  EXPECT_THAT(run.err, HasSubstr("run it again with --request-id " + sent));

  run = RunAgainst(fake, {"--json", "--request-id", "auto", "threads", "start", "1"});
  EXPECT_EQ(run.exit_code, 68);
  EXPECT_EQ(ParseJsonObject(run.err).fields().at("request_id").string_value(),
            fake.last_start_request().request_id());

  // A refusal with a reason applied nothing: no hint.
  fake.FailWith("StartRetryThreads",
                GrpcErrorWithReason(grpc::StatusCode::DEADLINE_EXCEEDED, "busy", "CONTROL_BUSY"));
  run = RunAgainst(fake, {"--request-id", kUuid, "threads", "start", "1"});
  EXPECT_EQ(run.err,
            "retryctl: DEADLINE_EXCEEDED (CONTROL_BUSY): busy\n"
            "retryctl: no answer within --timeout 30s\n");
}

// ---- errors with a reason ------------------------------------------------------

TEST(RetryctlReasonTest, HumanLineAndJsonCarryTheReason) {
  FakeRetryd fake;
  fake.FailWith(
      "SetRetryThreadCount",
      GrpcErrorWithReason(grpc::StatusCode::FAILED_PRECONDITION,
                          "target 9 is above retry.max_threads (4)", "MAX_THREADS_REACHED"));
  RunResult run = RunAgainst(fake, {"threads", "set", "9"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "retryctl: FAILED_PRECONDITION (MAX_THREADS_REACHED): target 9 is above "
            "retry.max_threads (4)\n");

  run = RunAgainst(fake, {"--json", "threads", "set", "9"});
  EXPECT_EQ(run.exit_code, 73);
  const google::protobuf::Struct error = ParseJsonObject(run.err);
  EXPECT_EQ(error.fields().at("reason").string_value(), "MAX_THREADS_REACHED");
  EXPECT_EQ(error.fields().at("status").string_value(), "FAILED_PRECONDITION");
  EXPECT_EQ(error.fields().count("request_id"), 0u);
}

TEST(RetryctlReasonTest, FormatErrorAndErrorJson) {
  const absl::Status plain = absl::NotFoundError("no thread 9");
  EXPECT_EQ(FormatError(plain), "NOT_FOUND: no thread 9");
  EXPECT_EQ(ParseJsonObject(ErrorJson(plain)).fields().count("reason"), 0u);
  const absl::Status reasoned = WithReason(plain, "THREAD_NOT_FOUND");
  EXPECT_EQ(FormatError(reasoned), "NOT_FOUND (THREAD_NOT_FOUND): no thread 9");
  const google::protobuf::Struct json = ParseJsonObject(ErrorJson(reasoned, kUuid));
  EXPECT_EQ(json.fields().at("reason").string_value(), "THREAD_NOT_FOUND");
  EXPECT_EQ(json.fields().at("request_id").string_value(), kUuid);
  EXPECT_EQ(json.fields().at("code").number_value(), 5);
}

// ---- threads set -------------------------------------------------------------------

TEST(RetryctlThreadsSetTest, Arguments) {
  Invocation invocation = Parse({"threads", "set", "3"});
  EXPECT_EQ(invocation.command, Command::kThreadsSet);
  EXPECT_EQ(invocation.count, 3);
  EXPECT_TRUE(invocation.graceful);
  invocation = Parse({"threads", "set", "--now", "0"});
  EXPECT_EQ(invocation.count, 0);
  EXPECT_FALSE(invocation.graceful);
  EXPECT_EQ(ErrorOf({"threads", "set"}),
            "threads set: missing N, the number of retry threads to run");
  EXPECT_EQ(ErrorOf({"threads", "set", "-1"}),
            "threads set: N must be a whole number of at least 0, got '-1'");
  EXPECT_EQ(ErrorOf({"threads", "set", "2", "3"}), "threads set: unexpected argument '3'");
  EXPECT_EQ(ErrorOf({"threads", "set", "2", "--id", "3"}), "threads set: unknown flag --id");
  EXPECT_EQ(ErrorOf({"threads", "start", "0"}),
            "threads start: N must be a whole number of at least 1, got '0'");
  EXPECT_EQ(ErrorOf({"threads", "list"}),
            "threads: unknown subcommand 'list' (use start, stop or set)");
}

TEST(RetryctlThreadsSetTest, Format) {
  v1::SetRetryThreadCountResponse response;
  EXPECT_EQ(FormatSetRetryThreadCount(response), "no change: no retry threads running\n");
  response.add_running_thread_ids(3);
  response.add_running_thread_ids(4);
  EXPECT_EQ(FormatSetRetryThreadCount(response), "no change: 2 retry threads running: 3, 4\n");
  response.add_started_thread_ids(4);
  response.add_stopped_thread_ids(5);
  EXPECT_EQ(FormatSetRetryThreadCount(response),
            "started 1 retry thread: 4\nstopped 1 retry thread: 5\n"
            "2 retry threads running: 3, 4\n");
}

TEST(RetryctlThreadsSetTest, CallsSetRetryThreadCount) {
  FakeRetryd fake;
  v1::SetRetryThreadCountResponse response;
  response.add_started_thread_ids(5);
  response.add_running_thread_ids(2);
  response.add_running_thread_ids(5);
  fake.set_response("SetRetryThreadCount", response);

  RunResult run = RunAgainst(fake, {"threads", "set", "2", "--now"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "started 1 retry thread: 5\n2 retry threads running: 2, 5\n");
  const auto request = fake.last_request<v1::SetRetryThreadCountRequest>("SetRetryThreadCount");
  EXPECT_EQ(request.target(), 2);
  EXPECT_TRUE(request.has_graceful());
  EXPECT_FALSE(request.graceful());

  run = RunAgainst(fake, {"--json", "threads", "set", "2"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("\"running_thread_ids\": [\n  2,\n  5\n ]"));
  EXPECT_THAT(run.out, HasSubstr("\"stopped_thread_ids\": []"));
}

// ---- drain and operations: arguments, help, text ---------------------------------

TEST(RetryctlOperationArgsTest, Drain) {
  Invocation invocation = Parse({"drain"});
  EXPECT_EQ(invocation.command, Command::kDrain);
  EXPECT_FALSE(invocation.wait);
  EXPECT_EQ(invocation.drain_timeout_ms, 0u);
  invocation = Parse({"drain", "--wait", "--drain-timeout", "10m", "--timeout", "5"});
  EXPECT_TRUE(invocation.wait);
  EXPECT_EQ(invocation.drain_timeout_ms, 600'000u);
  EXPECT_EQ(invocation.flags.timeout, absl::Seconds(5));  // Still the call's deadline.
  EXPECT_EQ(Parse({"drain", "--drain-timeout=90"}).drain_timeout_ms, 90'000u);
  EXPECT_THAT(ErrorOf({"drain", "--drain-timeout", "25h"}), HasSubstr("1ms to 24h"));
  EXPECT_THAT(ErrorOf({"drain", "--drain-timeout", "0"}), HasSubstr("got '0'"));
  EXPECT_THAT(ErrorOf({"drain", "--drain-timeout"}), HasSubstr("needs a duration"));
  EXPECT_EQ(ErrorOf({"drain", "--wait=yes"}), "drain: --wait takes no value");
  EXPECT_EQ(ErrorOf({"drain", "now"}), "drain: unexpected argument 'now'");
}

TEST(RetryctlOperationArgsTest, OperationsAndOperation) {
  EXPECT_EQ(Parse({"operations"}).command, Command::kOperations);
  EXPECT_EQ(ErrorOf({"operations", "x"}), "operations: takes no arguments, got 'x'");
  Invocation invocation = Parse({"operation", "op-1"});
  EXPECT_EQ(invocation.command, Command::kOperationGet);
  EXPECT_EQ(invocation.operation_id, "op-1");
  invocation = Parse({"operation", "watch", "op-2"});
  EXPECT_EQ(invocation.command, Command::kOperationWatch);
  EXPECT_EQ(invocation.operation_id, "op-2");
  invocation = Parse({"operation", "cancel", "op-3"});
  EXPECT_EQ(invocation.command, Command::kOperationCancel);
  EXPECT_EQ(invocation.operation_id, "op-3");
  EXPECT_EQ(ErrorOf({"operation"}), "operation: missing ID, 'watch ID' or 'cancel ID'");
  EXPECT_EQ(ErrorOf({"operation", "cancel"}), "operation: cancel: missing ID, the operation's id");
  EXPECT_EQ(ErrorOf({"operation", "op-1", "op-2"}), "operation: unexpected argument 'op-2'");
  EXPECT_EQ(ErrorOf({"operation", "--all"}), "operation: unknown flag --all");
}

TEST(RetryctlOperationArgsTest, HelpForEveryNewCommandAndFlag) {
  for (const char* topic : {"drain", "operations", "operation"}) {
    EXPECT_EQ(Parse({topic, "--help"}).help_topic, topic);
  }
  EXPECT_THAT(std::string(HelpText("drain")), HasSubstr("--drain-timeout D"));
  EXPECT_THAT(std::string(HelpText("drain")), HasSubstr("DRAIN_RUNNING"));
  EXPECT_THAT(std::string(HelpText("operation")), HasSubstr("retryctl operation cancel ID"));
  EXPECT_THAT(std::string(HelpText("threads")), HasSubstr("retryctl threads set N [--now]"));
  EXPECT_THAT(std::string(HelpText("threads")), HasSubstr("AUTOSCALE_ACTIVE"));
  const std::string overview(HelpText(""));
  for (const char* expected :
       {"threads set N [--now]", "drain [--wait] [--drain-timeout D]", "operations",
        "operation ID | watch ID | cancel ID", "--request-id UUID", "CODE (REASON)", "130"}) {
    EXPECT_THAT(overview, HasSubstr(expected));
  }
}

TEST(RetryctlOperationFormatTest, OneOperation) {
  constexpr int64_t kNow = 1'020'000;
  v1::Operation running = Drain("op-1", v1::OPERATION_STATE_RUNNING);
  running.mutable_progress()->set_description("120 of 400 retry records left");
  running.set_request_id(kUuid);
  std::string text = FormatOperation(running, kNow);
  EXPECT_THAT(text, StartsWith("id        op-1\nkind      drain\nstate     RUNNING\n"));
  EXPECT_THAT(text, HasSubstr("progress  120 of 400 retry records left\n"));
  EXPECT_THAT(text, HasSubstr("created   20.0s ago\n"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("request   ", kUuid, "\n")));
  EXPECT_THAT(text, Not(HasSubstr("ended")));
  EXPECT_EQ(FormatOperationUpdate(running, kNow), "RUNNING 20.0s: 120 of 400 retry records left");

  v1::Operation done = Drain("op-1", v1::OPERATION_STATE_SUCCEEDED);
  done.mutable_drain()->set_drained_records(400);
  done.mutable_drain()->add_stopped_thread_ids(3);
  done.mutable_drain()->add_stopped_thread_ids(4);
  text = FormatOperation(done, kNow);
  EXPECT_THAT(text, HasSubstr("ended     6.0s ago, after 14.0s\n"));
  EXPECT_THAT(text, HasSubstr("result    drained 400 retry records, stopped retry threads 3, 4\n"));
  EXPECT_EQ(FormatOperationUpdate(done, kNow),
            "SUCCEEDED after 14.0s: drained 400 retry records, stopped retry threads 3, 4");
  EXPECT_TRUE(OperationError(done).ok());

  v1::Operation failed = Drain("op-2", v1::OPERATION_STATE_FAILED);
  *failed.mutable_error() =
      RpcStatusWithReason(grpc::StatusCode::DEADLINE_EXCEEDED, "the drain passed its timeout", "");
  EXPECT_THAT(FormatOperation(failed, kNow),
              HasSubstr("error     DEADLINE_EXCEEDED: the drain passed its timeout\n"));
  EXPECT_EQ(OperationError(failed).code(), absl::StatusCode::kDeadlineExceeded);

  // Ended otherwise, without an error code: never taken for success.
  v1::Operation cancelled = Drain("op-3", v1::OPERATION_STATE_CANCELLED);
  EXPECT_EQ(OperationError(cancelled).code(), absl::StatusCode::kCancelled);
  v1::Operation unknown = Drain("op-4", static_cast<v1::OperationState>(9));
  EXPECT_EQ(OperationStateName(unknown.state()), "9");
  EXPECT_EQ(OperationKindName(static_cast<v1::OperationKind>(7)), "7");
}

TEST(RetryctlOperationFormatTest, ListNewestFirst) {
  v1::ListOperationsResponse response;
  EXPECT_EQ(FormatListOperations(response, 0), "no operations\n");
  v1::Operation* running = response.add_operations();
  *running = Drain("op-2", v1::OPERATION_STATE_RUNNING);
  running->mutable_progress()->set_description("7 retry records left");
  *response.add_operations() = Drain("op-1", v1::OPERATION_STATE_SUCCEEDED);
  const std::vector<std::string> lines =
      absl::StrSplit(FormatListOperations(response, 1'020'000), '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(3));
  EXPECT_THAT(lines[0], StartsWith("ID    KIND   STATE      AGE    ENDED     PROGRESS"));
  EXPECT_THAT(lines[1],
              StartsWith("op-2  drain  RUNNING    20.0s  -         7 retry records left"));
  EXPECT_THAT(lines[2], StartsWith("op-1  drain  SUCCEEDED  20.0s  6.0s ago  -"));
}

// ---- drain and operations against the fake ------------------------------------------

TEST(RetryctlDrainTest, StartsADrainAndPrintsItsId) {
  FakeRetryd fake;
  fake.set_response("StartDrain", Drain("op-7", v1::OPERATION_STATE_RUNNING));
  RunResult run = RunAgainst(fake, {"drain", "--drain-timeout", "2m"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, StartsWith("drain started: operation op-7\n"));
  EXPECT_THAT(run.out, HasSubstr("retryctl operation watch op-7"));
  EXPECT_EQ(fake.last_request<v1::StartDrainRequest>("StartDrain").timeout_ms(), 120'000u);

  run = RunAgainst(fake, {"--json", "drain"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  v1::Operation parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &parsed).ok()) << run.out;
  EXPECT_EQ(parsed.id(), "op-7");
  EXPECT_THAT(run.out, HasSubstr("\"state\": \"OPERATION_STATE_RUNNING\""));
}

TEST(RetryctlDrainTest, WaitFollowsItToSuccess) {
  FakeRetryd fake;
  fake.set_response("StartDrain", Drain("op-7", v1::OPERATION_STATE_RUNNING));
  v1::Operation first = Drain("op-7", v1::OPERATION_STATE_RUNNING);
  first.mutable_progress()->set_description("400 retry records left");
  v1::Operation second = first;  // Unchanged: not printed again.
  v1::Operation third = first;
  third.mutable_progress()->set_description("0 retry records left");
  v1::Operation done = Drain("op-7", v1::OPERATION_STATE_SUCCEEDED);
  done.mutable_drain()->set_drained_records(400);
  fake.set_operation_updates({first, second, third, done}, /*then_end=*/true);

  RunResult run = RunAgainst(fake, {"drain", "--wait"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  const std::vector<std::string> lines = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(4)) << run.out;
  EXPECT_EQ(lines[0], "drain started: operation op-7");
  EXPECT_THAT(lines[1], ::testing::EndsWith(": 400 retry records left"));
  EXPECT_THAT(lines[2], ::testing::EndsWith(": 0 retry records left"));
  EXPECT_EQ(lines[3], "SUCCEEDED after 14.0s: drained 400 retry records");
  EXPECT_EQ(fake.last_request<v1::WatchOperationRequest>("WatchOperation").id(), "op-7");

  // --json: every update, one line each.
  run = RunAgainst(fake, {"--json", "drain", "--wait"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 4) << run.out;
}

TEST(RetryctlDrainTest, WaitExitsWithTheCodeOfTheOperationsError) {
  FakeRetryd fake;
  fake.set_response("StartDrain", Drain("op-8", v1::OPERATION_STATE_RUNNING));
  v1::Operation failed = Drain("op-8", v1::OPERATION_STATE_FAILED);
  *failed.mutable_error() = RpcStatusWithReason(grpc::StatusCode::FAILED_PRECONDITION,
                                                "the engine stopped", "ENGINE_NOT_RUNNING");
  fake.set_operation_updates({failed}, /*then_end=*/true);

  RunResult run = RunAgainst(fake, {"drain", "--wait"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_THAT(run.out,
              HasSubstr("FAILED after 14.0s: FAILED_PRECONDITION (ENGINE_NOT_RUNNING): the "
                        "engine stopped\n"));

  run = RunAgainst(fake, {"--json", "operation", "watch", "op-8"});
  EXPECT_EQ(run.exit_code, 73);
  const google::protobuf::Struct error = ParseJsonObject(run.err);
  EXPECT_EQ(error.fields().at("reason").string_value(), "ENGINE_NOT_RUNNING");
}

TEST(RetryctlDrainTest, RefusedWithAReason) {
  FakeRetryd fake;
  fake.FailWith("StartDrain", GrpcErrorWithReason(grpc::StatusCode::FAILED_PRECONDITION,
                                                  "a drain runs already", "DRAIN_RUNNING"));
  const RunResult run = RunAgainst(fake, {"drain", "--wait"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "retryctl: FAILED_PRECONDITION (DRAIN_RUNNING): a drain runs already\n");
  EXPECT_FALSE(fake.last_call("WatchOperation").has_value());
}

TEST(RetryctlDrainTest, InterruptStopsFollowingAndSaysItGoesOn) {
  FakeRetryd fake;
  fake.set_response("StartDrain", Drain("op-9", v1::OPERATION_STATE_RUNNING));
  fake.set_operation_updates({Drain("op-9", v1::OPERATION_STATE_RUNNING)}, /*then_end=*/false);
  Interrupt interrupt;
  RunResult run{-1, "", ""};
  std::thread retryctl([&] { run = RunAgainst(fake, {"drain", "--wait"}, {}, false, &interrupt); });
  const bool written = fake.first_snapshot_written().WaitForNotificationWithTimeout(kWait);
  if (written) {
    EXPECT_TRUE(interrupt.Trigger());
  } else {
    fake.Shutdown();
  }
  retryctl.join();
  ASSERT_TRUE(written);
  EXPECT_EQ(run.exit_code, kExitInterrupted);
  EXPECT_EQ(run.err,
            "retryctl: stopped following operation op-9; it goes on ('retryctl operation cancel "
            "op-9' stops it)\n");
}

TEST(RetryctlOperationTest, ListGetAndCancel) {
  FakeRetryd fake;
  v1::ListOperationsResponse list;
  *list.add_operations() = Drain("op-1", v1::OPERATION_STATE_SUCCEEDED);
  fake.set_response("ListOperations", list);
  RunResult run = RunAgainst(fake, {"operations"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, StartsWith("ID    KIND   STATE"));
  EXPECT_THAT(run.out, HasSubstr("op-1  drain  SUCCEEDED"));
  run = RunAgainst(fake, {"--json", "operations"});
  EXPECT_THAT(run.out, HasSubstr("\"kind\": \"OPERATION_KIND_DRAIN\""));

  fake.set_response("GetOperation", Drain("op-1", v1::OPERATION_STATE_SUCCEEDED));
  run = RunAgainst(fake, {"operation", "op-1"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, StartsWith("id        op-1\n"));
  EXPECT_EQ(fake.last_request<v1::GetOperationRequest>("GetOperation").id(), "op-1");

  fake.set_response("CancelOperation", Drain("op-2", v1::OPERATION_STATE_CANCELLED));
  run = RunAgainst(fake, {"operation", "cancel", "op-2"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("state     CANCELLED\n"));
  EXPECT_EQ(fake.last_request<v1::CancelOperationRequest>("CancelOperation").id(), "op-2");

  fake.FailWith("GetOperation", GrpcErrorWithReason(grpc::StatusCode::NOT_FOUND,
                                                    "no operation op-x", "OPERATION_NOT_FOUND"));
  run = RunAgainst(fake, {"operation", "op-x"});
  EXPECT_EQ(run.exit_code, 69);
  EXPECT_EQ(run.err, "retryctl: NOT_FOUND (OPERATION_NOT_FOUND): no operation op-x\n");
}

}  // namespace
}  // namespace retryd::retryctl
