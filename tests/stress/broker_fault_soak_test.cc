// The broker-fault soak: retryd as a child process on the test binary's
// mock cluster, records flowing (ok-, flaky- and perm- keys) and retry
// threads started and stopped every few seconds over gRPC, while the
// cluster misbehaves in turn: a partition leader goes down and comes back,
// Produce, Fetch, OffsetCommit, JoinGroup and SyncGroup requests fail, a
// broker answers slowly, and every broker goes down at once.
//
// Afterwards, as a user would check: every key is in the output or the
// dead-letter topic, whichever it belongs in (no loss); retryd still runs
// and exits 0 on SIGTERM (no crash); every control call answered within its
// deadline (no deadlock); both groups committed up to the end of their
// topics (no partition left paused); and health was NOT_SERVING while
// Kafka was unreachable and SERVING again after.
//
// One round of faults by default (a minute or two);
// RETRYD_FAULT_SOAK_ROUNDS=N runs N rounds in one retryd process.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/retryd_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/stress/stress_support.h"
#include "tests/support/retryd_process.h"
#include "tests/support/test_cluster.h"

namespace retryd::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

// Kafka protocol API keys and error codes the test injects.
constexpr int16_t kProduce = 0, kFetch = 1, kOffsetCommit = 8, kJoinGroup = 11, kSyncGroup = 14;
constexpr int kNotLeader = 6, kRequestTimedOut = 7, kCoordinatorLoadInProgress = 14,
              kCoordinatorNotAvailable = 15, kNotCoordinator = 16, kRebalanceInProgress = 27;

// How long a stopping retryd may take: shutdown_timeout_ms plus leaving
// the groups, with room for a slow machine.
constexpr absl::Duration kExitTimeout = absl::Seconds(60);
// The deadline of a start: it answers once the new threads have joined
// their group or, failing that (a coordinator down, joins refused), when
// the deadline is near, with the threads it started. Short enough to keep
// the churn going through the faults.
constexpr absl::Duration kStartDeadline = absl::Seconds(15);
// The deadline of a stop, which must finish what it began: up to
// shutdown_timeout_ms for the leaving threads' hand-offs, as much again for
// the others' checkpoint, and a rebalance (the mock's lasts the session
// timeout), with the brokers down as often as not.
constexpr absl::Duration kStopDeadline = absl::Seconds(60);
// The deadline of GetStatus and health checks, which never wait for Kafka.
constexpr absl::Duration kQuickDeadline = absl::Seconds(10);

// Starts and stops retry threads on a thread of its own until Stop(): one
// or two at a time, by count or by id, gracefully or not, a few seconds
// apart. Starts go through `starter`, stops through `stopper`, every call
// through `log`.
class RetryThreadChurn {
 public:
  RetryThreadChurn(RetrydClient& starter, RetrydClient& stopper, RpcLog& log, absl::Duration pause)
      : starter_(starter), stopper_(stopper), log_(log), pause_(pause), thread_([this] {
          Run();
        }) {}
  ~RetryThreadChurn() { Stop(); }

  // Ends after the cycle in progress, leaving the threads the config started.
  void Stop() {
    if (!thread_.joinable()) return;
    stop_.Notify();
    thread_.join();
  }
  int cycles() const { return cycles_.load(); }

 private:
  void Run() {
    for (int i = 0; !stop_.HasBeenNotified(); ++i) {
      const int count = 1 + i % 2;
      std::vector<uint32_t> ids;
      const absl::Status started = log_.Record("StartRetryThreads", [&] {
        absl::StatusOr<v1::StartRetryThreadsResponse> r = starter_.StartRetryThreads(count);
        if (r.ok()) ids.assign(r->thread_ids().begin(), r->thread_ids().end());
        return r.status();
      });
      // The failure is in the log, which the test checks at the end; after
      // it, which threads run is unknown, so the churn ends.
      if (!started.ok()) return;
      stop_.WaitForNotificationWithTimeout(pause_);
      const bool graceful = i % 3 != 2;
      // A failure is in the log, which the test checks at the end.
      log_.Record("StopRetryThreads",
                  [&] {
                    return i % 2 == 0 ? stopper_.StopRetryThreadsById(ids, graceful).status()
                                      : stopper_.StopRetryThreads(count, graceful).status();
                  })
          .IgnoreError();
      cycles_.fetch_add(1);
      stop_.WaitForNotificationWithTimeout(pause_);
    }
  }

  RetrydClient& starter_;
  RetrydClient& stopper_;
  RpcLog& log_;
  const absl::Duration pause_;
  absl::Notification stop_;
  std::atomic<int> cycles_{0};
  std::thread thread_;  // Last: it uses the fields above.
};

// `errors` over and over, `times` times.
std::vector<int> Repeat(const std::vector<int>& errors, int times) {
  std::vector<int> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), errors.begin(), errors.end());
  return out;
}

class BrokerFaultSoakTest : public StressTest {
 protected:
  // The health of the whole server ("") as its name, or the call's error.
  std::string Health(RetrydClient& client) {
    std::string answer;
    log_.Record("Health.Check",
                [&] {
                  absl::StatusOr<HealthCheckResponse> r = client.HealthCheck("");
                  answer = r.ok() ? HealthCheckResponse::ServingStatus_Name(r->status())
                                  : r.status().ToString();
                  return r.status();
                })
        .IgnoreError();  // In the log; `answer` says it too.
    return answer;
  }

  // Whether every thread has joined its group and holds partitions, and both
  // groups cover all `partitions` (input and retry): no rebalance under way.
  bool GroupsSettled(RetrydClient& client, int partitions) {
    absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus();
    if (!status.ok()) return false;
    int primary = 0, retry = 0;
    for (const v1::ThreadInfo& t : status->threads()) {
      if (t.state() == v1::THREAD_STATE_STARTING || t.state() == v1::THREAD_STATE_STOPPING)
        return false;
      if (t.assigned_partitions().empty()) return false;
      (t.role() == v1::THREAD_ROLE_PRIMARY ? primary : retry) += t.assigned_partitions_size();
    }
    return primary == partitions && retry == partitions;
  }

  // Lets a fault last `window`, returning early only if retryd exits.
  static void Hold(RetrydProcess& retryd, absl::Duration window) {
    WaitFor([&] { return !retryd.Running(); }, window);
  }

  RpcLog log_;
};

TEST_F(BrokerFaultSoakTest, FaultsWhileRetryThreadsComeAndGoLoseNothing) {
  const int rounds = EnvInt("RETRYD_FAULT_SOAK_ROUNDS", 1);
  const TestTopics topics = CreateTopics("fault-soak", 8);
  const std::string group = topics.input + "-group";
  StressConfigOptions config;
  config.primary_threads = 2;
  config.retry_threads = 1;
  config.max_retry_threads = 4;
  const std::string config_path =
      WriteFile("retryd.textproto", StressConfig(topics, group, config));
  kafka::EmbeddedBroker& broker = Broker();
  // Both groups' coordinator is broker 1, never the one taken down alone
  // below: a coordinator cut off amid a join trips the mock (see the
  // outage further down).
  ASSERT_TRUE(broker.SetGroupCoordinator(group, 1).ok());
  ASSERT_TRUE(broker.SetGroupCoordinator(group + ".retry", 1).ok());

  RetrydProcess retryd(Path("retryd"), {"--config", config_path, "--summary_interval_s", "5"});
  ASSERT_TRUE(retryd.started());
  const std::string address = ControlAddress(retryd);
  ASSERT_FALSE(address.empty()) << "retryd printed no control address";
  std::unique_ptr<RetrydClient> quick = NewClient(address, kQuickDeadline);
  std::unique_ptr<RetrydClient> starter = NewClient(address, kStartDeadline);
  std::unique_ptr<RetrydClient> stopper = NewClient(address, kStopDeadline);
  ASSERT_TRUE(WaitFor([&] { return Health(*quick) == "SERVING"; }, absl::Seconds(60)))
      << "never SERVING: " << Health(*quick);

  // 100 records a second, about 6,000 a round. A run of more than four
  // rounds spreads four rounds' worth over all of them: the mock keeps a
  // bounded log per partition (see Outcomes::truncated).
  Load load(topics.input, 10, absl::Milliseconds(100) * std::max(1.0, rounds / 4.0), "s");
  std::optional<RetryThreadChurn> churn;
  churn.emplace(*starter, *stopper, log_, absl::Seconds(2));
  int cycles = 0;
  auto still_running = [&](const char* after) {
    const bool running = retryd.Running();
    EXPECT_TRUE(running) << "retryd " << DescribeStatus(*retryd.WaitExit(absl::ZeroDuration()))
                         << " after " << after;
    if (running)
      log_.Record("GetStatus", [&] { return quick->GetStatus().status(); }).IgnoreError();
    return running;
  };

  for (int round = 1; round <= rounds; ++round) {
    std::printf("fault-soak: round %d of %d\n", round, rounds);
    std::fflush(stdout);

    // A partition leader down, then up: partition 0 of every topic is led
    // by broker 2, which then goes away for a while. The mock elects no
    // other leader, so those partitions stall while the rest flow.
    for (const std::string& topic : {topics.input, topics.retry, topics.output, topics.dlq}) {
      ASSERT_TRUE(broker.SetPartitionLeader(topic, 0, 2).ok());
    }
    ASSERT_TRUE(broker.SetBrokerDown(2).ok());
    Hold(retryd, absl::Seconds(8));
    ASSERT_TRUE(broker.SetBrokerUp(2).ok());
    if (!still_running("a leader down and up")) break;

    // Produce and Fetch requests fail, one error per request, until the
    // errors are used up: a few seconds of retries.
    broker.PushRequestErrors(kProduce, Repeat({kNotLeader, kRequestTimedOut}, 10));
    broker.PushRequestErrors(kFetch, Repeat({kNotLeader, kRequestTimedOut}, 10));
    Hold(retryd, absl::Seconds(8));
    if (!still_running("Produce and Fetch errors")) break;

    // The group protocol fails: commits, and the joins and syncs the
    // churn's rebalances make. Only JoinGroup gets errors that move the
    // coordinator: a client told so by any other request looks it up again
    // and joins anew, and the mock aborts (rdkafka_mock_cgrp.c, "Assertion
    // `!member->resp' failed") on a second JoinGroup from a member whose
    // first it has not answered yet.
    broker.PushRequestErrors(
        kOffsetCommit,
        Repeat({kRequestTimedOut, kRebalanceInProgress, kCoordinatorLoadInProgress}, 5));
    broker.PushRequestErrors(
        kJoinGroup,
        Repeat({kCoordinatorNotAvailable, kNotCoordinator, kCoordinatorLoadInProgress}, 2));
    broker.PushRequestErrors(kSyncGroup,
                             Repeat({kRebalanceInProgress, kCoordinatorLoadInProgress}, 3));
    Hold(retryd, absl::Seconds(10));
    if (!still_running("OffsetCommit, JoinGroup and SyncGroup errors")) break;

    // A slow broker: every answer from broker 1 comes 500 ms late.
    ASSERT_TRUE(broker.SetBrokerRtt(1, absl::Milliseconds(500)).ok());
    Hold(retryd, absl::Seconds(8));
    ASSERT_TRUE(broker.SetBrokerRtt(1, absl::ZeroDuration()).ok());
    if (!still_running("a slow broker")) break;

    // Kafka unreachable: health says so (the prober's metadata request
    // fails), keeps saying so while it lasts, and recovers after. The churn
    // rests and the groups settle first: the mock aborts
    // (rdkafka_mock_cgrp.c, "Assertion `!member->resp' failed") when a
    // member whose JoinGroup it has not answered yet, cut off by the
    // outage, sends another.
    cycles += churn->cycles();
    churn.reset();
    EXPECT_TRUE(WaitFor([&] { return GroupsSettled(*quick, 8); }, absl::Seconds(60)))
        << "the groups never settled before the outage";
    for (int id = 1; id <= broker.broker_count(); ++id) ASSERT_TRUE(broker.SetBrokerDown(id).ok());
    EXPECT_TRUE(WaitFor([&] { return Health(*quick) == "NOT_SERVING"; }, absl::Seconds(30)))
        << "still " << Health(*quick) << " with every broker down";
    Hold(retryd, absl::Seconds(4));
    EXPECT_EQ(Health(*quick), "NOT_SERVING") << "with every broker still down";
    for (int id = 1; id <= broker.broker_count(); ++id) ASSERT_TRUE(broker.SetBrokerUp(id).ok());
    EXPECT_TRUE(WaitFor([&] { return Health(*quick) == "SERVING"; }, absl::Seconds(60)))
        << "still " << Health(*quick) << " with every broker back";
    churn.emplace(*starter, *stopper, log_, absl::Seconds(2));
    if (!still_running("every broker down and up")) break;
  }

  cycles += churn->cycles();
  churn.reset();
  load.Stop();
  for (int16_t api : {kProduce, kFetch, kOffsetCommit, kJoinGroup, kSyncGroup}) {
    broker.ClearRequestErrors(api);
  }
  ASSERT_TRUE(retryd.Running()) << "retryd "
                                << DescribeStatus(*retryd.WaitExit(absl::ZeroDuration()));
  std::printf("fault-soak: %d retry-thread cycles; %lld records produced, %lld failed\n", cycles,
              static_cast<long long>(load.produced()), static_cast<long long>(load.failed()));

  // No loss: every key of the input at its outcome.
  Outcomes outcomes;
  const bool all_done = WaitFor(
      [&] {
        if (!retryd.Running()) return true;
        outcomes = Outcomes::Read(topics);
        return outcomes.Missing().empty();
      },
      absl::Seconds(180));
  EXPECT_THAT(outcomes.truncated, ::testing::IsEmpty())
      << "the mock dropped the oldest records of a partition: the run was too large for it";
  ASSERT_TRUE(retryd.Running()) << "retryd "
                                << DescribeStatus(*retryd.WaitExit(absl::ZeroDuration()));
  EXPECT_TRUE(all_done) << "after 180 s, " << outcomes.Missing().size()
                        << " keys have no outcome: " << First(outcomes.Missing());
  EXPECT_THAT(outcomes.Misplaced(), ::testing::IsEmpty());
  EXPECT_EQ(static_cast<int64_t>(
                std::set<std::string>(outcomes.input.begin(), outcomes.input.end()).size()),
            load.produced())
      << "the input topic does not hold every key the load produced";

  // No partition left paused: both groups commit up to the end.
  std::vector<std::string> behind;
  const bool caught_up = WaitFor(
      [&] {
        behind = UncommittedPartitions(group, topics.input, outcomes.input_end);
        const Outcomes now = Outcomes::Read(topics);
        for (std::string& p :
             UncommittedPartitions(group + ".retry", topics.retry, now.retry_end)) {
          behind.push_back(std::move(p));
        }
        return behind.empty();
      },
      absl::Seconds(60));
  EXPECT_TRUE(caught_up) << "after 60 s, not committed to the end: " << First(behind);
  EXPECT_EQ(Health(*quick), "SERVING");

  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));

  EXPECT_THAT(log_.Failures(), ::testing::IsEmpty());
  std::printf("fault-soak: %zu keys, %zu records in output+dlq, %s\n",
              std::set<std::string>(outcomes.input.begin(), outcomes.input.end()).size(),
              outcomes.output.size() + outcomes.dlq.size(), outcomes.DuplicateSummary().c_str());
  std::printf("fault-soak: RPCs: %s\n", log_.Summary().c_str());
}

}  // namespace
}  // namespace retryd::testing
