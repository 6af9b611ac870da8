// The example downstreams of client/examples/ (C++ and Python), as retryd
// sees them: each runs as a child process on a free loopback port and is
// called through a stub generated from processor.proto. Both must behave the
// same, as docs/processors.md describes them.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "retryd/v1/control.grpc.pb.h"
#include "retryd/v1/processor.grpc.pb.h"
#include "tests/support/missing_tool.h"
#include "tests/support/retryd_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::ExitedWith;
using ::retryd::testing::KeepLogsAndPrintTails;
using ::retryd::testing::RetrydProcess;
using ::retryd::testing::TempDir;
using ::retryd::testing::WaitFor;
using ::retryd::v1::ProcessRequest;
using ::retryd::v1::ProcessResponse;

constexpr char kPython[] = "/usr/bin/python3";

struct Example {
  std::string name;               // Its `processed-by` header; names its logs.
  std::string binary;             // What to run...
  std::vector<std::string> args;  // ...with these arguments.
};

// Keeps ctest's test names readable.
void PrintTo(const Example& example, std::ostream* out) { *out << example.name; }

// Each call takes 1 ms (--work_ms), as real work would.
Example CppExample() {
  return {"cpp-example", EXAMPLE_CPP_BINARY, {"--port", "0", "--work_ms", "1"}};
}

Example PythonExample() {
  return {"python-example",
          kPython,
          {EXAMPLE_PYTHON_SCRIPT, "--gen-dir", EXAMPLE_PYTHON_GEN_DIR, "--port", "0", "--work_ms",
           "1"}};
}

// The port of the "listening on host:port" line `process` prints at start
// (retryd's control API: "control API listening on ..."), or nullopt if it
// exits or says nothing of the kind in time.
std::optional<int> ListeningPort(RetrydProcess& process,
                                 const std::string& prefix = "listening on 127.0.0.1:") {
  std::optional<int> port;
  WaitFor(
      [&] {
        const std::string out = process.Stdout();
        const size_t at = out.find(prefix);
        if (at == std::string::npos) return !process.Running();
        const size_t start = at + prefix.size();
        const size_t end = out.find('\n', start);
        if (end == std::string::npos) return false;
        int parsed = 0;
        if (absl::SimpleAtoi(out.substr(start, end - start), &parsed)) port = parsed;
        return true;
      },
      absl::Seconds(30));
  return port;
}

class ExampleDownstreamTest : public ::testing::TestWithParam<Example> {
 protected:
  void SetUp() override {
    if (GetParam().binary == kPython) {
      // CI has it (scripts/setup.sh installs python3-grpcio).
      RetrydProcess check(dir_.Path("python-check"), {"-c", "import grpc, google.protobuf"},
                          kPython);
      if (!ExitedWith(check.WaitExit(absl::Seconds(30)), 0)) {
        RETRYD_MISSING_TOOL(std::string("the grpc module of ") + kPython,
                            "Debian packages python3-grpcio, python3-protobuf");
      }
    }
    std::vector<std::string> args = GetParam().args;
    for (const std::string& arg : ExtraArgs()) args.push_back(arg);
    process_ = std::make_unique<RetrydProcess>(dir_.Path(GetParam().name), args, GetParam().binary);
    const std::optional<int> port = ListeningPort(*process_);
    ASSERT_TRUE(port.has_value()) << GetParam().name << " printed no \"listening on\" line";
    port_ = *port;
    stub_ = v1::RecordProcessor::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    // Closes the connection: a server's graceful stop waits for its clients to
    // go (up to the examples' 5 s grace).
    stub_.reset();
    if (process_ != nullptr && process_->Running()) {
      // A graceful stop, as a service manager asks for one.
      process_->Signal(SIGTERM);
      EXPECT_TRUE(ExitedWith(process_->WaitExit(absl::Seconds(30)), 0))
          << GetParam().name << " after SIGTERM";
    }
    if (HasFailure()) KeepLogsAndPrintTails(dir_, 40);
  }

  // Flags after the example's own, for a fixture that tries them.
  virtual std::vector<std::string> ExtraArgs() const { return {}; }

  // One Process call, as retryd makes it. Unset `key` / `value`: null.
  grpc::Status Process(std::optional<std::string> key, std::optional<std::string> value,
                       int attempt, ProcessResponse& response) {
    ProcessRequest request;
    v1::KafkaRecord& record = *request.mutable_record();
    record.set_topic("orders");
    record.set_partition(2);
    record.set_offset(41);
    record.set_timestamp_ms(1700000000000);
    if (key.has_value()) record.set_key(*key);
    if (value.has_value()) record.set_value(*value);
    request.set_attempt(attempt);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->Process(&context, request, &response);
  }

  // Checks an OK answer's fields but the value.
  void ExpectProcessedBy(const ProcessResponse& response) {
    EXPECT_FALSE(response.null_value());
    EXPECT_FALSE(response.replace_headers());
    ASSERT_EQ(response.headers_size(), 1);
    EXPECT_EQ(response.headers(0).key(), "processed-by");
    EXPECT_EQ(response.headers(0).value(), GetParam().name);
  }

  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<RetrydProcess> process_;
  std::unique_ptr<v1::RecordProcessor::Stub> stub_;
};

TEST_P(ExampleDownstreamTest, UpperCasesTheValueAndAddsAHeader) {
  ProcessResponse response;
  const grpc::Status status = Process("ok-1", "order 1: two apples", 1, response);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response.value(), "ORDER 1: TWO APPLES");
  ExpectProcessedBy(response);
}

TEST_P(ExampleDownstreamTest, KeepsNullApartFromEmpty) {
  ProcessResponse null_key;
  grpc::Status status = Process(std::nullopt, "abc", 1, null_key);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(null_key.value(), "ABC");
  ExpectProcessedBy(null_key);

  // A null value is forwarded unchanged: no replacement value in the answer.
  ProcessResponse null_value;
  status = Process("ok-2", std::nullopt, 1, null_value);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_FALSE(null_value.has_value());
  ExpectProcessedBy(null_value);

  ProcessResponse empty_value;
  status = Process("ok-3", "", 1, empty_value);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  ASSERT_TRUE(empty_value.has_value());
  EXPECT_EQ(empty_value.value(), "");
}

// The ErrorInfo in `status`'s details (the grpc-status-details-bin
// trailer), as "<domain>/<reason>", or what is wrong with them.
std::string ReasonOf(const grpc::Status& status) {
  google::rpc::Status details;
  if (status.error_details().empty()) return "<no details>";
  if (!details.ParseFromString(status.error_details())) return "<details do not parse>";
  if (details.code() != static_cast<int>(status.error_code())) return "<details of another code>";
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return absl::StrCat(info.domain(), "/", info.reason());
  }
  return "<no ErrorInfo>";
}

TEST_P(ExampleDownstreamTest, RefusesBadKeysForGood) {
  // "perm-" too: the keys of retryd's --demo load that it means as poison.
  for (const std::string key : {"bad-7", "perm-3"}) {
    ProcessResponse response;
    const grpc::Status status = Process(key, "x", 1, response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << key;
    EXPECT_EQ(status.error_message(), "cannot process " + key);
    EXPECT_EQ(ReasonOf(status), "downstream.example.com/RECORD_REFUSED") << key;
  }
}

TEST_P(ExampleDownstreamTest, FailsFlakyKeysOnTheirFirstAttemptOnly) {
  ProcessResponse first;
  grpc::Status status = Process("flaky-5", "late", 1, first);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(status.error_message(), "try again");
  EXPECT_EQ(ReasonOf(status), "downstream.example.com/TRY_AGAIN");

  ProcessResponse second;
  status = Process("flaky-5", "late", 2, second);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(second.value(), "LATE");
  ExpectProcessedBy(second);
}

// What docs/processors.md's example run does: retryd, on its embedded broker with
// its demo load, delivers every record to the example, and the example's
// answers become outcomes (successes, retries of flaky-, dead letters of
// perm-), as GetStatus reports them.
TEST_P(ExampleDownstreamTest, RetrydDeliversItsDemoLoadThroughIt) {
  const std::string config = dir_.WriteFile("grpc-demo.textproto", absl::StrCat(R"(
    listen_address: "127.0.0.1:0"
    kafka {}
    group_id: "grpc-demo"
    input_topics: "orders"
    output_topic: "orders.done"
    dead_letter_topic: "orders.dlq"
    retry { topic: "orders.retry" threads: 1 backoff { initial_ms: 20 max_ms: 200 } }
    processor { grpc { target: "127.0.0.1:)",
                                                                                port_, R"("
                       max_concurrent_calls: 8 } })"));
  RetrydProcess retryd(dir_.Path("retryd"), {"--config", config, "--demo"});
  const std::optional<int> control = ListeningPort(retryd, "control API listening on 127.0.0.1:");
  ASSERT_TRUE(control.has_value()) << "retryd printed no control API address";
  auto client = v1::Control::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", *control),
                                                         grpc::InsecureChannelCredentials()));
  v1::GetStatusResponse status;
  const bool delivered = WaitFor(
      [&] {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        status.Clear();
        if (!client->GetStatus(&context, v1::GetStatusRequest(), &status).ok()) return false;
        const v1::Totals& t = status.totals();
        return t.succeeded() >= 500 && t.sent_to_retry() > 0 && t.dead_lettered() > 0;
      },
      absl::Seconds(90));
  EXPECT_TRUE(delivered) << status.totals().DebugString();
  EXPECT_EQ(status.downstream().state(), v1::DOWNSTREAM_STATE_UP);
  EXPECT_EQ(status.totals().unavailable(), 0) << status.DebugString();
  client.reset();
  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(absl::Seconds(60)), 0));
}

// The benchmark's rule (bench/peers/): flaky keys fail more than once, and
// poison keys are retriable, so they use every attempt before the DLQ.
class ExampleDownstreamRuleFlagsTest : public ExampleDownstreamTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--flaky_attempts", "2", "--perm_retriable"};
  }
};

TEST_P(ExampleDownstreamRuleFlagsTest, FailsFlakyKeysOnTheirFirstNAttempts) {
  for (const int attempt : {1, 2}) {
    ProcessResponse response;
    const grpc::Status status = Process("flaky-5", "late", attempt, response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << "attempt " << attempt;
    EXPECT_EQ(status.error_message(), "try again");
  }
  ProcessResponse third;
  const grpc::Status status = Process("flaky-5", "late", 3, third);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(third.value(), "LATE");
  ExpectProcessedBy(third);
}

TEST_P(ExampleDownstreamRuleFlagsTest, FailsPoisonKeysRetriablyOnEveryAttempt) {
  for (const std::string key : {"bad-7", "perm-3"}) {
    for (const int attempt : {1, 2, 10}) {
      ProcessResponse response;
      const grpc::Status status = Process(key, "x", attempt, response);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << key << " attempt " << attempt;
      EXPECT_EQ(status.error_message(), "cannot process " + key);
    }
  }
  // Other keys are as without the flags.
  ProcessResponse response;
  const grpc::Status status = Process("ok-1", "abc", 1, response);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(response.value(), "ABC");
}

std::string ExampleName(const ::testing::TestParamInfo<Example>& info) {
  return info.param.binary == kPython ? "Python" : "Cpp";
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleDownstreamTest,
                         ::testing::Values(CppExample(), PythonExample()), ExampleName);
INSTANTIATE_TEST_SUITE_P(Examples, ExampleDownstreamRuleFlagsTest,
                         ::testing::Values(CppExample(), PythonExample()), ExampleName);

}  // namespace
}  // namespace retryd
