// The grpc processor against a real downstream (tests/support/
// downstream_server.h): what each answer becomes, what each call carries,
// deadlines, cancellation, concurrency, tokens and load balancing.
#include "server/processors/grpc_processor.h"

#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/processors/grpc_outcome.h"
#include "tests/support/downstream_server.h"
#include "tests/support/missing_tool.h"
#include "tests/support/slow_link.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::DownstreamServer;
using ::retryd::testing::TempDir;
using ::retryd::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Kind = engine::Outcome::Kind;

constexpr absl::Duration kTimeout = absl::Seconds(20);
// Long enough that a call with it ends only by a cancel or a deadline.
constexpr absl::Duration kForever = absl::Seconds(600);

Record Keyed(std::string key, int64_t offset = 7) {
  Record record;
  record.topic = "orders";
  record.partition = 2;
  record.offset = offset;
  record.timestamp_ms = 1'700'000'000'000;
  record.key = std::move(key);
  record.value = "v";
  return record;
}

Header H(std::string key, std::optional<std::string> value) {
  return Header{std::move(key), std::move(value)};
}

// The outcome of one Start(), and how many times `done` ran.
struct Result {
  absl::Notification done;
  engine::Outcome outcome;
  std::atomic<int> runs{0};
};

void StartInto(engine::Processor& processor, const Record& record, Result& result,
               std::shared_ptr<engine::Cancellation> cancel = nullptr,
               engine::AttemptInfo info = {}) {
  processor.Start(record, info, std::move(cancel), [&result](engine::Outcome outcome) {
    if (result.runs.fetch_add(1) == 0) {
      result.outcome = std::move(outcome);
      result.done.Notify();
    }
  });
}

class GrpcProcessorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start().ok()); }

  // A processor calling server_, with `config`'s other fields.
  std::unique_ptr<GrpcProcessor> Make(v1::GrpcProcessorConfig config = {}) {
    if (config.target().empty()) config.set_target(server_.target());
    absl::StatusOr<std::unique_ptr<GrpcProcessor>> processor = GrpcProcessor::Create(config);
    EXPECT_TRUE(processor.ok()) << processor.status();
    return processor.ok() ? *std::move(processor) : nullptr;
  }

  DownstreamServer server_;
};

struct Expected {
  grpc::StatusCode code;
  const char* name;
  Kind kind;
  std::optional<Kind> fallback;  // Set: kUnavailable with this fallback.
};

// processor.proto's table, written out again.
const Expected kDefaultTable[] = {
    {grpc::StatusCode::CANCELLED, "CANCELLED", Kind::kUnavailable, Kind::kRetriable},
    {grpc::StatusCode::UNKNOWN, "UNKNOWN", Kind::kRetriable, {}},
    {grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT", Kind::kPermanent, {}},
    {grpc::StatusCode::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", Kind::kRetriable, {}},
    {grpc::StatusCode::NOT_FOUND, "NOT_FOUND", Kind::kPermanent, {}},
    {grpc::StatusCode::ALREADY_EXISTS, "ALREADY_EXISTS", Kind::kOk, {}},
    {grpc::StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED", Kind::kUnavailable,
     Kind::kPermanent},
    {grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED", Kind::kRetriable, {}},
    {grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION", Kind::kPermanent, {}},
    {grpc::StatusCode::ABORTED, "ABORTED", Kind::kRetriable, {}},
    {grpc::StatusCode::OUT_OF_RANGE, "OUT_OF_RANGE", Kind::kPermanent, {}},
    {grpc::StatusCode::UNIMPLEMENTED, "UNIMPLEMENTED", Kind::kUnavailable, Kind::kPermanent},
    {grpc::StatusCode::INTERNAL, "INTERNAL", Kind::kRetriable, {}},
    {grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE", Kind::kUnavailable, Kind::kRetriable},
    {grpc::StatusCode::DATA_LOSS, "DATA_LOSS", Kind::kPermanent, {}},
    {grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED", Kind::kUnavailable, Kind::kPermanent},
};

TEST_F(GrpcProcessorTest, EveryStatusMapsAsDocumented) {
  for (const Expected& e : kDefaultTable) {
    DownstreamServer::Answer answer;
    answer.code = e.code;
    answer.message = absl::StrCat("downstream says ", e.name);
    server_.SetAnswer(absl::StrCat(e.name, "/"), std::move(answer));
  }
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);
  for (const Expected& e : kDefaultTable) {
    SCOPED_TRACE(e.name);
    const engine::Outcome outcome = processor->Process(Keyed(absl::StrCat(e.name, "/1")), 1);
    EXPECT_EQ(outcome.kind, e.kind);
    if (e.kind == Kind::kOk) {
      EXPECT_FALSE(outcome.value.has_value());
      EXPECT_FALSE(outcome.headers.has_value());
      continue;
    }
    EXPECT_EQ(outcome.reason, absl::StrCat(e.name, ": downstream says ", e.name));
    if (e.fallback.has_value()) {
      EXPECT_EQ(outcome.fallback, *e.fallback);
    }
  }
  const engine::Outcome ok = processor->Process(Keyed("anything"), 1);
  EXPECT_EQ(ok.kind, Kind::kOk);
  EXPECT_EQ(ok.reason, "");
  EXPECT_FALSE(ok.value.has_value());
  EXPECT_FALSE(ok.headers.has_value());
}

// A google.rpc.Status with `code` and `message`, its details an ErrorInfo
// of `domain` and `reason` after a detail of another type, serialized as a
// downstream sends it in grpc-status-details-bin.
std::string StatusDetails(grpc::StatusCode code, const std::string& message,
                          const std::string& domain, const std::string& reason) {
  google::rpc::Status status;
  status.set_code(static_cast<int>(code));
  status.set_message(message);
  google::rpc::RetryInfo retry;
  retry.mutable_retry_delay()->set_seconds(5);
  status.add_details()->PackFrom(retry);
  google::rpc::ErrorInfo info;
  info.set_domain(domain);
  info.set_reason(reason);
  (*info.mutable_metadata())["limit"] = "100";
  status.add_details()->PackFrom(info);
  return status.SerializeAsString();
}

TEST_F(GrpcProcessorTest, AnErrorInfoInTheStatusDetailsIsTheErrorReason) {
  const struct {
    const char* key;
    grpc::StatusCode code;
    Kind kind;
  } cases[] = {
      {"quota/1", grpc::StatusCode::RESOURCE_EXHAUSTED, Kind::kRetriable},
      {"invalid/1", grpc::StatusCode::INVALID_ARGUMENT, Kind::kPermanent},
      {"unavailable/1", grpc::StatusCode::UNAVAILABLE, Kind::kUnavailable},
  };
  for (const auto& c : cases) {
    DownstreamServer::Answer answer;
    answer.code = c.code;
    answer.message = "no";
    answer.details = StatusDetails(c.code, "no", "billing.example.com", "QUOTA_EXCEEDED");
    server_.SetAnswer(c.key, std::move(answer));
  }
  DownstreamServer::Answer plain;
  plain.code = grpc::StatusCode::INVALID_ARGUMENT;
  plain.message = "no details";
  server_.SetAnswer("plain/", std::move(plain));
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    const engine::Outcome outcome = processor->Process(Keyed(c.key), 1);
    EXPECT_EQ(outcome.kind, c.kind);
    EXPECT_EQ(outcome.reason, absl::StrCat(StatusCodeName(c.code), ": no"));
    EXPECT_EQ(outcome.error_reason, "billing.example.com/QUOTA_EXCEEDED");
  }
  const engine::Outcome plain_outcome = processor->Process(Keyed("plain/1"), 1);
  EXPECT_EQ(plain_outcome.kind, Kind::kPermanent);
  EXPECT_EQ(plain_outcome.error_reason, "");
}

TEST(ErrorReasonOfTest, ReadsTheFirstErrorInfoAndIgnoresWhatIsNotOne) {
  EXPECT_EQ(ErrorReasonOf(StatusDetails(grpc::StatusCode::INTERNAL, "m", "d.example.com", "R")),
            "d.example.com/R");
  EXPECT_EQ(ErrorReasonOf(StatusDetails(grpc::StatusCode::INTERNAL, "m", "", "R")), "R");
  EXPECT_EQ(ErrorReasonOf(StatusDetails(grpc::StatusCode::INTERNAL, "m", "d", "")), "");
  EXPECT_EQ(ErrorReasonOf(""), "");
  EXPECT_EQ(ErrorReasonOf("\xff\xff not a status"), "");
  google::rpc::Status no_info;
  no_info.set_code(13);
  EXPECT_EQ(ErrorReasonOf(no_info.SerializeAsString()), "");
}

TEST_F(GrpcProcessorTest, StatusMapOverridesTheTable) {
  for (grpc::StatusCode code :
       {grpc::StatusCode::NOT_FOUND, grpc::StatusCode::ABORTED, grpc::StatusCode::UNAVAILABLE,
        grpc::StatusCode::PERMISSION_DENIED, grpc::StatusCode::INTERNAL}) {
    DownstreamServer::Answer answer;
    answer.code = code;
    server_.SetAnswer(absl::StrCat("c", static_cast<int>(code), "/"), std::move(answer));
  }
  v1::GrpcProcessorConfig config;
  (*config.mutable_status_map())["NOT_FOUND"] = v1::STATUS_OUTCOME_RETRIABLE;
  (*config.mutable_status_map())["ABORTED"] = v1::STATUS_OUTCOME_DEAD_LETTER;
  (*config.mutable_status_map())["UNAVAILABLE"] = v1::STATUS_OUTCOME_SUCCESS;
  (*config.mutable_status_map())["PERMISSION_DENIED"] = v1::STATUS_OUTCOME_RETRIABLE;
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  ASSERT_NE(processor, nullptr);

  EXPECT_EQ(processor->Process(Keyed("c5/x"), 1).kind, Kind::kRetriable);
  const engine::Outcome aborted = processor->Process(Keyed("c10/x"), 1);
  EXPECT_EQ(aborted.kind, Kind::kPermanent);
  EXPECT_EQ(aborted.reason, "ABORTED");
  EXPECT_EQ(processor->Process(Keyed("c14/x"), 1).kind, Kind::kOk);
  const engine::Outcome denied = processor->Process(Keyed("c7/x"), 1);
  EXPECT_EQ(denied.kind, Kind::kUnavailable);
  EXPECT_EQ(denied.fallback, Kind::kRetriable);
  // Not overridden: as by default.
  EXPECT_EQ(processor->Process(Keyed("c13/x"), 1).kind, Kind::kRetriable);
}

TEST_F(GrpcProcessorTest, PassingTheDeadlineIsRetriable) {
  server_.SetAnswer("slow", DownstreamServer::Answer::Delayed(kForever));
  v1::GrpcProcessorConfig config;
  config.set_deadline_ms(200);
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  ASSERT_NE(processor, nullptr);
  const engine::Outcome outcome = processor->Process(Keyed("slow"), 1);
  EXPECT_EQ(outcome.kind, Kind::kRetriable);
  EXPECT_THAT(outcome.reason, StartsWith("DEADLINE_EXCEEDED"));
  // The downstream learns that nobody waits for the answer any more.
  EXPECT_TRUE(server_.WaitForCancelled(1, kTimeout));
}

TEST_F(GrpcProcessorTest, RequestCarriesTheRecordAndItsHistory) {
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);
  Record first = Keyed("");  // An empty key, not a null one.
  first.value = std::nullopt;
  first.headers = {H("trace", "abc"), H("empty", ""), H("null", std::nullopt), H("trace", "x")};
  Result result;
  StartInto(*processor, first, result, nullptr, engine::AttemptInfo{3, 1'699'999'999'000});
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(kTimeout));
  Record second = Keyed("k", 8);
  second.key = std::nullopt;
  second.value = "";
  second.timestamp_ms = -1;
  ASSERT_EQ(processor->Process(second, 1).kind, Kind::kOk);

  const std::vector<DownstreamServer::Call> calls = server_.calls();
  ASSERT_EQ(calls.size(), 2u);
  const v1::ProcessRequest& a = calls[0].request;
  EXPECT_EQ(a.record().topic(), "orders");
  EXPECT_EQ(a.record().partition(), 2);
  EXPECT_EQ(a.record().offset(), 7);
  EXPECT_EQ(a.record().timestamp_ms(), 1'700'000'000'000);
  EXPECT_TRUE(a.record().has_key());
  EXPECT_EQ(a.record().key(), "");
  EXPECT_FALSE(a.record().has_value());
  ASSERT_EQ(a.record().headers_size(), 4);
  EXPECT_EQ(a.record().headers(0).key(), "trace");
  EXPECT_EQ(a.record().headers(0).value(), "abc");
  EXPECT_EQ(a.record().headers(1).key(), "empty");
  EXPECT_TRUE(a.record().headers(1).has_value());
  EXPECT_EQ(a.record().headers(1).value(), "");
  EXPECT_EQ(a.record().headers(2).key(), "null");
  EXPECT_FALSE(a.record().headers(2).has_value());
  EXPECT_EQ(a.record().headers(3).value(), "x");
  EXPECT_EQ(a.attempt(), 3);
  EXPECT_EQ(a.first_failure_ms(), 1'699'999'999'000);

  const v1::ProcessRequest& b = calls[1].request;
  EXPECT_EQ(b.record().offset(), 8);
  EXPECT_EQ(b.record().timestamp_ms(), -1);
  EXPECT_FALSE(b.record().has_key());
  EXPECT_TRUE(b.record().has_value());
  EXPECT_EQ(b.record().value(), "");
  EXPECT_EQ(b.attempt(), 1);
  EXPECT_EQ(b.first_failure_ms(), 0);
  EXPECT_EQ(calls[1].authorization, "");  // No token configured.
}

TEST_F(GrpcProcessorTest, AnOkAnswerCarriesTheReplacement) {
  DownstreamServer::Answer value;
  value.response.set_value("new value");
  value.response.add_headers()->set_key("added-null");
  auto* added = value.response.add_headers();
  added->set_key("added");
  added->set_value("1");
  server_.SetAnswer("value", value);
  DownstreamServer::Answer tombstone;
  tombstone.response.set_null_value(true);
  tombstone.response.set_replace_headers(true);
  auto* only = tombstone.response.add_headers();
  only->set_key("only");
  only->set_value("");
  server_.SetAnswer("tombstone", tombstone);
  DownstreamServer::Answer no_headers;
  no_headers.response.set_replace_headers(true);
  server_.SetAnswer("no-headers", no_headers);
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);

  Record record = Keyed("value");
  record.headers = {H("in", "x")};
  const engine::Outcome replaced = processor->Process(record, 1);
  ASSERT_EQ(replaced.kind, Kind::kOk);
  ASSERT_TRUE(replaced.value.has_value());
  EXPECT_EQ(*replaced.value, std::optional<std::string>("new value"));
  ASSERT_TRUE(replaced.headers.has_value());
  EXPECT_THAT(*replaced.headers,
              ElementsAre(H("in", "x"), H("added-null", std::nullopt), H("added", "1")));

  record.key = "tombstone";
  const engine::Outcome tomb = processor->Process(record, 1);
  ASSERT_EQ(tomb.kind, Kind::kOk);
  ASSERT_TRUE(tomb.value.has_value());
  EXPECT_EQ(*tomb.value, std::nullopt);
  ASSERT_TRUE(tomb.headers.has_value());
  EXPECT_THAT(*tomb.headers, ElementsAre(H("only", "")));

  record.key = "no-headers";
  const engine::Outcome stripped = processor->Process(record, 1);
  ASSERT_EQ(stripped.kind, Kind::kOk);
  EXPECT_FALSE(stripped.value.has_value());
  ASSERT_TRUE(stripped.headers.has_value());
  EXPECT_TRUE(stripped.headers->empty());
}

TEST_F(GrpcProcessorTest, AnAnswerAboveMaxResponseBytesIsRetriable) {
  DownstreamServer::Answer huge;
  huge.response.set_value(std::string(4096, 'x'));
  server_.SetAnswer("huge", huge);
  DownstreamServer::Answer fits;
  fits.response.set_value(std::string(900, 'x'));
  server_.SetAnswer("fits", fits);
  v1::GrpcProcessorConfig config;
  config.set_max_response_bytes(1024);
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  ASSERT_NE(processor, nullptr);
  const engine::Outcome outcome = processor->Process(Keyed("huge"), 1);
  EXPECT_EQ(outcome.kind, Kind::kRetriable);
  EXPECT_THAT(outcome.reason, StartsWith("RESOURCE_EXHAUSTED"));
  EXPECT_EQ(processor->Process(Keyed("fits"), 1).kind, Kind::kOk);
}

TEST_F(GrpcProcessorTest, AMalformedAnswerIsRetriable) {
  DownstreamServer::Answer both;
  both.response.set_value("v");
  both.response.set_null_value(true);
  server_.SetAnswer("", both);
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);
  const engine::Outcome outcome = processor->Process(Keyed("k"), 1);
  EXPECT_EQ(outcome.kind, Kind::kRetriable);
  EXPECT_THAT(outcome.reason, HasSubstr("both value and null_value"));
}

TEST_F(GrpcProcessorTest, AnAnswerThatDoesNotParseIsRetriable) {
  // A proto3 string must be UTF-8: the server sends these bytes, and a
  // reader of processor.proto rejects them.
  DownstreamServer::Answer wrong;
  wrong.response.set_value("partly read");
  wrong.response.add_headers()->set_key("\xff\xfe");
  server_.SetAnswer("", wrong);
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);
  const engine::Outcome outcome = processor->Process(Keyed("k"), 1);
  EXPECT_EQ(outcome.kind, Kind::kRetriable);
  EXPECT_THAT(outcome.reason, HasSubstr("not a ProcessResponse"));
  EXPECT_FALSE(outcome.value.has_value());
}

TEST_F(GrpcProcessorTest, TokenFileIsSentAndARewrittenOneIsPickedUp) {
  const TempDir dir;
  const std::string path = dir.WriteFile("token", "  secret-1\n");
  v1::GrpcProcessorConfig config;
  config.set_token_file(path);
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  ASSERT_NE(processor, nullptr);
  ASSERT_EQ(processor->Process(Keyed("k"), 1).kind, Kind::kOk);
  EXPECT_EQ(server_.calls().back().authorization, "Bearer secret-1");

  // Written beside and renamed over it, as secret managers rotate files.
  const std::string next = dir.WriteFile("token.next", "secret-2\n");
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
  EXPECT_TRUE(WaitFor(
      [&] {
        return processor->Process(Keyed("k"), 1).kind == Kind::kOk &&
               server_.calls().back().authorization == "Bearer secret-2";
      },
      kTimeout));

  // An unusable file keeps the last good token.
  dir.WriteFile("token", "   \n");
  const size_t seen = server_.calls().size();
  EXPECT_FALSE(WaitFor(
      [&] {
        processor->Process(Keyed("k"), 1);
        return server_.calls().back().authorization != "Bearer secret-2";
      },
      absl::Seconds(2)));
  EXPECT_GT(server_.calls().size(), seen);
}

TEST_F(GrpcProcessorTest, TokenEnvIsSent) {
  ASSERT_EQ(setenv("RETRYD_TEST_PROCESSOR_TOKEN", "from-env", 1), 0);
  v1::GrpcProcessorConfig config;
  config.set_token_env("RETRYD_TEST_PROCESSOR_TOKEN");
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  unsetenv("RETRYD_TEST_PROCESSOR_TOKEN");
  ASSERT_NE(processor, nullptr);
  ASSERT_EQ(processor->Process(Keyed("k"), 1).kind, Kind::kOk);
  EXPECT_EQ(server_.calls().back().authorization, "Bearer from-env");
}

TEST_F(GrpcProcessorTest, CallsStartedTogetherOverlapAtTheDownstream) {
  constexpr int kCalls = 8;
  server_.SetAnswer("", DownstreamServer::Answer::Delayed(kForever));
  v1::GrpcProcessorConfig config;
  config.set_max_concurrent_calls(kCalls);
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  ASSERT_NE(processor, nullptr);
  EXPECT_EQ(processor->max_concurrent_calls(), kCalls);
  EXPECT_TRUE(processor->asynchronous());
  std::vector<Result> results(kCalls);
  std::vector<std::shared_ptr<engine::Cancellation>> cancels;
  for (int i = 0; i < kCalls; ++i) {
    cancels.push_back(std::make_shared<engine::Cancellation>());
    StartInto(*processor, Keyed(absl::StrCat("k", i), i), results[i], cancels.back());
  }
  EXPECT_TRUE(server_.WaitForCalls(kCalls, kTimeout));
  EXPECT_EQ(server_.peak_in_progress(), kCalls);
  for (auto& cancel : cancels) cancel->Cancel();
  for (Result& result : results) EXPECT_TRUE(result.done.WaitForNotificationWithTimeout(kTimeout));
}

TEST_F(GrpcProcessorTest, CancellingEndsTheCallAndDoneRunsOnce) {
  server_.SetAnswer("", DownstreamServer::Answer::Delayed(kForever));
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);
  auto cancel = std::make_shared<engine::Cancellation>();
  Result result;
  StartInto(*processor, Keyed("k"), result, cancel);
  ASSERT_TRUE(server_.WaitForCalls(1, kTimeout));
  cancel->Cancel();
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_TRUE(server_.WaitForCancelled(1, kTimeout));

  // Cancelled before it starts: it never reaches the downstream.
  auto early = std::make_shared<engine::Cancellation>();
  early->Cancel();
  Result never_sent;
  StartInto(*processor, Keyed("k"), never_sent, early);
  ASSERT_TRUE(never_sent.done.WaitForNotificationWithTimeout(kTimeout));

  // Destroying the processor waits for every call to end: no late `done`.
  processor.reset();
  EXPECT_EQ(result.runs.load(), 1);
  EXPECT_EQ(never_sent.runs.load(), 1);
  EXPECT_EQ(server_.calls().size(), 1u);
}

TEST_F(GrpcProcessorTest, CallsAreSpreadRoundRobinOverTheTargetsAddresses) {
  DownstreamServer other;
  ASSERT_TRUE(other.Start().ok());
  v1::GrpcProcessorConfig config;
  config.set_target(absl::StrCat("ipv4:127.0.0.1:", server_.port(), ",127.0.0.1:", other.port()));
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  ASSERT_NE(processor, nullptr);
  EXPECT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < 10; ++i) processor->Process(Keyed("k"), 1);
        return !server_.calls().empty() && !other.calls().empty();
      },
      kTimeout))
      << server_.calls().size() << " and " << other.calls().size() << " calls";
}

TEST_F(GrpcProcessorTest, ADownServerIsUnavailableUntilItIsBack) {
  std::unique_ptr<GrpcProcessor> processor = Make();
  ASSERT_NE(processor, nullptr);
  server_.Stop();
  const engine::Outcome down = processor->Process(Keyed("k"), 1);
  EXPECT_EQ(down.kind, Kind::kUnavailable);
  EXPECT_EQ(down.fallback, Kind::kRetriable);
  EXPECT_THAT(down.reason, StartsWith("UNAVAILABLE"));

  ASSERT_TRUE(server_.Start().ok());
  EXPECT_TRUE(
      WaitFor([&] { return processor->Process(Keyed("k"), 1).kind == Kind::kOk; }, kTimeout));
}

// A downstream whose connection takes longer to set up than gRPC's reconnect
// backoff (far away, busy, a slow TLS handshake) is still reached by the
// first call: the connection attempt gets gRPC's own connect timeout, not the
// backoff, so the call waits for it rather than failing UNAVAILABLE.
TEST_F(GrpcProcessorTest, ASlowToConnectDownstreamIsReachedByTheFirstCall) {
  testing::SlowLink link(server_.port(), absl::Milliseconds(700));
  ASSERT_NE(link.port(), 0);
  v1::GrpcProcessorConfig config;
  config.set_target(link.target());
  std::unique_ptr<GrpcProcessor> processor = Make(config);
  ASSERT_NE(processor, nullptr);
  const engine::Outcome outcome = processor->Process(Keyed("k"), 1);
  EXPECT_EQ(outcome.kind, Kind::kOk) << outcome.reason;
  EXPECT_EQ(link.connections(), 1);
  EXPECT_EQ(server_.calls().size(), 1u);
}

// A self-signed certificate for `name` (its only subject name), made with
// openssl; nullopt if openssl is missing.
struct CertFiles {
  std::string cert;
  std::string key;
};
std::optional<CertFiles> MakeCert(const TempDir& dir, const std::string& name) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) return std::nullopt;
  CertFiles files{dir.Path(name + ".crt"), dir.Path(name + ".key")};
  const std::string log = dir.Path(name + ".log");
  const std::string command =
      absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=", name,
                   " -addext subjectAltName=DNS:", name, " -keyout ", files.key, " -out ",
                   files.cert, " > ", log, " 2>&1");
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << command << ": " << ::retryd::testing::ReadFileOrEmpty(log);
  }
  return files;
}

TEST(GrpcProcessorTlsTest, VerifiesTheServerAsServerNameAndPresentsTheClientCert) {
  const TempDir dir;
  const std::optional<CertFiles> server_cert = MakeCert(dir, "downstream.test");
  const std::optional<CertFiles> client_cert = MakeCert(dir, "retryd.test");
  if (!server_cert.has_value() || !client_cert.has_value()) {
    RETRYD_MISSING_TOOL("openssl", "Debian package openssl");
  }
  DownstreamServer server;
  server.UseTls({::retryd::testing::ReadFileOrEmpty(server_cert->cert),
                 ::retryd::testing::ReadFileOrEmpty(server_cert->key),
                 ::retryd::testing::ReadFileOrEmpty(client_cert->cert)});
  ASSERT_TRUE(server.Start().ok());

  v1::GrpcProcessorConfig config;
  config.set_target(server.target());
  config.mutable_tls()->set_ca_file(server_cert->cert);
  config.mutable_tls()->set_server_name("downstream.test");
  config.mutable_tls()->set_cert_file(client_cert->cert);
  config.mutable_tls()->set_key_file(client_cert->key);
  absl::StatusOr<std::unique_ptr<GrpcProcessor>> processor = GrpcProcessor::Create(config);
  ASSERT_TRUE(processor.ok()) << processor.status();
  EXPECT_EQ((*processor)->Process(Keyed("k"), 1).kind, Kind::kOk);

  // The certificate does not name 127.0.0.1.
  v1::GrpcProcessorConfig no_name = config;
  no_name.mutable_tls()->clear_server_name();
  processor = GrpcProcessor::Create(no_name);
  ASSERT_TRUE(processor.ok()) << processor.status();
  EXPECT_EQ((*processor)->Process(Keyed("k"), 1).kind, Kind::kUnavailable);

  // The server wants a client certificate.
  v1::GrpcProcessorConfig no_client_cert = config;
  no_client_cert.mutable_tls()->clear_cert_file();
  no_client_cert.mutable_tls()->clear_key_file();
  processor = GrpcProcessor::Create(no_client_cert);
  ASSERT_TRUE(processor.ok()) << processor.status();
  EXPECT_EQ((*processor)->Process(Keyed("k"), 1).kind, Kind::kUnavailable);

  EXPECT_EQ(server.calls().size(), 1u);
}

TEST(GrpcProcessorCreateTest, BadFilesAndSettingsAreClearErrors) {
  const TempDir dir;
  v1::GrpcProcessorConfig config;
  config.set_target("127.0.0.1:1");
  config.set_token_file(dir.Path("missing-token"));
  absl::StatusOr<std::unique_ptr<GrpcProcessor>> processor = GrpcProcessor::Create(config);
  ASSERT_FALSE(processor.ok());
  EXPECT_EQ(processor.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(processor.status().message(), HasSubstr("grpc.token_file: "));
  EXPECT_THAT(processor.status().message(), HasSubstr("missing-token"));

  config.set_token_file(dir.WriteFile("empty-token", "\n"));
  processor = GrpcProcessor::Create(config);
  ASSERT_FALSE(processor.ok());
  EXPECT_THAT(processor.status().message(), HasSubstr("holds no token"));

  config.clear_token_file();
  config.set_token_env("RETRYD_TEST_UNSET_VARIABLE");
  processor = GrpcProcessor::Create(config);
  ASSERT_FALSE(processor.ok());
  EXPECT_THAT(processor.status().message(),
              HasSubstr("grpc.token_env: environment variable \"RETRYD_TEST_UNSET_VARIABLE\" "
                        "is not set"));

  config.clear_token_env();
  config.mutable_tls()->set_ca_file(dir.Path("missing-ca.pem"));
  processor = GrpcProcessor::Create(config);
  ASSERT_FALSE(processor.ok());
  EXPECT_THAT(processor.status().message(), HasSubstr("grpc.tls.ca_file: "));

  config.clear_tls();
  (*config.mutable_status_map())["OK"] = v1::STATUS_OUTCOME_RETRIABLE;
  processor = GrpcProcessor::Create(config);
  ASSERT_FALSE(processor.ok());
  EXPECT_EQ(processor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(processor.status().message(), HasSubstr("status_map[\"OK\"]"));
}

}  // namespace
}  // namespace retryd
