// retryctl's dead-letter tools (dlq ls, dlq record, dlq redrive, dlq purge)
// and the `op` spellings of the operation commands: the requests they send
// and what they print (their command lines: retryctl_dlq_args_test.cc).
// Calls run against a fake retryd on loopback.
#include <string>
#include <vector>

#include "client/retryctl.h"
#include "client/retryctl_args.h"
#include "client/retryctl_format.h"
#include "client/tests/fake_retryd.h"
#include "client/tests/run_retryctl.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {
namespace {

using ::retryd::testing::FakeRetryd;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::SizeIs;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// 2026-12-01T08:00:00Z.
constexpr int64_t kDecemberFirstMs = 1'796'112'000'000;

v1::DeadLetter Letter(int32_t partition, int64_t offset, const std::string& key) {
  v1::DeadLetter letter;
  letter.set_partition(partition);
  letter.set_offset(offset);
  letter.set_key(key);
  letter.set_original_topic("orders");
  letter.set_original_partition(3);
  letter.set_original_offset(1000 + offset);
  letter.set_attempts(5);
  letter.set_error("DEADLINE_EXCEEDED: Deadline Exceeded");
  letter.set_error_reason("shop.example/ORDER_LOCKED");
  letter.set_dead_lettered_unix_ms(1'000'000);
  return letter;
}

// Pages of two records each, `count` of them, chained by tokens t1, t2, ...
std::vector<v1::ListDeadLettersResponse> Pages(int count) {
  std::vector<v1::ListDeadLettersResponse> pages;
  for (int i = 0; i < count; ++i) {
    v1::ListDeadLettersResponse page;
    page.set_topic("orders.dlq");
    page.set_scanned(10);
    *page.add_records() = Letter(0, 2 * i, absl::StrCat("k", 2 * i));
    *page.add_records() = Letter(0, 2 * i + 1, absl::StrCat("k", 2 * i + 1));
    if (i + 1 < count) page.set_next_page_token(absl::StrCat("t", i + 1));
    pages.push_back(page);
  }
  return pages;
}

v1::Operation Redrive(const std::string& id, v1::OperationState state) {
  return MakeOperation(id, v1::OPERATION_KIND_REDRIVE, state);
}

v1::RedriveProgress Progress(int64_t scanned, int64_t matched, int64_t redriven) {
  v1::RedriveProgress progress;
  progress.set_scanned(scanned);
  progress.set_total(5000);
  progress.set_matched(matched);
  progress.set_redriven(redriven);
  progress.set_skipped(2);
  progress.set_rate_per_s(98.5);
  progress.set_eta_ms(40'000);
  return progress;
}

// ---- dlq ls ------------------------------------------------------------------------

TEST(RetryctlDlqFormatTest, Table) {
  v1::DeadLetter binary = Letter(1, 7, std::string("\x01\xff", 2));
  binary.set_error_reason("");
  v1::DeadLetter foreign;
  foreign.set_partition(2);
  foreign.set_offset(9);
  foreign.set_key_null(true);
  foreign.set_decode_error("no retryd-original-topic header");
  const std::vector<std::string> lines =
      Lines(FormatDeadLetters({Letter(0, 12, "k1"), binary, foreign}, 1'060'000, 0));
  ASSERT_THAT(lines, SizeIs(4));
  EXPECT_EQ(lines[0],
            "PARTITION@OFFSET  KEY     ATTEMPTS  DEAD-LETTERED  REASON                     "
            "ORIGIN         ERROR");
  EXPECT_EQ(lines[1],
            "0@12              k1      5         1m00s ago      shop.example/ORDER_LOCKED  "
            "orders/3@1012  DEADLINE_EXCEEDED: Deadline Exceeded");
  EXPECT_THAT(lines[2], StartsWith("1@7               0x01ff  5         1m00s ago      -  "));
  EXPECT_THAT(lines[3], StartsWith("2@9               <null>  -         -              -  "));
  EXPECT_THAT(lines[3], EndsWith("-              not written by retryd: no retryd-original-"
                                 "topic header"));
  EXPECT_EQ(FormatDeadLetters({}, 0, 0), "");
}

TEST(RetryctlDlqFormatTest, AnotherToolsDeadLetterShowsNoAttempts) {
  v1::DeadLetter spring = Letter(0, 4, "k4");
  spring.set_dialect("spring");
  spring.set_attempts(0);  // Spring does not say.
  spring.set_error_reason("");
  const std::vector<std::string> lines = Lines(FormatDeadLetters({spring}, 1'060'000, 0));
  ASSERT_THAT(lines, SizeIs(2));
  EXPECT_THAT(lines[1], StartsWith("0@4               k4   -         1m00s ago      -       "
                                   "orders/3@1004"));
}

TEST(RetryctlDlqFormatTest, ErrorIsCutToTheTerminalsWidth) {
  v1::DeadLetter letter = Letter(0, 1, "k");
  letter.set_error(std::string(200, 'e'));
  const std::vector<std::string> wide = Lines(FormatDeadLetters({letter}, 1'000'000, 140));
  ASSERT_THAT(wide, SizeIs(2));
  EXPECT_EQ(wide[1].size(), 140u);
  EXPECT_THAT(wide[1], EndsWith("eee..."));
  // Unknown width: 60 characters; a narrow terminal: at least 16.
  EXPECT_THAT(Lines(FormatDeadLetters({letter}, 1'000'000, 0))[1],
              EndsWith("  " + std::string(57, 'e') + "..."));
  EXPECT_THAT(Lines(FormatDeadLetters({letter}, 1'000'000, 20))[1],
              EndsWith("  " + std::string(13, 'e') + "..."));
}

// `dlq ls` with every filter flag set; ExpectEveryFilterFlagMapped checks
// what a request made of them carries.
std::vector<std::string> DlqListWithEveryFilterFlag() {
  return {"dlq",
          "ls",
          "--reason",
          "ORDER_LOCKED",
          "--key-prefix",
          "k",
          "--topic",
          "orders",
          "--original-partition",
          "0",
          "--error",
          "Deadline",
          "--since",
          "2026-12-01T08:00:00Z",
          "--until",
          "1796198400000",
          "--min-attempts",
          "1",
          "--max-attempts",
          "9",
          "--partition",
          "0,1",
          "--max-value-bytes",
          "64"};
}

void ExpectEveryFilterFlagMapped(const v1::ListDeadLettersRequest& request) {
  const v1::DeadLetterFilter& filter = request.filter();
  EXPECT_EQ(filter.reason(), "ORDER_LOCKED");
  EXPECT_EQ(filter.key_prefix(), "k");
  EXPECT_EQ(filter.original_topic(), "orders");
  ASSERT_TRUE(filter.has_original_partition());
  EXPECT_EQ(filter.original_partition(), 0);
  EXPECT_EQ(filter.error_contains(), "Deadline");
  EXPECT_EQ(filter.first_failure_from_unix_ms(), kDecemberFirstMs);
  EXPECT_EQ(filter.first_failure_to_unix_ms(), 1'796'198'400'000);
  EXPECT_EQ(filter.min_attempts(), 1);
  EXPECT_EQ(filter.max_attempts(), 9);
  EXPECT_THAT(filter.partitions(), ElementsAre(0, 1));
  EXPECT_EQ(request.max_value_bytes(), 64u);
}

TEST(RetryctlDlqListTest, FollowsPageTokensAndMapsTheFilter) {
  FakeRetryd fake;
  fake.set_dead_letter_pages(Pages(3));
  const RunResult run = RunAgainst(fake, DlqListWithEveryFilterFlag());
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_THAT(lines, SizeIs(8)) << run.out;
  EXPECT_THAT(lines[0], StartsWith("PARTITION@OFFSET  KEY  ATTEMPTS  DEAD-LETTERED"));
  EXPECT_THAT(lines[1], StartsWith("0@0               k0   5  "));
  EXPECT_THAT(lines[6], StartsWith("0@5               k5   5  "));
  EXPECT_EQ(lines[7], "6 dead letters of orders.dlq shown (30 scanned); the list has ended");

  const std::vector<v1::ListDeadLettersRequest> requests = fake.dead_letter_requests();
  ASSERT_THAT(requests, SizeIs(3));
  EXPECT_EQ(requests[0].page_token(), "");
  EXPECT_EQ(requests[1].page_token(), "t1");
  EXPECT_EQ(requests[2].page_token(), "t2");
  // As many as are still wanted of the default 100.
  EXPECT_EQ(requests[0].page_size(), 100u);
  EXPECT_EQ(requests[1].page_size(), 98u);
  EXPECT_EQ(requests[2].page_size(), 96u);
  for (const v1::ListDeadLettersRequest& request : requests) {
    ASSERT_NO_FATAL_FAILURE(ExpectEveryFilterFlagMapped(request));
  }
}

TEST(RetryctlDlqListTest, NoFilterSendsAnEmptyOne) {
  FakeRetryd fake;
  const RunResult run = RunAgainst(fake, {"dlq", "ls"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "0 dead letters shown (0 scanned); the list has ended\n");
  const std::vector<v1::ListDeadLettersRequest> requests = fake.dead_letter_requests();
  ASSERT_THAT(requests, SizeIs(1));
  EXPECT_FALSE(requests[0].filter().has_original_partition());
  EXPECT_EQ(requests[0].filter().SerializeAsString(), "");
}

TEST(RetryctlDlqListTest, StopsAtTheLimit) {
  FakeRetryd fake;
  fake.set_dead_letter_pages(Pages(3));
  // The second page has two records; one of them is wanted.
  RunResult run = RunAgainst(fake, {"dlq", "ls", "--limit", "3"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  std::vector<std::string> lines = Lines(run.out);
  ASSERT_THAT(lines, SizeIs(5)) << run.out;
  EXPECT_THAT(lines[3], StartsWith("0@2 "));
  EXPECT_EQ(lines[4],
            "3 dead letters of orders.dlq shown (20 scanned); more may remain: raise --limit, or "
            "use --all-pages");
  std::vector<v1::ListDeadLettersRequest> requests = fake.dead_letter_requests();
  ASSERT_THAT(requests, SizeIs(2));
  EXPECT_EQ(requests[0].page_size(), 3u);
  EXPECT_EQ(requests[1].page_size(), 1u);

  // The limit reached at a page's end, with a token left: more may remain,
  // and no page more is asked for.
  FakeRetryd second;
  second.set_dead_letter_pages(Pages(3));
  run = RunAgainst(second, {"dlq", "ls", "--limit", "2", "--page-size", "2"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("2 dead letters of orders.dlq shown (10 scanned); more may"));
  ASSERT_THAT(second.dead_letter_requests(), SizeIs(1));
  EXPECT_EQ(second.dead_letter_requests()[0].page_size(), 2u);
}

TEST(RetryctlDlqListTest, AllPagesAsksForTheServersPageSize) {
  FakeRetryd fake;
  fake.set_dead_letter_pages(Pages(2));
  const RunResult run = RunAgainst(fake, {"dlq", "ls", "--all-pages"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("4 dead letters of orders.dlq shown (20 scanned); the list"));
  const std::vector<v1::ListDeadLettersRequest> requests = fake.dead_letter_requests();
  ASSERT_THAT(requests, SizeIs(2));
  EXPECT_EQ(requests[0].page_size(), 0u);
  EXPECT_EQ(requests[1].page_size(), 0u);
}

TEST(RetryctlDlqListTest, JsonIsOneRecordALineAndNothingElse) {
  FakeRetryd fake;
  fake.set_dead_letter_pages(Pages(2));
  const RunResult run = RunAgainst(fake, {"--json", "dlq", "ls", "--limit", "3"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_THAT(lines, SizeIs(3)) << run.out;
  for (size_t i = 0; i < lines.size(); ++i) {
    v1::DeadLetter letter;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i], &letter).ok()) << lines[i];
    EXPECT_EQ(letter.offset(), static_cast<int64_t>(i));
    EXPECT_EQ(letter.error_reason(), "shop.example/ORDER_LOCKED");
  }
  EXPECT_THAT(lines[0], HasSubstr("\"original_topic\":\"orders\""));
  EXPECT_EQ(run.err,
            "retryctl: 3 dead letters of orders.dlq shown (20 scanned); more may remain: raise "
            "--limit, or use --all-pages\n");
}

TEST(RetryctlDlqListTest, ErrorWithAReason) {
  FakeRetryd fake;
  fake.FailWith("ListDeadLetters", GrpcErrorWithReason(grpc::StatusCode::INVALID_ARGUMENT,
                                                       "page_token is malformed", "INVALID_FIELD"));
  RunResult run = RunAgainst(fake, {"dlq", "ls"});
  EXPECT_EQ(run.exit_code, 67);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "retryctl: INVALID_ARGUMENT (INVALID_FIELD): page_token is malformed\n");
  run = RunAgainst(fake, {"--json", "dlq", "ls"});
  EXPECT_EQ(run.exit_code, 67);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(ParseJsonObject(run.err).fields().at("reason").string_value(), "INVALID_FIELD");
}

TEST(RetryctlDlqListTest, APageThatFailsLaterKeepsWhatCameBefore) {
  FakeRetryd fake;
  std::vector<v1::ListDeadLettersResponse> pages = Pages(2);
  pages.pop_back();  // t1 names no page: INVALID_ARGUMENT.
  fake.set_dead_letter_pages(pages);
  const RunResult run = RunAgainst(fake, {"dlq", "ls"});
  EXPECT_EQ(run.exit_code, 67);
  EXPECT_THAT(Lines(run.out), SizeIs(3));  // The header and the first page.
  EXPECT_EQ(run.err, "retryctl: INVALID_ARGUMENT: unknown page token t1\n");
}

// ---- dlq record ----------------------------------------------------------------

TEST(RetryctlDlqRecordTest, BothSpellingsSendTheSameCall) {
  FakeRetryd fake;
  v1::DeadLetterRecordResponse response;
  response.set_thread_id(4);
  fake.set_response("DeadLetterRecord", response);
  for (const std::vector<std::string>& line :
       {std::vector<std::string>{"dlq", "record", "orders", "3", "1042"},
        std::vector<std::string>{"dlq-record", "orders", "3", "1042"}}) {
    std::vector<std::string> args = {"--request-id", kUuid};
    args.insert(args.end(), line.begin(), line.end());
    const RunResult run = RunAgainst(fake, args);
    EXPECT_EQ(run.exit_code, kExitOk) << run.err;
    EXPECT_EQ(run.out, "orders/3@1042 dead-lettered by thread 4\n");
    const auto request = fake.last_request<v1::DeadLetterRecordRequest>("DeadLetterRecord");
    EXPECT_EQ(request.topic(), "orders");
    EXPECT_EQ(request.partition(), 3);
    EXPECT_EQ(request.offset(), 1042);
    EXPECT_EQ(request.request_id(), kUuid);
  }
  fake.FailWith("DeadLetterRecord", grpc::Status(grpc::StatusCode::NOT_FOUND, "no thread holds"));
  EXPECT_EQ(RunAgainst(fake, {"dlq", "record", "orders", "3", "1"}).exit_code, 69);
  EXPECT_EQ(RunAgainst(fake, {"dlq-record", "orders", "3", "1"}).exit_code, 69);
}

// ---- dlq redrive ---------------------------------------------------------------

TEST(RetryctlDlqRedriveTest, StartsARedriveAndPrintsItsId) {
  FakeRetryd fake;
  fake.set_response("StartRedrive", Redrive("op-r1", v1::OPERATION_STATE_RUNNING));
  RunResult run = RunAgainst(fake, {"--request-id", kUuid, "dlq", "redrive", "--reason",
                                    "ORDER_LOCKED", "--partition", "2", "--to", "orders.replay",
                                    "--rate", "50", "--reset-attempts", "--max-redrives", "4"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out,
            "redrive started: operation op-r1\n"
            "follow it with 'retryctl operation watch op-r1', stop it with 'retryctl operation "
            "cancel op-r1'\n");
  const auto request = fake.last_request<v1::StartRedriveRequest>("StartRedrive");
  EXPECT_EQ(request.request_id(), kUuid);
  EXPECT_EQ(request.filter().reason(), "ORDER_LOCKED");
  EXPECT_THAT(request.filter().partitions(), ElementsAre(2));
  EXPECT_EQ(request.target_topic(), "orders.replay");
  EXPECT_EQ(request.rate_per_s(), 50u);
  EXPECT_TRUE(request.reset_attempts());
  EXPECT_FALSE(request.dry_run());
  EXPECT_EQ(request.max_redrives(), 4u);
  EXPECT_FALSE(fake.last_call("WatchOperation").has_value());

  run = RunAgainst(fake, {"--json", "dlq", "redrive", "--dry-run"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  v1::Operation parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &parsed).ok()) << run.out;
  EXPECT_EQ(parsed.kind(), v1::OPERATION_KIND_REDRIVE);
  EXPECT_TRUE(fake.last_request<v1::StartRedriveRequest>("StartRedrive").dry_run());
  EXPECT_EQ(fake.last_request<v1::StartRedriveRequest>("StartRedrive").request_id(), "");
}

TEST(RetryctlDlqRedriveTest, WaitShowsProgressAndEndsWithTheResult) {
  FakeRetryd fake;
  fake.set_response("StartRedrive", Redrive("op-r2", v1::OPERATION_STATE_RUNNING));
  v1::Operation first = Redrive("op-r2", v1::OPERATION_STATE_RUNNING);
  *first.mutable_progress()->mutable_redrive() = Progress(1200, 300, 250);
  v1::Operation same = first;  // Unchanged: not printed again.
  v1::Operation second = first;
  *second.mutable_progress()->mutable_redrive() = Progress(5000, 400, 398);
  v1::Operation done = Redrive("op-r2", v1::OPERATION_STATE_SUCCEEDED);
  v1::RedriveResult& result = *done.mutable_redrive();
  *result.mutable_progress() = Progress(5000, 400, 398);
  result.mutable_progress()->set_eta_ms(-1);
  result.mutable_progress()->set_sent_twice(7);
  result.mutable_progress()->set_resumed(true);
  result.set_target("ORIGIN");
  fake.set_operation_updates({first, same, second, done}, /*then_end=*/true);

  const RunResult run = RunAgainst(fake, {"dlq", "redrive", "--wait"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_THAT(lines, SizeIs(4)) << run.out;
  EXPECT_EQ(lines[0], "redrive started: operation op-r2");
  EXPECT_THAT(lines[1], EndsWith(": scanned 1200 of 5000, matched 300, redriven 250, skipped 2, "
                                 "98.5/s, ETA 40.0s"));
  EXPECT_THAT(lines[2], HasSubstr(": scanned 5000 of 5000, matched 400, redriven 398"));
  EXPECT_EQ(lines[3],
            "SUCCEEDED after 14.0s: scanned 5000 of 5000, matched 400, redriven 398, skipped 2, "
            "sent twice 7, 98.5/s (resumed); to ORIGIN");
  EXPECT_EQ(fake.last_request<v1::WatchOperationRequest>("WatchOperation").id(), "op-r2");
}

TEST(RetryctlDlqRedriveTest, DryRunShowsItsCountsAsTables) {
  FakeRetryd fake;
  fake.set_response("StartRedrive", Redrive("op-r3", v1::OPERATION_STATE_RUNNING));
  v1::Operation done = Redrive("op-r3", v1::OPERATION_STATE_SUCCEEDED);
  v1::RedriveResult& result = *done.mutable_redrive();
  v1::RedriveProgress& progress = *result.mutable_progress();
  progress.set_dry_run(true);
  progress.set_scanned(900);
  progress.set_matched(120);
  progress.set_redriven(118);
  progress.set_skipped(2);
  progress.set_eta_ms(-1);
  v1::RedriveCount* count = result.add_by_partition();
  count->set_key("0");
  count->set_matched(100);
  count->set_skipped(2);
  count = result.add_by_partition();
  count->set_key("1");
  count->set_matched(20);
  count = result.add_by_reason();
  count->set_key("shop.example/ORDER_LOCKED");
  count->set_matched(110);
  count->set_skipped(2);
  count = result.add_by_reason();
  count->set_matched(10);
  fake.set_operation_updates({done}, /*then_end=*/true);

  const RunResult run = RunAgainst(fake, {"dlq", "redrive", "--dry-run", "--wait"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out,
            "redrive (dry run) started: operation op-r3\n"
            "SUCCEEDED after 14.0s: dry run: scanned 900, matched 120, would redrive 118, "
            "skipped 2\n"
            "PARTITION  MATCHED  SKIPPED\n"
            "0          100      2\n"
            "1          20       0\n"
            "\n"
            "REASON                     MATCHED  SKIPPED\n"
            "shop.example/ORDER_LOCKED  110      2\n"
            "-                          10       0\n");

  // `operation ID` shows them too.
  fake.set_response("GetOperation", done);
  const RunResult get = RunAgainst(fake, {"op", "get", "op-r3"});
  EXPECT_EQ(get.exit_code, kExitOk) << get.err;
  EXPECT_THAT(get.out, HasSubstr("kind      redrive\n"));
  EXPECT_THAT(get.out, HasSubstr("result    dry run: scanned 900, matched 120, would redrive 118"));
  EXPECT_THAT(get.out, HasSubstr("REASON                     MATCHED  SKIPPED\n"));
}

TEST(RetryctlDlqRedriveTest, WaitExitsAsDrainWaitDoes) {
  FakeRetryd fake;
  fake.set_response("StartRedrive", Redrive("op-r4", v1::OPERATION_STATE_RUNNING));
  v1::Operation cancelled = Redrive("op-r4", v1::OPERATION_STATE_CANCELLED);
  *cancelled.mutable_error() =
      RpcStatusWithReason(grpc::StatusCode::CANCELLED, "cancelled by an operator", "");
  *cancelled.mutable_redrive()->mutable_progress() = Progress(700, 50, 40);
  fake.set_operation_updates({cancelled}, /*then_end=*/true);
  RunResult run = RunAgainst(fake, {"dlq", "redrive", "--wait"});
  EXPECT_EQ(run.exit_code, 65);
  EXPECT_THAT(run.out, HasSubstr("CANCELLED after 14.0s: CANCELLED: cancelled by an operator\n"));

  v1::Operation failed = Redrive("op-r4", v1::OPERATION_STATE_FAILED);
  *failed.mutable_error() =
      RpcStatusWithReason(grpc::StatusCode::UNAVAILABLE, "the dead-letter topic is gone", "");
  fake.set_operation_updates({failed}, /*then_end=*/true);
  run = RunAgainst(fake, {"--json", "dlq", "redrive", "--wait"});
  EXPECT_EQ(run.exit_code, 78);
  EXPECT_EQ(ParseJsonObject(run.err).fields().at("status").string_value(), "UNAVAILABLE");
}

TEST(RetryctlDlqRedriveTest, RefusedWhileAnotherRuns) {
  FakeRetryd fake;
  fake.FailWith("StartRedrive",
                GrpcErrorWithReason(grpc::StatusCode::FAILED_PRECONDITION,
                                    "redrive op-9 of orders.dlq runs", "REDRIVE_RUNNING"));
  RunResult run = RunAgainst(fake, {"dlq", "redrive", "--wait"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "retryctl: FAILED_PRECONDITION (REDRIVE_RUNNING): redrive op-9 of orders.dlq runs\n");
  EXPECT_FALSE(fake.last_call("WatchOperation").has_value());

  fake.FailWith("StartRedrive",
                GrpcErrorWithReason(grpc::StatusCode::FAILED_PRECONDITION,
                                    "the cluster has no Admin API", "ADMIN_API_UNAVAILABLE"));
  run = RunAgainst(fake, {"--json", "dlq", "redrive"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_EQ(ParseJsonObject(run.err).fields().at("reason").string_value(), "ADMIN_API_UNAVAILABLE");
}

// ---- dlq purge -----------------------------------------------------------------

v1::PurgeDeadLettersResponse Purged() {
  v1::PurgeDeadLettersResponse response;
  response.set_topic("orders.dlq");
  v1::PartitionPurge* p = response.add_partitions();
  p->set_partition(0);
  p->set_from(200);
  p->set_to(1200);
  p = response.add_partitions();
  p->set_partition(1);
  p->set_from(800);
  p->set_to(800);
  return response;
}

TEST(RetryctlDlqPurgeTest, UpToSendsTheMarksAndPrintsATable) {
  FakeRetryd fake;
  fake.set_response("PurgeDeadLetters", Purged());
  RunResult run =
      RunAgainst(fake, {"--request-id", kUuid, "dlq", "purge", "--up-to", "0=1200", "1=800"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.out,
            "purged 1000 dead letters of orders.dlq (hidden from dlq ls and dlq redrive; still in "
            "the topic)\n"
            "PARTITION  FROM  TO    DELETED\n"
            "0          200   1200  no\n"
            "1          800   800   no\n");
  auto request = fake.last_request<v1::PurgeDeadLettersRequest>("PurgeDeadLetters");
  EXPECT_THAT(request.up_to(), UnorderedElementsAre(Pair(0, 1200), Pair(1, 800)));
  EXPECT_FALSE(request.all());
  EXPECT_FALSE(request.delete_records());
  EXPECT_EQ(request.request_id(), kUuid);

  run = RunAgainst(fake, {"--json", "dlq", "purge", "--all", "--delete-records"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  v1::PurgeDeadLettersResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &parsed).ok()) << run.out;
  EXPECT_EQ(parsed.partitions_size(), 2);
  request = fake.last_request<v1::PurgeDeadLettersRequest>("PurgeDeadLetters");
  EXPECT_TRUE(request.all());
  EXPECT_TRUE(request.up_to().empty());
  EXPECT_TRUE(request.delete_records());
}

TEST(RetryctlDlqPurgeTest, DeletedRecordsAndRefusal) {
  v1::PurgeDeadLettersResponse response = Purged();
  response.mutable_partitions(0)->set_deleted(true);
  EXPECT_THAT(FormatPurge(response), HasSubstr("(hidden, and deleted where DELETED says yes)\n"));
  EXPECT_THAT(FormatPurge(response), HasSubstr("0          200   1200  yes\n"));
  EXPECT_EQ(FormatPurge(v1::PurgeDeadLettersResponse()), "nothing purged: no partition named\n");

  FakeRetryd fake;
  fake.FailWith("PurgeDeadLetters",
                GrpcErrorWithReason(grpc::StatusCode::FAILED_PRECONDITION,
                                    "DeleteRecords is not allowed", "ADMIN_API_UNAVAILABLE"));
  const RunResult run = RunAgainst(fake, {"dlq", "purge", "--all", "--delete-records"});
  EXPECT_EQ(run.exit_code, 73);
  EXPECT_EQ(run.err,
            "retryctl: FAILED_PRECONDITION (ADMIN_API_UNAVAILABLE): DeleteRecords is not "
            "allowed\n");
}

// ---- op, and redrives among the operations -----------------------------------------

TEST(RetryctlOpTest, AliasesCallTheSameRpcs) {
  FakeRetryd fake;
  v1::ListOperationsResponse list;
  v1::Operation* running = list.add_operations();
  *running = Redrive("op-r5", v1::OPERATION_STATE_RUNNING);
  *running->mutable_progress()->mutable_redrive() = Progress(1200, 300, 250);
  fake.set_response("ListOperations", list);
  RunResult run = RunAgainst(fake, {"op", "ls"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("op-r5  redrive  RUNNING"));
  EXPECT_THAT(run.out, HasSubstr("scanned 1200 of 5000, matched 300, redriven 250"));

  fake.set_response("CancelOperation", Redrive("op-r5", v1::OPERATION_STATE_CANCELLED));
  run = RunAgainst(fake, {"--request-id", kUuid, "op", "cancel", "op-r5"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("state     CANCELLED\n"));
  const auto cancel = fake.last_request<v1::CancelOperationRequest>("CancelOperation");
  EXPECT_EQ(cancel.id(), "op-r5");
  EXPECT_EQ(cancel.request_id(), kUuid);

  fake.set_operation_updates({Redrive("op-r5", v1::OPERATION_STATE_SUCCEEDED)}, true);
  run = RunAgainst(fake, {"op", "watch", "op-r5"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(fake.last_request<v1::WatchOperationRequest>("WatchOperation").id(), "op-r5");

  fake.FailWith("GetOperation", GrpcErrorWithReason(grpc::StatusCode::NOT_FOUND,
                                                    "no operation op-x", "OPERATION_NOT_FOUND"));
  run = RunAgainst(fake, {"op", "get", "op-x"});
  EXPECT_EQ(run.exit_code, 69);
  EXPECT_EQ(run.err, "retryctl: NOT_FOUND (OPERATION_NOT_FOUND): no operation op-x\n");
}

TEST(RetryctlOpTest, AFailedRedriveSaysHowFarItCame) {
  v1::Operation failed = Redrive("op-r6", v1::OPERATION_STATE_FAILED);
  *failed.mutable_error() =
      RpcStatusWithReason(grpc::StatusCode::UNAVAILABLE, "the broker went away", "");
  *failed.mutable_redrive()->mutable_progress() = Progress(700, 50, 40);
  failed.mutable_redrive()->set_target("orders.replay");
  const std::string text = FormatOperation(failed, 1'020'000);
  EXPECT_THAT(text, HasSubstr("error     UNAVAILABLE: the broker went away\n"));
  EXPECT_THAT(text, HasSubstr("redrive   scanned 700 of 5000, matched 50, redriven 40, skipped 2, "
                              "98.5/s, ETA 40.0s; to orders.replay\n"));
  EXPECT_THAT(text, Not(HasSubstr("PARTITION")));
  EXPECT_EQ(OperationKindName(v1::OPERATION_KIND_REDRIVE), "redrive");

  v1::RedriveProgress resumed = Progress(1, 1, 1);
  resumed.set_resumed(true);
  resumed.set_eta_ms(-1);
  EXPECT_THAT(FormatRedriveProgress(resumed), EndsWith("98.5/s (resumed)"));
}

}  // namespace
}  // namespace retryd::retryctl
