// The `retryd` binary end to end, as a user runs it: a child process with a
// config file, pointed at the test binary's mock cluster (or at its own
// embedded broker in demo mode), stopped by signals. Checks what an operator
// relies on: exit statuses, error messages that name the file, line and
// field, and that every record reaches its outcome across a crash (at least
// once) and across a graceful restart (exactly once).
//
// Every wait is bounded; every child is killed and reaped by its owner, and
// dies with the test process (PR_SET_PDEATHSIG) if the test is killed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/handoff/producer_slot.h"
#include "tests/support/outcomes.h"
#include "tests/support/retryd_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::Broker;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::DescribeStatus;
using ::retryd::testing::ExitedWith;
using ::retryd::testing::KafkaDebugConfig;
using ::retryd::testing::Keys;
using ::retryd::testing::kRetrydBinary;
using ::retryd::testing::MixedKeys;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::ReadFileOrEmpty;
using ::retryd::testing::RetrydProcess;
using ::retryd::testing::TempDir;
using ::retryd::testing::TestTopics;
using ::retryd::testing::WaitFor;
using ::testing::HasSubstr;

constexpr char kSourceDir[] = RETRYD_SOURCE_DIR;

// How long a stopping retryd may take: its shutdown_timeout_ms (10 s in the
// configs below, 30 s by default) plus leaving the groups.
constexpr absl::Duration kExitTimeout = absl::Seconds(60);

// Where each key ended up, and how often.
struct Outcomes {
  std::multiset<std::string> output, dlq;

  static Outcomes Read(const TestTopics& topics) {
    return {Keys(ReadAll(topics.output)), Keys(ReadAll(topics.dlq))};
  }
  size_t total() const { return output.size() + dlq.size(); }
  // Keys not (yet) at their expected outcome: perm- in the dead-letter
  // topic, everything else in the output topic.
  std::vector<std::string> Missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> missing;
    for (const std::string& k : keys) {
      const auto& want = absl::StartsWith(k, "perm-") ? dlq : output;
      if (!want.contains(k)) missing.push_back(k);
    }
    return missing;
  }
  // Keys at an outcome they must never reach.
  std::vector<std::string> Misplaced() const {
    std::vector<std::string> wrong;
    for (const std::string& k : output) {
      if (absl::StartsWith(k, "perm-")) wrong.push_back("output:" + k);
    }
    for (const std::string& k : dlq) {
      if (!absl::StartsWith(k, "perm-")) wrong.push_back("dlq:" + k);
    }
    return wrong;
  }
  // Records beyond one per distinct key.
  size_t Duplicates() const {
    std::set<std::string> distinct(output.begin(), output.end());
    distinct.insert(dlq.begin(), dlq.end());
    return total() - distinct.size();
  }
};

std::string First(const std::vector<std::string>& v, size_t n = 10) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < n; ++i) absl::StrAppend(&s, i ? ", " : "", v[i]);
  if (v.size() > n) absl::StrAppend(&s, ", ... (", v.size(), " in all)");
  return s;
}

// A config on Broker() over `topics` in group `group`: fast commits and
// backoff, one retry thread, the simulate processor with `latency_ms`.
std::string ClusterConfig(const TestTopics& topics, const std::string& group, uint32_t latency_ms) {
  // RETRYD_KAFKA_DEBUG=cgrp,fetch,... turns on librdkafka's debug contexts.
  const std::string debug = KafkaDebugConfig();
  return absl::StrCat(
      "# Written by retryd_e2e_test.\n"
      "listen_address: \"127.0.0.1:0\"\n"
      "kafka {\n"
      "  bootstrap_servers: \"",
      Broker().bootstrap_servers(),
      "\"\n"
      "  properties { key: \"session.timeout.ms\" value: \"6000\" }\n"
      "  properties { key: \"heartbeat.interval.ms\" value: \"1000\" }\n"
      // librdkafka's own refresh on the mock, as TestEngineOptions explains.
      "  properties { key: \"topic.metadata.refresh.interval.ms\" value: \"300000\" }\n",
      debug,
      "}\n"
      "group_id: \"",
      group,
      "\"\n"
      "input_topics: \"",
      topics.input,
      "\"\n"
      "output_topic: \"",
      topics.output,
      "\"\n"
      "dead_letter_topic: \"",
      topics.dlq,
      "\"\n"
      "commit_interval_ms: 200\n"
      "shutdown_timeout_ms: 10000\n"
      "retry {\n"
      "  topic: \"",
      topics.retry,
      "\"\n"
      "  threads: 1\n"
      "  seed: 42\n"
      "  backoff { initial_ms: 20 max_ms: 200 }\n"
      "}\n"
      "processor {\n"
      "  simulate {\n"
      "    seed: 7\n"
      "    latency_ms: ",
      latency_ms,
      "\n"
      "    rule { key_prefix: \"perm-\" permanent: true }\n"
      "    rule { key_prefix: \"flaky-\" fail_attempts: 2 }\n"
      "  }\n"
      "}\n");
}

// Each test gets a fresh directory for its config files and the children's
// logs. On failure the logs' tails are printed and the directory is kept.
class RetrydE2eTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) KeepLogsAndPrintTails(dir_, 40);
  }

  std::string Path(const std::string& name) const { return dir_.Path(name); }

  TempDir dir_;
};

// Killed mid-run with SIGKILL, retryd restarted in the same group resumes
// from its committed offsets: every record reaches its outcome (at least
// once), and the restart does not reprocess what the first run had done.
TEST_F(RetrydE2eTest, CrashRecovery) {
  const TestTopics topics = CreateTopics("crash");
  const std::vector<std::string> keys = MixedKeys(4000);
  ProduceKeys(topics.input, keys);
  // 1 ms per attempt: the run takes several seconds, so the kill lands in it.
  const std::string config = dir_.WriteFile(
      "crash.textproto", ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/1));

  {
    RetrydProcess first(Path("run1"), {"--config", config, "--summary_interval_s", "1"});
    ASSERT_TRUE(first.started());
    ASSERT_TRUE(WaitFor([&] { return !first.Running() || ReadAll(topics.output).size() >= 600; },
                        absl::Seconds(120)))
        << "fewer than 600 records in the output after 120 s";
    ASSERT_TRUE(first.Running()) << "retryd "
                                 << DescribeStatus(*first.WaitExit(absl::ZeroDuration()));
    first.Signal(SIGKILL);
    const std::optional<int> status = first.WaitExit(absl::Seconds(30));
    ASSERT_TRUE(status.has_value()) << "retryd survived SIGKILL for 30 s";
    EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << DescribeStatus(*status);
  }
  const Outcomes before = Outcomes::Read(topics);
  const size_t done_before = keys.size() - before.Missing(keys).size();
  std::printf("first run, killed: %zu records in output+dlq, %zu of %zu keys done\n",
              before.total(), done_before, keys.size());
  // Otherwise the kill was not mid-run and the test proves nothing.
  ASSERT_LT(done_before, keys.size()) << "the first run finished before it was killed";

  Outcomes after;
  {
    RetrydProcess second(Path("run2"), {"--config", config, "--summary_interval_s", "1"});
    ASSERT_TRUE(second.started());
    const bool all_done = WaitFor(
        [&] {
          if (!second.Running()) return true;
          after = Outcomes::Read(topics);
          return after.Missing(keys).empty();
        },
        absl::Seconds(180));
    ASSERT_TRUE(second.Running()) << "retryd "
                                  << DescribeStatus(*second.WaitExit(absl::ZeroDuration()));
    ASSERT_TRUE(all_done) << "after 180 s, keys missing: " << First(after.Missing(keys));
    second.Signal(SIGTERM);
    EXPECT_TRUE(ExitedWith(second.WaitExit(kExitTimeout), 0));
  }
  after = Outcomes::Read(topics);

  EXPECT_THAT(after.Missing(keys), ::testing::IsEmpty());
  EXPECT_THAT(after.Misplaced(), ::testing::IsEmpty());
  const size_t duplicates = after.Duplicates();
  std::printf("after restart: %zu records in output+dlq for %zu keys, %zu duplicates\n",
              after.total(), keys.size(), duplicates);
  EXPECT_LT(duplicates, keys.size());
  // A restart from scratch would redo everything the first run did, so
  // duplicates would be at least before.total(). Fewer proves the first run
  // committed offsets before it was killed.
  EXPECT_LT(duplicates, before.total())
      << "the second run reprocessed everything: offsets were not committed before the crash";
}

// Key order with two retryd processes sharing the groups, one killed with
// SIGKILL mid-run: the other takes its partitions over, learns the keys
// parked in the retry topic, and every key's records still reach the output
// in input order (judged by their first copies), nothing lost.
TEST_F(RetrydE2eTest, KeyOrderAcrossTwoProcessesAndAKill) {
  const TestTopics topics = CreateTopics("key-e2e", 4);
  std::vector<std::string> keys;
  for (int i = 0; i < 6000; ++i) {
    const int k = i % 150;
    keys.push_back(absl::StrCat(k % 10 == 0 ? "flaky-" : "ok-", k));
  }
  ProduceKeys(topics.input, keys);
  const std::vector<Record> input = ReadAll(topics.input);
  const std::string config =
      dir_.WriteFile("key.textproto",
                     absl::StrCat(ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/1),
                                  "ordering: ORDERING_KEY\n"));

  RetrydProcess survivor(Path("survivor"), {"--config", config});
  ASSERT_TRUE(survivor.started());
  {
    RetrydProcess killed(Path("killed"), {"--config", config});
    ASSERT_TRUE(killed.started());
    ASSERT_TRUE(WaitFor([&] { return !killed.Running() || ReadAll(topics.output).size() >= 1500; },
                        absl::Seconds(120)))
        << "fewer than 1500 records in the output after 120 s";
    ASSERT_TRUE(killed.Running()) << "retryd "
                                  << DescribeStatus(*killed.WaitExit(absl::ZeroDuration()));
    killed.Signal(SIGKILL);
    ASSERT_TRUE(killed.WaitExit(absl::Seconds(30)).has_value());
  }
  ASSERT_GT(testing::LostRecords(input, ReadAll(topics.output), ReadAll(topics.dlq)), 0)
      << "the run was over before the kill: the test proves nothing";
  const bool all_done = WaitFor(
      [&] {
        return !survivor.Running() ||
               testing::LostRecords(input, ReadAll(topics.output), ReadAll(topics.dlq)) == 0;
      },
      absl::Seconds(180));
  ASSERT_TRUE(survivor.Running()) << "retryd "
                                  << DescribeStatus(*survivor.WaitExit(absl::ZeroDuration()));
  ASSERT_TRUE(all_done) << "after 180 s, records are missing";
  survivor.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(survivor.WaitExit(kExitTimeout), 0));

  const std::vector<std::string> out_of_order = testing::KeysOutOfOrder(ReadAll(topics.output));
  EXPECT_TRUE(out_of_order.empty())
      << out_of_order.size() << " keys out of order: " << First(out_of_order);
  // Key order was engaged: later records of failing keys followed them.
  int followers = 0;
  for (const Record& r : ReadAll(topics.retry)) {
    followers += absl::StrContains(testing::HeaderValue(r, "retryd-error"), "follows") ? 1 : 0;
  }
  EXPECT_GT(followers, 0);
}

// A graceful stop (SIGTERM) commits everything done: a restart in the same
// group processes only new records.
TEST_F(RetrydE2eTest, GracefulStopCommits) {
  const TestTopics topics = CreateTopics("graceful");
  const std::string config = dir_.WriteFile(
      "graceful.textproto", ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/0));
  const std::vector<std::string> keys = MixedKeys(500);

  Outcomes first_run;
  {
    RetrydProcess first(Path("run1"), {"--config", config});
    ASSERT_TRUE(first.started());
    ProduceKeys(topics.input, keys);
    const bool all_done = WaitFor(
        [&] {
          if (!first.Running()) return true;
          first_run = Outcomes::Read(topics);
          return first_run.Missing(keys).empty();
        },
        absl::Seconds(120));
    ASSERT_TRUE(first.Running()) << "retryd "
                                 << DescribeStatus(*first.WaitExit(absl::ZeroDuration()));
    ASSERT_TRUE(all_done) << "after 120 s, keys missing: " << First(first_run.Missing(keys));
    first.Signal(SIGTERM);
    ASSERT_TRUE(ExitedWith(first.WaitExit(kExitTimeout), 0));
  }
  first_run = Outcomes::Read(topics);
  EXPECT_THAT(first_run.Misplaced(), ::testing::IsEmpty());
  std::printf("first run: %zu records in output+dlq for %zu keys, %zu duplicates\n",
              first_run.total(), keys.size(), first_run.Duplicates());

  {
    RetrydProcess second(Path("run2"), {"--config", config});
    ASSERT_TRUE(second.started());
    ProduceKeys(topics.input, {"ok-last"});
    ASSERT_TRUE(WaitFor(
        [&] { return !second.Running() || Keys(ReadAll(topics.output)).contains("ok-last"); },
        absl::Seconds(120)))
        << "ok-last not in the output after 120 s";
    ASSERT_TRUE(second.Running()) << "retryd "
                                  << DescribeStatus(*second.WaitExit(absl::ZeroDuration()));
    second.Signal(SIGTERM);
    EXPECT_TRUE(ExitedWith(second.WaitExit(kExitTimeout), 0));
  }
  const Outcomes second_run = Outcomes::Read(topics);

  // What the second run added, beyond the first run's records.
  std::multiset<std::string> added_output, added_dlq;
  std::set_difference(second_run.output.begin(), second_run.output.end(), first_run.output.begin(),
                      first_run.output.end(), std::inserter(added_output, added_output.end()));
  std::set_difference(second_run.dlq.begin(), second_run.dlq.end(), first_run.dlq.begin(),
                      first_run.dlq.end(), std::inserter(added_dlq, added_dlq.end()));
  EXPECT_THAT(added_output, ::testing::ElementsAre("ok-last"))
      << "the restart reprocessed records the graceful stop should have committed";
  EXPECT_THAT(added_dlq, ::testing::IsEmpty())
      << "the restart reprocessed records the graceful stop should have committed";
}

// Config and command-line errors exit with status 2 and say where the
// problem is.
TEST_F(RetrydE2eTest, BadConfigExits2) {
  {
    SCOPED_TRACE("invalid field on line 3");
    const std::string config = dir_.WriteFile("bad.textproto",
                                              "# An invalid config: max_attempts must be 1..1000.\n"
                                              "group_id: \"bad\"\n"
                                              "retry { max_attempts: 0 }\n"
                                              "kafka { bootstrap_servers: \"127.0.0.1:9\" }\n"
                                              "input_topics: \"in\"\n"
                                              "processor { simulate {} }\n");
    RetrydProcess retryd(Path("bad"), {"--config", config});
    ASSERT_TRUE(retryd.started());
    EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 2));
    EXPECT_THAT(retryd.Stderr(), HasSubstr(config + ":3:"));
    EXPECT_THAT(retryd.Stderr(), HasSubstr("retry.max_attempts"));
  }
  {
    SCOPED_TRACE("no --config");
    RetrydProcess retryd(Path("no-config"), {});
    ASSERT_TRUE(retryd.started());
    EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 2));
    EXPECT_THAT(retryd.Stderr(), HasSubstr("--config"));
  }
  {
    SCOPED_TRACE("nonexistent config file");
    const std::string config = Path("does-not-exist.textproto");
    RetrydProcess retryd(Path("missing-file"), {"--config", config});
    ASSERT_TRUE(retryd.started());
    EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 2));
    EXPECT_THAT(retryd.Stderr(), HasSubstr(config));
  }
}

// --help lists retryd's own flags (not Abseil's) with source paths relative
// to the repository; --version prints the release and exits 0.
TEST_F(RetrydE2eTest, HelpAndVersion) {
  {
    RetrydProcess retryd(Path("help"), {"--help"});
    ASSERT_TRUE(retryd.started());
    ASSERT_TRUE(retryd.WaitExit(kExitTimeout).has_value());
    const std::string help = retryd.Stdout() + retryd.Stderr();
    for (const char* flag : {"--config", "--bootstrap_servers", "--listen", "--demo"}) {
      EXPECT_THAT(help, HasSubstr(flag));
    }
    EXPECT_THAT(help, HasSubstr("Flags from server/main.cc:"));
    EXPECT_THAT(help, ::testing::Not(HasSubstr("No flags matched")));
  }
  {
    RetrydProcess retryd(Path("version"), {"--version"});
    ASSERT_TRUE(retryd.started());
    EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));
    EXPECT_THAT(retryd.Stdout(), ::testing::StartsWith("retryd "));
  }
}

// On a real cluster retryd creates no topics: a missing input topic is a
// runtime failure (status 1) that names it.
TEST_F(RetrydE2eTest, MissingTopicOnRealClusterExits1) {
  TestTopics topics = CreateTopics("missing");
  topics.input = absl::StrCat("never-created-", getpid(), "-", topics.input);
  const std::string config = dir_.WriteFile(
      "missing.textproto", ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/0));

  RetrydProcess retryd(Path("run"), {"--config", config});
  ASSERT_TRUE(retryd.started());
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 1));
  EXPECT_THAT(retryd.Stderr(), HasSubstr(topics.input));
  EXPECT_THAT(retryd.Stderr(), ::testing::Not(HasSubstr(topics.output)));
}

// A bootstrap address where nothing answers: retryd says which address it
// could not reach and exits 1 within its start-up check, rather than
// waiting for Kafka forever or starting threads that can never consume.
TEST_F(RetrydE2eTest, UnreachableBrokerAtStartExits1) {
  // A loopback port bound but not listening: connections to it are refused,
  // and no other process can take it while the socket is open.
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string unreachable = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));

  TestTopics topics = CreateTopics("unreachable");
  std::string text = ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/0);
  const size_t at = text.find(Broker().bootstrap_servers());
  ASSERT_NE(at, std::string::npos);
  text.replace(at, Broker().bootstrap_servers().size(), unreachable);
  const std::string config = dir_.WriteFile("unreachable.textproto", text);

  RetrydProcess retryd(Path("run"), {"--config", config});
  ASSERT_TRUE(retryd.started());
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 1));
  EXPECT_THAT(retryd.Stderr(),
              HasSubstr(absl::StrCat("cannot read topic metadata from ", unreachable)));
  close(sock);
}

// consumed=N from every summary line in `text`.
std::vector<int64_t> ConsumedCounts(const std::string& text) {
  std::vector<int64_t> counts;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "consumed=")) continue;
    absl::string_view value = line.substr(std::strlen("consumed="));
    value = value.substr(0, value.find(' '));
    int64_t n = 0;
    if (absl::SimpleAtoi(value, &n)) counts.push_back(n);
  }
  return counts;
}

// The demo as the README runs it: embedded broker, synthetic load, summary
// lines; Ctrl-C (SIGINT) stops it cleanly.
TEST_F(RetrydE2eTest, DemoRuns) {
  // --listen and --metrics_address on port 0: the example's fixed ports may
  // be taken by a demo someone is running on the same machine.
  RetrydProcess retryd(
      Path("demo"),
      {"--config", absl::StrCat(kSourceDir, "/deploy/examples/demo.textproto"), "--demo",
       "--summary_interval_s", "1", "--listen", "127.0.0.1:0", "--metrics_address", "127.0.0.1:0"});
  ASSERT_TRUE(retryd.started());
  auto busy_summaries = [&] {
    size_t n = 0;
    for (int64_t consumed : ConsumedCounts(retryd.Stdout())) n += consumed > 0;
    return n;
  };
  ASSERT_TRUE(
      WaitFor([&] { return !retryd.Running() || busy_summaries() >= 2; }, absl::Seconds(90)))
      << "fewer than 2 summary lines with consumed>0 after 90 s";
  ASSERT_TRUE(retryd.Running()) << "retryd "
                                << DescribeStatus(*retryd.WaitExit(absl::ZeroDuration()));
  ASSERT_GE(busy_summaries(), 2u);
  retryd.Signal(SIGINT);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));
}

// kafka.create_topics names the Admin API, which the embedded broker lacks:
// there retryd creates every topic itself as before, says that the block
// does not apply, and runs.
TEST_F(RetrydE2eTest, CreateTopicsOnTheEmbeddedBrokerIsIgnoredWithAWarning) {
  const std::string config = dir_.WriteFile("embedded-create.textproto", R"cfg(
listen_address: "127.0.0.1:0"
kafka { create_topics { partitions: 5 replication_factor: 1 } }
group_id: "embedded-create"
input_topics: "orders"
processor { simulate {} }
)cfg");
  RetrydProcess retryd(Path("embedded-create"),
                       {"--config", config, "--demo", "--summary_interval_s", "1"});
  ASSERT_TRUE(retryd.started());
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!retryd.Running()) return true;
        for (int64_t consumed : ConsumedCounts(retryd.Stdout())) {
          if (consumed > 0) return true;
        }
        return false;
      },
      absl::Seconds(90)))
      << "no summary line with consumed>0 after 90 s";
  ASSERT_TRUE(retryd.Running()) << "retryd "
                                << DescribeStatus(*retryd.WaitExit(absl::ZeroDuration()));
  EXPECT_THAT(retryd.Stderr(),
              HasSubstr("kafka.create_topics does not apply to the embedded broker"));
  EXPECT_THAT(retryd.Stderr(),
              HasSubstr("topics orders, orders.retry, orders.dlq with 3 partitions"));
  retryd.Signal(SIGINT);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));
}

// Each line of `text` as a JSON object (a line that is not one fails the
// test).
std::vector<google::protobuf::Struct> JsonLines(const std::string& text) {
  std::vector<google::protobuf::Struct> objects;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    google::protobuf::Struct object;
    const auto status = google::protobuf::util::JsonStringToMessage(std::string(line), &object);
    EXPECT_TRUE(status.ok()) << "not a JSON object: " << line;
    if (status.ok()) objects.push_back(std::move(object));
  }
  return objects;
}

std::string JsonField(const google::protobuf::Struct& object, const std::string& name) {
  const auto it = object.fields().find(name);
  return it == object.fields().end() ? "" : it->second.string_value();
}

// --log_format=json, for log shippers: every line retryd writes, on stderr
// and stdout, is one JSON object with time, level, component, thread and
// message; librdkafka's lines among them; a secret given through the
// environment appears in none.
TEST_F(RetrydE2eTest, JsonLogsAreOneObjectPerLine) {
  constexpr char kSecret[] = "e2e-json-secret-4f1d";
  ASSERT_EQ(setenv("RETRYD_E2E_JSON_SECRET", kSecret, 1), 0);
  const std::string config = dir_.WriteFile("json-logs.textproto", R"cfg(
listen_address: "127.0.0.1:0"
kafka {
  properties { key: "debug" value: "conf" }
  properties_from_env { key: "sasl.password" value: "RETRYD_E2E_JSON_SECRET" }
}
group_id: "json-logs"
input_topics: "orders"
processor { simulate { rule { key_prefix: "perm-" permanent: true } } }
)cfg");
  RetrydProcess retryd(Path("json-logs"), {"--config", config, "--demo", "--summary_interval_s",
                                           "1", "--verbose", "--log_format=json"});
  ASSERT_TRUE(retryd.started());
  auto busy_summary = [&] {
    for (absl::string_view line : absl::StrSplit(retryd.Stdout(), '\n', absl::SkipEmpty())) {
      google::protobuf::Struct object;
      if (!google::protobuf::util::JsonStringToMessage(std::string(line), &object).ok()) continue;
      const std::string message = JsonField(object, "message");
      if (absl::StartsWith(message, "consumed=") && !absl::StartsWith(message, "consumed=0 ")) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(WaitFor([&] { return !retryd.Running() || busy_summary(); }, absl::Seconds(90)))
      << "no summary line with consumed>0 after 90 s";
  ASSERT_TRUE(retryd.Running()) << "retryd "
                                << DescribeStatus(*retryd.WaitExit(absl::ZeroDuration()));
  retryd.Signal(SIGINT);
  ASSERT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));

  const std::string out = retryd.Stdout();
  const std::string err = retryd.Stderr();
  EXPECT_THAT(out + err, ::testing::Not(HasSubstr(kSecret)));
  std::set<std::string> components;
  bool listening = false;
  for (const std::string* text : {&out, &err}) {
    for (const google::protobuf::Struct& object : JsonLines(*text)) {
      EXPECT_EQ(object.fields_size(), 5);
      for (const char* field : {"time", "level", "component", "thread", "message"}) {
        EXPECT_FALSE(JsonField(object, field).empty()) << field << " missing or empty";
      }
      components.insert(JsonField(object, "component"));
      listening |= absl::StartsWith(JsonField(object, "message"), "control API listening on ");
    }
  }
  EXPECT_TRUE(listening) << "no \"control API listening on\" object on stdout";
  for (const char* component : {"main", "engine", "librdkafka"}) {
    EXPECT_TRUE(components.contains(component)) << "no line of component " << component;
  }
}

// An unknown --log_format is a usage error, said in plain text.
TEST_F(RetrydE2eTest, UnknownLogFormatExits2) {
  RetrydProcess retryd(Path("log-format"), {"--log_format=xml", "--config", "unused"});
  ASSERT_TRUE(retryd.started());
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 2));
  EXPECT_THAT(retryd.Stderr(), HasSubstr("--log_format=xml: must be text or json"));
}

namespace retryctl_e2e {

constexpr char kRetryctlBinary[] = RETRYCTL_BINARY;

struct CommandResult {
  std::optional<int> status;
  std::string out, err;
};

// Runs retryctl to completion (bounded) with `args`.
CommandResult Retryctl(const std::string& log_prefix, const std::vector<std::string>& args) {
  RetrydProcess process(log_prefix, args, kRetryctlBinary);
  CommandResult result;
  result.status = process.WaitExit(absl::Seconds(90));
  result.out = process.Stdout();
  result.err = process.Stderr();
  return result;
}

// The control API address retryd printed, once it has.
std::string ControlAddress(RetrydProcess& retryd) {
  std::string address;
  WaitFor(
      [&] {
        const std::string out = retryd.Stdout();
        const size_t at = out.find("control API listening on ");
        if (at == std::string::npos) return !retryd.Running();
        const size_t start = at + std::strlen("control API listening on ");
        const size_t end = out.find('\n', start);
        if (end == std::string::npos) return false;
        address = out.substr(start, end - start);
        return true;
      },
      absl::Seconds(60));
  return address;
}

}  // namespace retryctl_e2e

// What docs/control-api.md shows an operator doing, with the real binaries: status,
// threads started and stopped, the in-order conflict and its drain, key
// order, watch.
TEST_F(RetrydE2eTest, RetryctlDrivesRetryd) {
  using retryctl_e2e::CommandResult;
  using retryctl_e2e::Retryctl;
  const TestTopics topics = CreateTopics("retryctl");
  const std::string config = dir_.WriteFile(
      "retryctl.textproto", ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/0));
  RetrydProcess retryd(Path("retryd"), {"--config", config, "--summary_interval_s", "0"});
  const std::string address = retryctl_e2e::ControlAddress(retryd);
  ASSERT_FALSE(address.empty()) << "retryd printed no control address";
  int step = 0;
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--addr", address});
    return Retryctl(Path(absl::StrCat("retryctl-", ++step)), args);
  };
  auto status_json = [&] {
    const CommandResult r = run({"--json", "status"});
    EXPECT_TRUE(ExitedWith(r.status, 0)) << r.err;
    return r.out;
  };

  CommandResult r = run({"status"});
  ASSERT_TRUE(ExitedWith(r.status, 0)) << r.err;
  EXPECT_THAT(r.out, HasSubstr("RUNNING"));

  r = run({"threads", "start", "1"});
  ASSERT_TRUE(ExitedWith(r.status, 0)) << r.err;

  r = run({"inorder", "on"});
  EXPECT_TRUE(ExitedWith(r.status, 64 + 9)) << "FAILED_PRECONDITION";
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));

  r = run({"threads", "stop", "1"});
  EXPECT_TRUE(ExitedWith(r.status, 0)) << r.err;

  r = run({"inorder", "on", "--drain"});
  ASSERT_TRUE(ExitedWith(r.status, 0)) << r.err;
  std::string json = status_json();
  EXPECT_THAT(json, HasSubstr("\"in_order\": true"));
  // No retry thread: THREAD_ROLE_RETRY is named once, by the downstream's
  // view of the retry role (downstream.roles), and by no thread.
  size_t retry_named = 0;
  for (size_t at = json.find("\"THREAD_ROLE_RETRY\""); at != std::string::npos;
       at = json.find("\"THREAD_ROLE_RETRY\"", at + 1)) {
    ++retry_named;
  }
  EXPECT_EQ(retry_named, 1u) << json;

  r = run({"threads", "start", "1"});
  EXPECT_TRUE(ExitedWith(r.status, 64 + 9)) << "FAILED_PRECONDITION";
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));

  r = run({"inorder", "off"});
  EXPECT_TRUE(ExitedWith(r.status, 0)) << r.err;
  json = status_json();
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\"in_order\": true")));
  EXPECT_THAT(json, HasSubstr("\"ordering\": \"ORDERING_UNORDERED\""));

  r = run({"ordering", "key"});
  ASSERT_TRUE(ExitedWith(r.status, 0)) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ordering: key\n"));
  r = run({"status"});
  ASSERT_TRUE(ExitedWith(r.status, 0)) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ordering      key ("));
  EXPECT_THAT(status_json(), HasSubstr("\"ordering\": \"ORDERING_KEY\""));
  r = run({"ordering", "key", "--drain"});
  EXPECT_TRUE(ExitedWith(r.status, 2)) << "a usage error: " << r.err;
  r = run({"ordering", "unordered"});
  EXPECT_TRUE(ExitedWith(r.status, 0)) << r.err;

  r = run({"watch", "--count", "2", "--interval", "200"});
  EXPECT_TRUE(ExitedWith(r.status, 0)) << r.err;
  EXPECT_THAT(r.out, HasSubstr("primary"));
  r = run({"--json", "watch", "--count", "2", "--interval", "200"});
  EXPECT_TRUE(ExitedWith(r.status, 0)) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;

  r = run({"threads", "start", "0"});
  EXPECT_TRUE(ExitedWith(r.status, 2)) << "a usage error: " << r.err;

  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));
}

// What docs/control-api.md shows for a stuck record: in order, one record failing
// with a long backoff holds its partition; `retryctl inflight` names it and
// why, `retryctl dlq-record` moves it to the dead-letter topic, and the
// records behind it go on.
TEST_F(RetrydE2eTest, RetryctlFreesAStuckRecord) {
  using retryctl_e2e::CommandResult;
  using retryctl_e2e::Retryctl;
  const TestTopics topics = CreateTopics("retryctl-stuck", 1);
  ProduceKeys(topics.input, {"ok-0", "doomed-1", "ok-2"});
  std::string config = ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/0);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"  threads: 1\n", "  threads: 0\n"},
           {"backoff { initial_ms: 20 max_ms: 200 }",
            "backoff { initial_ms: 600000 max_ms: 600000 }"},
           {"    rule { key_prefix: \"flaky-\" fail_attempts: 2 }\n",
            "    rule { key_prefix: \"doomed-\" fail_attempts: 1000 }\n"}}) {
    const size_t at = config.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    config.replace(at, from.size(), to);
  }
  config += "in_order: true\n";
  RetrydProcess retryd(Path("retryd"), {"--config", dir_.WriteFile("stuck.textproto", config),
                                        "--summary_interval_s", "0"});
  const std::string address = retryctl_e2e::ControlAddress(retryd);
  ASSERT_FALSE(address.empty()) << "retryd printed no control address";
  int step = 0;
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--addr", address});
    return Retryctl(Path(absl::StrCat("retryctl-", ++step)), args);
  };

  CommandResult r;
  ASSERT_TRUE(WaitFor(
      [&] {
        r = run({"inflight"});
        return r.out.find("WAITING_BEHIND") != std::string::npos;
      },
      absl::Seconds(60)))
      << r.out << r.err;
  EXPECT_TRUE(ExitedWith(r.status, 0)) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 records in flight"));
  EXPECT_THAT(r.out, HasSubstr(topics.input + "/0@1"));
  EXPECT_THAT(r.out, HasSubstr("doomed-1"));
  EXPECT_THAT(r.out, HasSubstr("WAITING_DUE"));
  EXPECT_TRUE(WaitFor([&] { return !ReadAll(topics.output).empty(); }, absl::Seconds(30)));
  EXPECT_EQ(Keys(ReadAll(topics.output)), std::multiset<std::string>{"ok-0"}) << "held behind";

  r = run({"dlq-record", topics.input, "0", "1"});
  ASSERT_TRUE(ExitedWith(r.status, 0)) << r.err;
  EXPECT_THAT(r.out, HasSubstr(topics.input + "/0@1 dead-lettered by thread"));
  EXPECT_EQ(Keys(ReadAll(topics.dlq)), std::multiset<std::string>{"doomed-1"});
  EXPECT_TRUE(WaitFor([&] { return ReadAll(topics.output).size() == 2; }, absl::Seconds(30)));
  EXPECT_EQ(Keys(ReadAll(topics.output)), (std::multiset<std::string>{"ok-0", "ok-2"}));

  r = run({"dlq-record", topics.input, "0", "1"});
  EXPECT_TRUE(ExitedWith(r.status, 64 + 5)) << "NOT_FOUND";
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  r = run({"inflight", "--limit", "0"});
  EXPECT_TRUE(ExitedWith(r.status, 2)) << "a usage error: " << r.err;

  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));
}

// A fatal error of the idempotent producer (a produce that timed out once,
// then UNKNOWN_PRODUCER_ID: librdkafka cannot retry it without risking
// duplicates) finishes the producer; retryd replaces it and goes on. One
// that comes back after every replacement is not one a new producer gets
// past: after ProducerSlot::kMaxReplacements of them retryd says so and
// exits with status 1 so that orchestration restarts it.
TEST_F(RetrydE2eTest, FatalProducerErrorThatKeepsComingBackExits1) {
  // One partition and records that all succeed: retryd's produce requests
  // all go to one partition, so the first two meet the errors in turn.
  const TestTopics topics = CreateTopics("fatal-exit", 1);
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) keys.push_back(absl::StrCat("ok-", i));
  ProduceKeys(topics.input, keys);
  // Kafka protocol: API key 0 is Produce; 7 REQUEST_TIMED_OUT, 59
  // UNKNOWN_PRODUCER_ID. Each producer's first request and its retry meet
  // one pair: the first producer's, then each replacement's.
  std::vector<int> errors;
  for (int i = 0; i <= engine::ProducerSlot::kMaxReplacements; ++i) {
    errors.push_back(7);
    errors.push_back(59);
  }
  Broker().PushRequestErrors(0, errors);
  const std::string config = dir_.WriteFile(
      "fatal.textproto", ClusterConfig(topics, topics.input + "-group", /*latency_ms=*/0));

  RetrydProcess retryd(Path("run"), {"--config", config, "--summary_interval_s", "1"});
  ASSERT_TRUE(retryd.started());
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 1));
  Broker().ClearRequestErrors(0);
  EXPECT_THAT(retryd.Stderr(), HasSubstr("fatal producer error"));
  EXPECT_THAT(retryd.Stderr(), HasSubstr("replaced it with a new one (replacement 5)"));
  EXPECT_THAT(retryd.Stderr(), HasSubstr("recovery from a fatal producer error failed"));
  EXPECT_THAT(retryd.Stderr(), HasSubstr("giving up"));
  EXPECT_THAT(retryd.Stderr(), HasSubstr("every primary thread failed"));
}

}  // namespace
}  // namespace retryd
