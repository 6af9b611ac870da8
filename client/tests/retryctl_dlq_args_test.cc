// retryctl's dead-letter commands (dlq ls, record, redrive, purge) and the
// `op` spellings of the operation commands: their command lines, usage
// errors and help.
#include <string>
#include <variant>
#include <vector>

#include "client/retryctl.h"
#include "client/retryctl_args.h"
#include "client/retryctl_help.h"
#include "client/tests/fake_retryd.h"
#include "client/tests/run_retryctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {
namespace {

using ::retryd::testing::FakeRetryd;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;

// 2026-12-01T08:00:00Z.
constexpr int64_t kDecemberFirstMs = 1'796'112'000'000;

// ---- arguments -----------------------------------------------------------------

TEST(RetryctlDlqArgsTest, ListDefaultsAndEveryFilter) {
  Invocation invocation = Parse({"dlq", "ls"});
  EXPECT_EQ(invocation.command, Command::kDlqList);
  EXPECT_EQ(invocation.dlq.limit, 100);
  EXPECT_FALSE(invocation.dlq.all_pages);
  EXPECT_EQ(invocation.dlq.page_size, 0u);

  invocation = Parse({"dlq",
                      "ls",
                      "--key-prefix",
                      "order-",
                      "--error=timeout",
                      "--reason",
                      "ORDER_LOCKED",
                      "--topic",
                      "orders",
                      "--original-partition",
                      "3",
                      "--since",
                      "2026-12-01T08:00:00Z",
                      "--until",
                      "1796198400000",
                      "--min-attempts",
                      "2",
                      "--max-attempts=9",
                      "--partition",
                      "0",
                      "--partition=2,5",
                      "--limit",
                      "7",
                      "--page-size",
                      "50",
                      "--max-value-bytes",
                      "0"});
  const DeadLetterFilterArgs& filter = invocation.dlq.filter;
  EXPECT_EQ(filter.key_prefix, "order-");
  EXPECT_EQ(filter.error_contains, "timeout");
  EXPECT_EQ(filter.reason, "ORDER_LOCKED");
  EXPECT_EQ(filter.original_topic, "orders");
  EXPECT_EQ(filter.original_partition, 3);
  EXPECT_EQ(filter.since_unix_ms, kDecemberFirstMs);
  EXPECT_EQ(filter.until_unix_ms, 1'796'198'400'000);
  EXPECT_EQ(filter.min_attempts, 2);
  EXPECT_EQ(filter.max_attempts, 9);
  EXPECT_THAT(filter.partitions, ElementsAre(0, 2, 5));
  EXPECT_EQ(invocation.dlq.limit, 7);
  EXPECT_EQ(invocation.dlq.page_size, 50u);

  // An offset other than Z.
  EXPECT_EQ(Parse({"dlq", "ls", "--since", "2026-12-01T09:00:00+01:00"}).dlq.filter.since_unix_ms,
            kDecemberFirstMs);
  invocation = Parse({"dlq", "ls", "--all-pages"});
  EXPECT_TRUE(invocation.dlq.all_pages);
  EXPECT_EQ(invocation.dlq.limit, 0);
}

TEST(RetryctlDlqArgsTest, ListErrors) {
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--limit", "0"}),
            "dlq ls: --limit must be a whole number in 1..1000000, got '0'");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--limit"}), "dlq ls: --limit needs a number of records");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--page-size", "1001"}),
            "dlq ls: --page-size must be a whole number in 1..1000, got '1001'");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--all-pages", "--limit", "5"}),
            "dlq ls: give --limit or --all-pages, not both");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--all-pages=yes"}), "dlq ls: --all-pages takes no value");
  EXPECT_THAT(ErrorOf({"dlq", "ls", "--since", "yesterday"}),
              HasSubstr("--since must be Unix milliseconds or an RFC 3339 time"));
  EXPECT_THAT(ErrorOf({"dlq", "ls", "--since", "2026-12-01T08:00:00"}),  // No zone.
              HasSubstr("got '2026-12-01T08:00:00'"));
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--since", "2000", "--until", "1000"}),
            "dlq ls: --since must be before --until");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--min-attempts", "5", "--max-attempts", "2"}),
            "dlq ls: --min-attempts must not be above --max-attempts");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--partition", "-1"}),
            "dlq ls: --partition must be a partition number (0 or more), got '-1'");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--reason="}),
            "dlq ls: --reason needs a reason, e.g. ORDER_LOCKED");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "--to", "x"}), "dlq ls: unknown flag --to");
  EXPECT_EQ(ErrorOf({"dlq", "ls", "orders"}), "dlq ls: unexpected argument 'orders'");
  EXPECT_THAT(ErrorOf({"--request-id", kUuid, "dlq", "ls"}),
              HasSubstr("--request-id applies only to a command that changes retryd"));
}

TEST(RetryctlDlqArgsTest, UnknownOrMissingSubcommand) {
  EXPECT_EQ(ErrorOf({"dlq"}), "dlq: missing a subcommand: ls, record, redrive or purge");
  EXPECT_EQ(ErrorOf({"dlq", "list"}),
            "dlq: unknown subcommand 'list' (use ls, record, redrive or purge)");
  const std::variant<Invocation, UsageError> parsed = ParseLine({"dlq", "rm"});
  ASSERT_TRUE(std::holds_alternative<UsageError>(parsed));
  EXPECT_EQ(std::get<UsageError>(parsed).topic, "dlq");
}

TEST(RetryctlDlqArgsTest, RecordIsDlqRecord) {
  for (const std::vector<std::string>& line :
       {std::vector<std::string>{"dlq", "record", "orders", "3", "1042"},
        std::vector<std::string>{"dlq-record", "orders", "3", "1042"}}) {
    const Invocation invocation = Parse(line);
    EXPECT_EQ(invocation.command, Command::kDlqRecord);
    EXPECT_EQ(invocation.record_topic, "orders");
    EXPECT_EQ(invocation.record_partition, 3);
    EXPECT_EQ(invocation.record_offset, 1042);
  }
  EXPECT_EQ(ErrorOf({"dlq", "record", "orders", "3"}),
            "dlq record: needs TOPIC PARTITION OFFSET, the record's original coordinates");
  EXPECT_EQ(ErrorOf({"dlq-record", "orders", "3"}),
            "dlq-record: needs TOPIC PARTITION OFFSET, the record's original coordinates");
  EXPECT_EQ(Parse({"--request-id", kUuid, "dlq", "record", "o", "0", "1"}).flags.request_id, kUuid);
}

TEST(RetryctlDlqArgsTest, Redrive) {
  Invocation invocation = Parse({"dlq", "redrive"});
  EXPECT_EQ(invocation.command, Command::kDlqRedrive);
  EXPECT_FALSE(invocation.wait);
  EXPECT_FALSE(invocation.dlq.dry_run);
  invocation = Parse({"dlq", "redrive", "--reason", "ORDER_LOCKED", "--to", "orders.replay",
                      "--rate", "50", "--reset-attempts", "--dry-run", "--max-redrives", "5",
                      "--wait", "--request-id", kUuid});
  EXPECT_EQ(invocation.dlq.filter.reason, "ORDER_LOCKED");
  EXPECT_EQ(invocation.dlq.target_topic, "orders.replay");
  EXPECT_EQ(invocation.dlq.rate_per_s, 50u);
  EXPECT_TRUE(invocation.dlq.reset_attempts);
  EXPECT_TRUE(invocation.dlq.dry_run);
  EXPECT_EQ(invocation.dlq.max_redrives, 5u);
  EXPECT_TRUE(invocation.wait);
  EXPECT_EQ(invocation.flags.request_id, kUuid);

  EXPECT_EQ(ErrorOf({"dlq", "redrive", "--rate", "0"}),
            "dlq redrive: --rate must be a whole number in 1..100000, got '0'");
  EXPECT_EQ(ErrorOf({"dlq", "redrive", "--to"}), "dlq redrive: --to needs a topic");
  EXPECT_EQ(ErrorOf({"dlq", "redrive", "--dry-run=no"}), "dlq redrive: --dry-run takes no value");
  EXPECT_EQ(ErrorOf({"dlq", "redrive", "--limit", "3"}), "dlq redrive: unknown flag --limit");
}

TEST(RetryctlDlqArgsTest, Purge) {
  Invocation invocation = Parse({"dlq", "purge", "--all", "--delete-records"});
  EXPECT_EQ(invocation.command, Command::kDlqPurge);
  EXPECT_TRUE(invocation.dlq.purge_all);
  EXPECT_TRUE(invocation.dlq.delete_records);
  invocation = Parse({"dlq", "purge", "--up-to", "0=1200", "1=800", "--up-to=2=5,3=6"});
  EXPECT_FALSE(invocation.dlq.purge_all);
  EXPECT_FALSE(invocation.dlq.delete_records);
  EXPECT_THAT(invocation.dlq.purge_up_to,
              ElementsAre(Pair(0, 1200), Pair(1, 800), Pair(2, 5), Pair(3, 6)));

  EXPECT_EQ(ErrorOf({"dlq", "purge"}),
            "dlq purge: say what to purge: --all, or --up-to PARTITION=OFFSET...");
  EXPECT_EQ(ErrorOf({"dlq", "purge", "--all", "--up-to", "0=1"}),
            "dlq purge: give --all or --up-to, not both");
  EXPECT_EQ(ErrorOf({"dlq", "purge", "--up-to", "0=1", "0=2"}),
            "dlq purge: --up-to names partition 0 twice");
  EXPECT_THAT(ErrorOf({"dlq", "purge", "--up-to", "0:1"}),
              HasSubstr("--up-to takes PARTITION=OFFSET (the first offset to keep)"));
  EXPECT_THAT(ErrorOf({"dlq", "purge", "--up-to", "0=-1"}), HasSubstr("got '0=-1'"));
  EXPECT_EQ(ErrorOf({"dlq", "purge", "--up-to"}),
            "dlq purge: --up-to needs PARTITION=OFFSET, e.g. --up-to 0=1200");
  EXPECT_EQ(ErrorOf({"dlq", "purge", "--all", "--reason", "x"}),
            "dlq purge: unknown flag --reason");
}

TEST(RetryctlDlqArgsTest, OpSpellsTheOperationCommands) {
  EXPECT_EQ(Parse({"op", "ls"}).command, Command::kOperations);
  EXPECT_EQ(Parse({"operation", "ls"}).command, Command::kOperations);
  Invocation invocation = Parse({"op", "get", "op-1"});
  EXPECT_EQ(invocation.command, Command::kOperationGet);
  EXPECT_EQ(invocation.operation_id, "op-1");
  EXPECT_EQ(Parse({"op", "op-1"}).command, Command::kOperationGet);
  invocation = Parse({"op", "watch", "op-2"});
  EXPECT_EQ(invocation.command, Command::kOperationWatch);
  EXPECT_EQ(invocation.operation_id, "op-2");
  invocation = Parse({"--request-id", kUuid, "op", "cancel", "op-3"});
  EXPECT_EQ(invocation.command, Command::kOperationCancel);
  EXPECT_EQ(invocation.operation_id, "op-3");
  // The old spellings stay.
  EXPECT_EQ(Parse({"operations"}).command, Command::kOperations);
  EXPECT_EQ(Parse({"operation", "watch", "op-2"}).command, Command::kOperationWatch);

  EXPECT_EQ(ErrorOf({"op"}), "op: missing 'ls', 'get ID', 'watch ID' or 'cancel ID'");
  EXPECT_EQ(ErrorOf({"op", "get"}), "op: get: missing ID, the operation's id");
  EXPECT_EQ(ErrorOf({"op", "ls", "x"}), "op: takes no arguments, got 'x'");
  EXPECT_EQ(ErrorOf({"op", "watch", "a", "b"}), "op: unexpected argument 'b'");
}

TEST(RetryctlDlqArgsTest, HelpForDlqAndEachSubcommand) {
  struct Case {
    std::vector<std::string> args;
    std::string topic;
  };
  for (const Case& c : std::vector<Case>{
           {{"help", "dlq"}, "dlq"},
           {{"dlq", "--help"}, "dlq"},
           {{"dlq", "ls", "--help"}, "dlq ls"},
           {{"help", "dlq", "redrive"}, "dlq redrive"},
           {{"dlq", "purge", "-h"}, "dlq purge"},
           {{"dlq", "record", "--help"}, "dlq record"},
           {{"dlq", "nope", "--help"}, "dlq"},
           {{"dlq-record", "--help"}, "dlq-record"},
           {{"op", "--help"}, "op"},
       }) {
    const Invocation invocation = Parse(c.args);
    EXPECT_EQ(invocation.command, Command::kHelp) << c.topic;
    EXPECT_EQ(invocation.help_topic, c.topic);
    EXPECT_THAT(std::string(HelpText(c.topic)), StartsWith("Usage:\n")) << c.topic;
  }
  EXPECT_THAT(std::string(HelpText("dlq ls")), HasSubstr("--original-partition P"));
  EXPECT_THAT(std::string(HelpText("dlq redrive")), HasSubstr("--original-partition P"));
  EXPECT_THAT(std::string(HelpText("dlq redrive")), HasSubstr("REDRIVE_RUNNING"));
  EXPECT_THAT(std::string(HelpText("dlq purge")), HasSubstr("ADMIN_API_UNAVAILABLE"));
  EXPECT_THAT(std::string(HelpText("dlq record")), HasSubstr("retryctl dlq-record"));
  EXPECT_THAT(std::string(HelpText("op")), HasSubstr("retryctl op ls | get ID"));
  const std::string overview(HelpText(""));
  for (const char* expected : {"dlq ls [FILTERS]", "dlq redrive [FILTERS]", "dlq purge --all",
                               "op ls | get ID | watch ID | cancel ID"}) {
    EXPECT_THAT(overview, HasSubstr(expected));
  }

  const RunResult run = RunAgainst(FakeRetryd(), {"dlq", "ls", "--help"});
  EXPECT_EQ(run.exit_code, kExitOk);
  EXPECT_EQ(run.out, HelpText("dlq ls"));
}

TEST(RetryctlDlqArgsTest, UsageErrorsExitTwoAndPointAtTheSubcommandsHelp) {
  FakeRetryd fake;
  RunResult run = RunAgainst(fake, {"dlq", "purge", "--all", "--up-to", "0=1"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "retryctl: dlq purge: give --all or --up-to, not both\n"
            "Run 'retryctl dlq purge --help' for usage.\n");
  run = RunAgainst(fake, {"dlq", "frob"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_THAT(run.err, EndsWith("Run 'retryctl dlq --help' for usage.\n"));
  EXPECT_THAT(fake.calls(), IsEmpty());
}

}  // namespace
}  // namespace retryd::retryctl
