// retryctl's command line: every command, flag placement, environment
// defaults, and the usage errors (exit 2, what is wrong, where to look).
#include "client/retryctl_args.h"

#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "client/retryctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

Invocation Parse(const std::vector<std::string>& args, const Environment& env = {}) {
  std::variant<Invocation, UsageError> result = ParseArgs(args, env);
  if (const UsageError* error = std::get_if<UsageError>(&result)) {
    ADD_FAILURE() << "unexpected usage error: " << error->message;
    return Invocation();
  }
  return std::get<Invocation>(result);
}

UsageError ParseError(const std::vector<std::string>& args, const Environment& env = {}) {
  std::variant<Invocation, UsageError> result = ParseArgs(args, env);
  if (!std::holds_alternative<UsageError>(result)) {
    ADD_FAILURE() << "expected a usage error";
    return UsageError();
  }
  return std::get<UsageError>(result);
}

// What a user sees: the exit status and stderr of the whole tool. A usage
// error never reaches the network.
struct RunResult {
  int exit_code;
  std::string out;
  std::string err;
};
RunResult RunTool(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const Io io(out, err);
  const ClientFactory no_client =
      [](const ClientOptions&) -> absl::StatusOr<std::unique_ptr<RetrydClient>> {
    ADD_FAILURE() << "a usage error must not create a client";
    return absl::InternalError("no client");
  };
  const int code = RunRetryctl(args, Environment(), io, no_client, nullptr);
  return RunResult{code, out.str(), err.str()};
}

// ---- global flags ---------------------------------------------------------------

TEST(RetryctlArgsTest, DefaultsWithoutFlagsOrEnvironment) {
  const Invocation invocation = Parse({"status"});
  EXPECT_EQ(invocation.command, Command::kStatus);
  EXPECT_EQ(invocation.flags.address, "127.0.0.1:50051");
  EXPECT_EQ(invocation.flags.token_file, "");
  EXPECT_EQ(invocation.flags.timeout, absl::Seconds(30));
  EXPECT_FALSE(invocation.flags.json);
  EXPECT_FALSE(invocation.flags.tls);
}

TEST(RetryctlArgsTest, EnvironmentGivesDefaultsAndFlagsOverrideThem) {
  const Environment env{"10.0.0.5:7000", "/etc/retryd/token"};
  Invocation invocation = Parse({"status"}, env);
  EXPECT_EQ(invocation.flags.address, "10.0.0.5:7000");
  EXPECT_EQ(invocation.flags.token_file, "/etc/retryd/token");

  invocation = Parse({"--addr", "localhost:1", "--token-file=/tmp/t", "status"}, env);
  EXPECT_EQ(invocation.flags.address, "localhost:1");
  EXPECT_EQ(invocation.flags.token_file, "/tmp/t");
}

TEST(RetryctlArgsTest, GlobalFlagsMayFollowTheCommand) {
  const Invocation invocation =
      Parse({"threads", "start", "2", "--json", "--addr=h:9", "--timeout", "5"});
  EXPECT_EQ(invocation.command, Command::kThreadsStart);
  EXPECT_EQ(invocation.count, 2);
  EXPECT_TRUE(invocation.flags.json);
  EXPECT_EQ(invocation.flags.address, "h:9");
  EXPECT_EQ(invocation.flags.timeout, absl::Seconds(5));
}

TEST(RetryctlArgsTest, TlsFlags) {
  Invocation invocation = Parse({"--tls", "status"});
  EXPECT_TRUE(invocation.flags.tls);
  invocation = Parse({"--tls-ca", "ca.pem", "--tls-cert", "c.pem", "--tls-key", "k.pem", "status"});
  EXPECT_EQ(invocation.flags.tls_ca_file, "ca.pem");
  EXPECT_EQ(invocation.flags.tls_cert_file, "c.pem");
  EXPECT_EQ(invocation.flags.tls_key_file, "k.pem");

  EXPECT_EQ(ParseError({"--tls-cert", "c.pem", "status"}).message,
            "--tls-cert and --tls-key go together (mutual TLS needs both)");
}

TEST(RetryctlArgsTest, TimeoutTakesSecondsOrADuration) {
  EXPECT_EQ(Parse({"--timeout", "2.5", "status"}).flags.timeout, absl::Milliseconds(2500));
  EXPECT_EQ(Parse({"--timeout=500ms", "status"}).flags.timeout, absl::Milliseconds(500));
  EXPECT_EQ(Parse({"--timeout", "2m", "status"}).flags.timeout, absl::Minutes(2));
  for (const std::string bad : {"0", "abc", "-1", "inf", "nan"}) {
    EXPECT_THAT(ParseError({"--timeout=" + bad, "status"}).message,
                HasSubstr("--timeout must be a positive number of seconds"))
        << bad;
  }
}

TEST(RetryctlArgsTest, ValueFlagWithoutValue) {
  EXPECT_EQ(ParseError({"status", "--addr"}).message, "--addr needs a value");
  EXPECT_EQ(ParseError({"--addr", "--json", "status"}).message, "--addr needs a value");
  EXPECT_EQ(ParseError({"--token-file=", "status"}).message, "--token-file needs a value");
}

TEST(RetryctlArgsTest, BoolFlagWithValue) {
  EXPECT_EQ(ParseError({"--json=true", "status"}).message, "--json takes no value");
}

TEST(RetryctlArgsTest, TokenOnTheCommandLineIsRefusedWithoutEchoingIt) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--token", "s3cret", "status"}, {"--token=s3cret", "status"}}) {
    const UsageError error = ParseError(args);
    EXPECT_THAT(error.message, HasSubstr("--token-file"));
    EXPECT_THAT(error.message, Not(HasSubstr("s3cret")));
  }
}

TEST(RetryctlArgsTest, MissingAndUnknownCommand) {
  UsageError error = ParseError({});
  EXPECT_EQ(error.message, "missing COMMAND");
  EXPECT_EQ(error.topic, "");
  error = ParseError({"--json"});
  EXPECT_EQ(error.message, "missing COMMAND");
  error = ParseError({"restart"});
  EXPECT_EQ(error.message, "unknown command 'restart'");
}

// ---- status -------------------------------------------------------------------

TEST(RetryctlArgsTest, StatusTakesNoArguments) {
  UsageError error = ParseError({"status", "now"});
  EXPECT_EQ(error.message, "status: takes no arguments, got 'now'");
  EXPECT_EQ(error.topic, "status");
  EXPECT_EQ(ParseError({"status", "--verbose"}).message, "status: unknown flag --verbose");
}

// ---- threads ------------------------------------------------------------------

TEST(RetryctlArgsTest, ThreadsStart) {
  const Invocation invocation = Parse({"threads", "start", "3"});
  EXPECT_EQ(invocation.command, Command::kThreadsStart);
  EXPECT_EQ(invocation.count, 3);
}

TEST(RetryctlArgsTest, ThreadsTakeATier) {
  EXPECT_EQ(Parse({"threads", "start", "2", "--tier", "orders.retry-1h"}).tier, "orders.retry-1h");
  EXPECT_EQ(Parse({"threads", "stop", "--tier=t2", "1"}).tier, "t2");
  const Invocation set = Parse({"threads", "set", "0", "--tier", "t3", "--now"});
  EXPECT_EQ(set.tier, "t3");
  EXPECT_EQ(set.count, 0);
  EXPECT_EQ(Parse({"threads", "start", "1"}).tier, "") << "the first tier";
  EXPECT_EQ(ParseError({"threads", "start", "1", "--tier"}).message,
            "threads start: --tier needs a value: a retry tier's topic ('retryctl status')");
  EXPECT_EQ(ParseError({"threads", "stop", "--id", "3", "--tier", "t2"}).message,
            "threads stop: --tier goes with N: --id names threads of any tier");
}

TEST(RetryctlArgsTest, ThreadsStartErrors) {
  UsageError error = ParseError({"threads", "start"});
  EXPECT_EQ(error.message, "threads start: missing N, the number of retry threads to start");
  EXPECT_EQ(error.topic, "threads");
  for (const std::string bad : {"0", "-1", "abc", "1.5", "99999999999"}) {
    EXPECT_EQ(ParseError({"threads", "start", bad}).message,
              "threads start: N must be a whole number of at least 1, got '" + bad + "'");
  }
  EXPECT_EQ(ParseError({"threads", "start", "2", "3"}).message,
            "threads start: unexpected argument '3'");
  EXPECT_EQ(ParseError({"threads", "start", "2", "--now"}).message,
            "threads start: unknown flag --now");
}

TEST(RetryctlArgsTest, ThreadsStopByCount) {
  Invocation invocation = Parse({"threads", "stop", "2"});
  EXPECT_EQ(invocation.command, Command::kThreadsStop);
  EXPECT_EQ(invocation.count, 2);
  EXPECT_THAT(invocation.thread_ids, IsEmpty());
  EXPECT_TRUE(invocation.graceful);

  invocation = Parse({"threads", "stop", "--now", "1"});
  EXPECT_EQ(invocation.count, 1);
  EXPECT_FALSE(invocation.graceful);
}

TEST(RetryctlArgsTest, ThreadsStopByIdInEveryForm) {
  EXPECT_THAT(Parse({"threads", "stop", "--id", "3", "--id", "4"}).thread_ids, ElementsAre(3, 4));
  EXPECT_THAT(Parse({"threads", "stop", "--id", "3", "4"}).thread_ids, ElementsAre(3, 4));
  EXPECT_THAT(Parse({"threads", "stop", "--id", "3,4,7"}).thread_ids, ElementsAre(3, 4, 7));
  EXPECT_THAT(Parse({"threads", "stop", "--id=5", "--now"}).thread_ids, ElementsAre(5));
  const Invocation invocation = Parse({"threads", "stop", "--id", "0", "--now"});
  EXPECT_THAT(invocation.thread_ids, ElementsAre(0));
  EXPECT_EQ(invocation.count, 0);
  EXPECT_FALSE(invocation.graceful);
}

TEST(RetryctlArgsTest, ThreadsStopErrors) {
  UsageError error = ParseError({"threads", "stop"});
  EXPECT_EQ(error.message,
            "threads stop: say how many retry threads to stop (N) or which (--id ID)");
  EXPECT_EQ(error.topic, "threads");
  EXPECT_EQ(ParseError({"threads", "stop", "--now"}).message,
            "threads stop: say how many retry threads to stop (N) or which (--id ID)");
  EXPECT_EQ(ParseError({"threads", "stop", "2", "--id", "3"}).message,
            "threads stop: give either N (how many) or --id (which), not both");
  EXPECT_EQ(ParseError({"threads", "stop", "--id"}).message,
            "threads stop: --id needs a thread id, e.g. --id 3");
  EXPECT_EQ(ParseError({"threads", "stop", "--id", "--now"}).message,
            "threads stop: --id needs a thread id, e.g. --id 3");
  EXPECT_EQ(ParseError({"threads", "stop", "--id", "x"}).message,
            "threads stop: --id: 'x' is not a thread id (a number such as 3)");
  EXPECT_EQ(ParseError({"threads", "stop", "--id=3,,4"}).message,
            "threads stop: --id: '3,,4' is not a thread id (a number such as 3)");
  EXPECT_EQ(ParseError({"threads", "stop", "0"}).message,
            "threads stop: N must be a whole number of at least 1, got '0'");
  EXPECT_EQ(ParseError({"threads", "stop", "1", "2"}).message,
            "threads stop: unexpected argument '2'");
  EXPECT_EQ(ParseError({"threads", "stop", "1", "--graceful"}).message,
            "threads stop: unknown flag --graceful");
  EXPECT_EQ(ParseError({"threads", "stop", "1", "--now=yes"}).message,
            "threads stop: --now takes no value");
}

TEST(RetryctlArgsTest, ThreadsNeedsASubcommand) {
  UsageError error = ParseError({"threads"});
  EXPECT_EQ(error.message, "threads: missing 'start N', 'stop N | --id ID' or 'set N'");
  EXPECT_EQ(error.topic, "threads");
  EXPECT_EQ(ParseError({"threads", "list"}).message,
            "threads: unknown subcommand 'list' (use start, stop or set)");
}

// ---- inorder ------------------------------------------------------------------

TEST(RetryctlArgsTest, InOrder) {
  Invocation invocation = Parse({"inorder", "on"});
  EXPECT_EQ(invocation.command, Command::kInOrder);
  EXPECT_TRUE(invocation.in_order);
  EXPECT_FALSE(invocation.drain);

  invocation = Parse({"inorder", "on", "--drain"});
  EXPECT_TRUE(invocation.in_order);
  EXPECT_TRUE(invocation.drain);

  invocation = Parse({"inorder", "--drain", "on"});
  EXPECT_TRUE(invocation.drain);

  invocation = Parse({"inorder", "off"});
  EXPECT_FALSE(invocation.in_order);
  EXPECT_FALSE(invocation.drain);
}

TEST(RetryctlArgsTest, InOrderErrors) {
  UsageError error = ParseError({"inorder"});
  EXPECT_EQ(error.message, "inorder: missing 'on' or 'off'");
  EXPECT_EQ(error.topic, "inorder");
  EXPECT_EQ(ParseError({"inorder", "true"}).message, "inorder: expected 'on' or 'off', got 'true'");
  EXPECT_EQ(ParseError({"inorder", "off", "--drain"}).message,
            "inorder: --drain applies only to 'inorder on'");
  EXPECT_EQ(ParseError({"inorder", "on", "off"}).message, "inorder: unexpected argument 'off'");
  EXPECT_EQ(ParseError({"inorder", "on", "--force"}).message, "inorder: unknown flag --force");
}

// ---- ordering -----------------------------------------------------------------

TEST(RetryctlArgsTest, Ordering) {
  struct Case {
    std::string word;
    OrderingMode mode;
  };
  for (const Case& c : std::vector<Case>{{"unordered", OrderingMode::kUnordered},
                                         {"UNORDERED", OrderingMode::kUnordered},
                                         {"key", OrderingMode::kKey},
                                         {"Key", OrderingMode::kKey},
                                         {"in-order", OrderingMode::kInOrder},
                                         {"IN_ORDER", OrderingMode::kInOrder},
                                         {"In-Order", OrderingMode::kInOrder},
                                         // The API's current names too.
                                         {"ORDERING_UNORDERED", OrderingMode::kUnordered},
                                         {"ORDERING_KEY", OrderingMode::kKey},
                                         {"ORDERING_IN_ORDER", OrderingMode::kInOrder},
                                         {"ordering-in-order", OrderingMode::kInOrder}}) {
    const Invocation invocation = Parse({"ordering", c.word});
    EXPECT_EQ(invocation.command, Command::kOrdering) << c.word;
    EXPECT_EQ(invocation.ordering, c.mode) << c.word;
    EXPECT_FALSE(invocation.drain) << c.word;
  }
  Invocation invocation = Parse({"ordering", "in-order", "--drain"});
  EXPECT_EQ(invocation.ordering, OrderingMode::kInOrder);
  EXPECT_TRUE(invocation.drain);
  invocation = Parse({"ordering", "--drain", "IN-ORDER"});
  EXPECT_EQ(invocation.ordering, OrderingMode::kInOrder);
  EXPECT_TRUE(invocation.drain);
}

TEST(RetryctlArgsTest, OrderingErrors) {
  UsageError error = ParseError({"ordering"});
  EXPECT_EQ(error.message, "ordering: missing MODE: unordered, in-order or key");
  EXPECT_EQ(error.topic, "ordering");
  EXPECT_EQ(ParseError({"ordering", "sorted"}).message,
            "ordering: expected 'unordered', 'in-order' or 'key', got 'sorted'");
  EXPECT_EQ(ParseError({"ordering", "key", "--drain"}).message,
            "ordering: --drain applies only to 'ordering in-order'");
  EXPECT_EQ(ParseError({"ordering", "unordered", "--drain"}).message,
            "ordering: --drain applies only to 'ordering in-order'");
  EXPECT_EQ(ParseError({"ordering", "key", "unordered"}).message,
            "ordering: unexpected argument 'unordered'");
  EXPECT_EQ(ParseError({"ordering", "key", "--force"}).message, "ordering: unknown flag --force");
  EXPECT_EQ(ParseError({"ordering", "in-order", "--drain=yes"}).message,
            "ordering: --drain takes no value");
}

// ---- watch --------------------------------------------------------------------

TEST(RetryctlArgsTest, WatchDefaults) {
  const Invocation invocation = Parse({"watch"});
  EXPECT_EQ(invocation.command, Command::kWatch);
  EXPECT_EQ(invocation.interval_ms, 1000u);
  EXPECT_THAT(invocation.thread_ids, IsEmpty());
  EXPECT_EQ(invocation.max_snapshots, 0);
}

TEST(RetryctlArgsTest, WatchFlags) {
  const Invocation invocation = Parse(
      {"watch", "--interval", "250", "--thread", "1", "--thread=2,3", "--count", "5", "--json"});
  EXPECT_EQ(invocation.interval_ms, 250u);
  EXPECT_THAT(invocation.thread_ids, ElementsAre(1, 2, 3));
  EXPECT_EQ(invocation.max_snapshots, 5);
  EXPECT_TRUE(invocation.flags.json);
  EXPECT_EQ(Parse({"watch", "--interval=100"}).interval_ms, 100u);
  EXPECT_EQ(Parse({"watch", "--interval=60000"}).interval_ms, 60000u);
}

TEST(RetryctlArgsTest, WatchErrors) {
  for (const std::string bad : {"99", "60001", "abc", "0"}) {
    const UsageError error = ParseError({"watch", "--interval", bad});
    EXPECT_EQ(
        error.message,
        "watch: --interval must be a number of milliseconds in 100..60000, got '" + bad + "'");
    EXPECT_EQ(error.topic, "watch");
  }
  EXPECT_EQ(ParseError({"watch", "--interval"}).message,
            "watch: --interval needs a value in milliseconds");
  EXPECT_EQ(ParseError({"watch", "--count", "0"}).message,
            "watch: --count must be a whole number of at least 1, got '0'");
  EXPECT_EQ(ParseError({"watch", "--count"}).message, "watch: --count needs a number of snapshots");
  EXPECT_EQ(ParseError({"watch", "--thread"}).message,
            "watch: --thread needs a thread id, e.g. --thread 3");
  EXPECT_EQ(ParseError({"watch", "fast"}).message, "watch: unexpected argument 'fast'");
  EXPECT_EQ(ParseError({"watch", "--id", "3"}).message, "watch: unknown flag --id");
}

// ---- help ---------------------------------------------------------------------

TEST(RetryctlArgsTest, HelpInEveryForm) {
  struct Case {
    std::vector<std::string> args;
    std::string topic;
  };
  for (const Case& c : std::vector<Case>{
           {{"--help"}, ""},
           {{"-h"}, ""},
           {{"help"}, ""},
           {{"help", "threads"}, "threads"},
           {{"threads", "--help"}, "threads"},
           {{"threads", "start", "--help"}, "threads"},
           {{"threads", "stop", "-h"}, "threads"},
           {{"--help", "watch"}, "watch"},
           {{"watch", "--interval", "5", "--help"}, "watch"},
           {{"inorder", "--help"}, "inorder"},
           {{"ordering", "key", "--help"}, "ordering"},
           {{"help", "ordering"}, "ordering"},
           {{"status", "--help"}, "status"},
       }) {
    const Invocation invocation = Parse(c.args);
    EXPECT_EQ(invocation.command, Command::kHelp) << c.args[0];
    EXPECT_EQ(invocation.help_topic, c.topic) << c.args[0];
  }
  EXPECT_EQ(ParseError({"frobnicate", "--help"}).message, "unknown command 'frobnicate'");
  EXPECT_EQ(ParseError({"help", "frobnicate"}).message, "unknown command 'frobnicate'");
}

// ---- through the tool: exit status and stderr ------------------------------------

TEST(RetryctlUsageTest, UsageErrorExitsTwoWithMessageAndHint) {
  RunResult run = RunTool({"threads", "start"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "retryctl: threads start: missing N, the number of retry threads to start\n"
            "Run 'retryctl threads --help' for usage.\n");

  run = RunTool({"watch", "--interval", "10"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_THAT(run.err, HasSubstr("Run 'retryctl watch --help' for usage.\n"));

  run = RunTool({});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_EQ(run.err, "retryctl: missing COMMAND\nRun 'retryctl --help' for usage.\n");

  run = RunTool({"inorder", "maybe"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_EQ(run.err,
            "retryctl: inorder: expected 'on' or 'off', got 'maybe'\n"
            "Run 'retryctl inorder --help' for usage.\n");
}

TEST(RetryctlUsageTest, OverviewHelpListsCommandsFlagsExitCodesAndExamples) {
  const RunResult run = RunTool({"--help"});
  EXPECT_EQ(run.exit_code, kExitOk);
  EXPECT_EQ(run.err, "");
  for (const char* expected : {"Usage:\n  retryctl [FLAGS] COMMAND [ARGS]",
                               "status",
                               "threads start N",
                               "threads stop N | --id ID... [--now]",
                               "inorder on [--drain] | off",
                               "ordering MODE [--drain]",
                               "retryctl ordering key",
                               "watch [--interval MS] [--thread ID...] [--count N]",
                               "--addr HOST:PORT",
                               "RETRYD_ADDR",
                               "--token-file FILE",
                               "RETRYD_TOKEN_FILE",
                               "--tls-ca FILE",
                               "--timeout S",
                               "--json",
                               "Exit status:",
                               "FAILED_PRECONDITION",
                               "2      usage error",
                               "64+N   the call failed with gRPC status code N",
                               "version",
                               "Examples:",
                               "retryctl --json status"}) {
    EXPECT_THAT(run.out, HasSubstr(expected));
  }
  EXPECT_EQ(RunTool({"help"}).out, run.out);
}

TEST(RetryctlUsageTest, CommandHelpIsSpecific) {
  RunResult run = RunTool({"threads", "--help"});
  EXPECT_EQ(run.exit_code, kExitOk);
  for (const char* expected :
       {"retryctl threads start N", "retryctl threads stop --id ID [--id ID...] [--now]",
        "N is required unless --id is given", "--now", "graceful", "FAILED_PRECONDITION",
        "Examples:", "retryctl threads stop --id 3 --id 5 --now"}) {
    EXPECT_THAT(run.out, HasSubstr(expected));
  }
  EXPECT_THAT(run.out, Not(HasSubstr("--interval")));

  run = RunTool({"watch", "--help"});
  EXPECT_EQ(run.exit_code, kExitOk);
  for (const char* expected :
       {"--interval MS", "100..60000", "--thread ID...", "--count N", "Ctrl-C", "not a terminal",
        "PROC/s", "LAST ERROR", "retryctl watch --count 5"}) {
    EXPECT_THAT(run.out, HasSubstr(expected));
  }

  run = RunTool({"inorder", "--help"});
  EXPECT_EQ(run.exit_code, kExitOk);
  for (const char* expected : {"retryctl inorder on [--drain]", "retryctl inorder off", "--drain",
                               "DEADLINE_EXCEEDED", "--timeout"}) {
    EXPECT_THAT(run.out, HasSubstr(expected));
  }

  run = RunTool({"ordering", "--help"});
  EXPECT_EQ(run.exit_code, kExitOk);
  for (const char* expected :
       {"retryctl ordering unordered", "retryctl ordering key",
        "retryctl ordering in-order [--drain]", "case-insensitive", "parked",
        "(within an input partition)", "DEADLINE_EXCEEDED", "FAILED_PRECONDITION"}) {
    EXPECT_THAT(run.out, HasSubstr(expected));
  }

  run = RunTool({"status", "--help"});
  EXPECT_EQ(run.exit_code, kExitOk);
  EXPECT_THAT(run.out, HasSubstr("retryctl status"));
  EXPECT_THAT(run.out, HasSubstr("retry backlog"));
}

}  // namespace
}  // namespace retryd::retryctl
