// Control-plane stress: retryd as a child process on the test binary's mock
// cluster, records flowing, while retry threads are started and stopped
// cycle after cycle (one or two at a time, by count or by id, gracefully or
// not) and 50 WatchMetrics clients connect, watch a few snapshots and go
// away, by cancelling their call or by being cancelled from another thread.
// Last, one stop meets an unreachable cluster.
//
// Checks: every call answers within its deadline, with OK; after each cycle
// exactly the configured retry thread runs (none stuck starting or
// stopping); every watcher's stream ends once cancelled; every key reaches
// its outcome and both groups commit to the end; retryd exits 0 on SIGTERM.
// Built with AddressSanitizer (scripts/sanitize.sh), both retryd and this
// test check for leaks at exit: a leak makes retryd's exit status non-zero
// and its stderr name LeakSanitizer. A consumer given up on purpose (see
// StopMeetingAnUnresponsiveClusterLeaksNothing) must not count as one.
//
// RETRYD_STRESS_CYCLES=N runs N start/stop cycles (default 24).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kExitTimeout = absl::Seconds(60);
// See broker_fault_soak_test.cc: a stop may take shutdown_timeout_ms twice
// and a rebalance.
constexpr absl::Duration kControlDeadline = absl::Seconds(60);
constexpr absl::Duration kQuickDeadline = absl::Seconds(10);
constexpr int kWatchers = 50;

// `count` WatchMetrics clients, each on a thread of its own, over and over
// until Stop(): a new client (and connection), one stream, a few snapshots,
// gone. Every other stream ends by its callback returning false (the
// client cancels the call); the rest are cancelled by Cancel() from the
// canceller thread.
class Watchers {
 public:
  Watchers(std::string address, int count) : address_(std::move(address)), slots_(count) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this, i] { Watch(i); });
    canceller_ = std::thread([this] { CancelSome(); });
  }
  ~Watchers() { Stop(absl::Seconds(60)); }

  // Stops them all; false if some watcher's stream did not end within
  // `timeout` of being cancelled (then this aborts the test process rather
  // than hang on a join).
  bool Stop(absl::Duration timeout) {
    if (stopped_) return true;
    stopped_ = true;
    stop_.Notify();
    const bool ended = WaitFor([&] { return finished_.load() == slots_.size(); }, timeout);
    if (!ended) {
      ADD_FAILURE() << slots_.size() - finished_.load() << " of " << slots_.size()
                    << " watchers still in WatchMetrics " << timeout << " after being cancelled";
      std::fflush(stdout);
      std::abort();
    }
    canceller_done_.Notify();
    canceller_.join();
    for (std::thread& t : threads_) t.join();
    return true;
  }

  int64_t streams() const { return streams_.load(); }
  // Streams whose new connection never came up (tried again).
  int64_t connect_failures() const { return connect_failures_.load(); }
  int64_t snapshots() const { return snapshots_.load(); }
  std::vector<std::string> failures() const {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  // A watcher's client while a Cancel() may end its stream.
  struct Slot {
    absl::Mutex mu;  // Guards `client`.
    std::shared_ptr<RetrydClient> client ABSL_GUARDED_BY(mu);
  };

  void Watch(int index) {
    Slot& slot = slots_[index];
    for (int n = 0; !stop_.HasBeenNotified(); ++n) {
      std::shared_ptr<RetrydClient> client = NewClient(address_, kQuickDeadline);
      const bool cancelled_by_other = (index + n) % 2 == 1;
      const int want = 1 + (index + n) % 4;
      if (cancelled_by_other) {
        absl::MutexLock lock(&slot.mu);
        slot.client = client;
      }
      int got = 0;
      const absl::Status status =
          client->Watch(/*interval_ms=*/100, {}, [&](const v1::MetricsSnapshot&) {
            ++got;
            return cancelled_by_other || got < want;
          });
      {
        absl::MutexLock lock(&slot.mu);
        slot.client.reset();
      }
      streams_.fetch_add(1);
      snapshots_.fetch_add(got);
      // A new client whose connection never came up (UNAVAILABLE before any
      // snapshot) tries again, as `retryctl watch` would: on a loaded
      // machine a loopback connect among 50 at once can fail. Counted, and
      // bounded by the test; a stream that ended otherwise is a failure.
      if (status.code() == absl::StatusCode::kUnavailable && got == 0 &&
          absl::StrContains(status.message(), "failed to connect")) {
        connect_failures_.fetch_add(1);
        stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
        continue;
      }
      if (!status.ok() || (!cancelled_by_other && got != want)) {
        absl::MutexLock lock(&mu_);
        failures_.push_back(absl::StrCat("watcher ", index, " stream ", n, ": ", status.ToString(),
                                         " after ", got, " snapshots"));
      }
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
    }
    finished_.fetch_add(1);
  }

  // Every 50 ms cancels a quarter of the watchers' streams; once stopping,
  // all of them, until every watcher has ended.
  void CancelSome() {
    for (int tick = 0; !canceller_done_.WaitForNotificationWithTimeout(absl::Milliseconds(50));
         ++tick) {
      const bool all = stop_.HasBeenNotified();
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (!all && static_cast<int>(i % 4) != tick % 4) continue;
        std::shared_ptr<RetrydClient> client;
        {
          absl::MutexLock lock(&slots_[i].mu);
          client = slots_[i].client;
        }
        if (client != nullptr) client->Cancel();
      }
    }
  }

  const std::string address_;
  std::vector<Slot> slots_;
  absl::Notification stop_;
  absl::Notification canceller_done_;
  bool stopped_ = false;  // Only the test's thread calls Stop().
  std::atomic<size_t> finished_{0};
  std::atomic<int64_t> streams_{0}, snapshots_{0}, connect_failures_{0};
  mutable absl::Mutex mu_;  // Guards `failures_`.
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
  std::thread canceller_;
};

class ControlStressTest : public StressTest {
 protected:
  // Half a second between two group changes, cut short only if retryd exits.
  static void Pause(RetrydProcess& retryd) {
    WaitFor([&] { return !retryd.Running(); }, absl::Milliseconds(500));
  }

  RpcLog log_;
};

TEST_F(ControlStressTest, RetryThreadCyclesAndWatchersLeaveNothingBehind) {
  const int cycles = EnvInt("RETRYD_STRESS_CYCLES", 24);
  const TestTopics topics = CreateTopics("control-stress", 4);
  const std::string group = topics.input + "-group";
  StressConfigOptions config;
  config.retry_threads = 1;
  config.max_retry_threads = 3;
  // Each start and stop waits for a rebalance, which the mock delays by the
  // session timeout less a second. Not 3000 or less: a member that joins an
  // empty group (as after the outage below) waits 3 s for the mock's first
  // rebalance, and with a session no longer than that, a late tick of the
  // mock's session check can expire it first; its JoinGroup is then never
  // answered (its connection stays blocked) and the thread would not join
  // until librdkafka gives that request up (see max_poll_interval_ms).
  config.session_timeout_ms = 4000;
  config.heartbeat_interval_ms = 500;
  const std::string config_path =
      WriteFile("retryd.textproto", StressConfig(topics, group, config));
  kafka::EmbeddedBroker& broker = Broker();

  RetrydProcess retryd(Path("retryd"), {"--config", config_path, "--summary_interval_s", "5"});
  ASSERT_TRUE(retryd.started());
  const std::string address = ControlAddress(retryd);
  ASSERT_FALSE(address.empty()) << "retryd printed no control address";
  std::unique_ptr<RetrydClient> quick = NewClient(address, kQuickDeadline);
  std::unique_ptr<RetrydClient> control = NewClient(address, kControlDeadline);
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<HealthCheckResponse> health = quick->HealthCheck("");
        return health.ok() && health->status() == HealthCheckResponse::SERVING;
      },
      absl::Seconds(60)))
      << "never SERVING";

  // 100 records a second; a run of more than 40 cycles (about 5 s each)
  // spreads 40 cycles' worth, some 20,000 records, over all of them: the
  // mock keeps a bounded log per partition (see Outcomes::truncated).
  Load load(topics.input, 10, absl::Milliseconds(100) * std::max(1.0, cycles / 40.0), "c");
  Watchers watchers(address, kWatchers);
  // The retry threads that run, by what GetStatus says.
  auto retry_threads = [&] {
    std::vector<std::string> states;
    const absl::Status answered = log_.Record("GetStatus", [&] {
      absl::StatusOr<v1::GetStatusResponse> status = quick->GetStatus();
      if (!status.ok()) return status.status();
      for (const v1::ThreadInfo& t : status->threads()) {
        if (t.role() == v1::THREAD_ROLE_RETRY) {
          states.push_back(absl::StrCat(t.thread_id(), ":", v1::ThreadState_Name(t.state())));
        }
      }
      return absl::OkStatus();
    });
    EXPECT_TRUE(answered.ok()) << answered;
    return states;
  };

  for (int i = 0; i < cycles; ++i) {
    const int count = 1 + i % 2;
    const bool graceful = i % 4 != 3;
    std::vector<uint32_t> ids;
    const absl::Status started = log_.Record("StartRetryThreads", [&] {
      absl::StatusOr<v1::StartRetryThreadsResponse> r = control->StartRetryThreads(count);
      if (r.ok()) ids.assign(r->thread_ids().begin(), r->thread_ids().end());
      return r.status();
    });
    ASSERT_TRUE(started.ok()) << "cycle " << i << ": " << started;
    ASSERT_EQ(ids.size(), static_cast<size_t>(count));
    // A retry thread processes nothing while a group change it prepared
    // for is under way: without a pause between changes the retry lane
    // would hardly move.
    Pause(retryd);
    const absl::Status stopped = log_.Record("StopRetryThreads", [&] {
      return i % 3 == 0 ? control->StopRetryThreadsById(ids, graceful).status()
                        : control->StopRetryThreads(count, graceful).status();
    });
    ASSERT_TRUE(stopped.ok()) << "cycle " << i << ": " << stopped;
    Pause(retryd);
    // The one retry thread of the config, and no other left behind.
    const std::vector<std::string> states = retry_threads();
    ASSERT_EQ(states.size(), 1u) << "after cycle " << i << ": " << First(states);
    ASSERT_TRUE(retryd.Running());
  }
  std::printf("control-stress: %d start/stop cycles; %lld watch streams, %lld snapshots\n", cycles,
              static_cast<long long>(watchers.streams()),
              static_cast<long long>(watchers.snapshots()));

  // A stop that meets an unreachable cluster (the consumer's leave fails
  // at once: see StopMeetingAnUnresponsiveClusterLeaksNothing for one that
  // hangs), then a new thread in its place.
  for (int id = 1; id <= broker.broker_count(); ++id) ASSERT_TRUE(broker.SetBrokerDown(id).ok());
  const absl::Status stuck_stop = log_.Record(
      "StopRetryThreads", [&] { return control->StopRetryThreads(1, /*graceful=*/true).status(); });
  for (int id = 1; id <= broker.broker_count(); ++id) ASSERT_TRUE(broker.SetBrokerUp(id).ok());
  ASSERT_TRUE(stuck_stop.ok()) << stuck_stop;
  const absl::Status restarted =
      log_.Record("StartRetryThreads", [&] { return control->StartRetryThreads(1).status(); });
  ASSERT_TRUE(restarted.ok()) << restarted;

  EXPECT_TRUE(watchers.Stop(absl::Seconds(30)));
  EXPECT_THAT(watchers.failures(), ::testing::IsEmpty());
  // A few connects that failed under load are tried again; more than one in
  // a hundred streams would be retryd refusing its clients.
  EXPECT_LE(watchers.connect_failures() * 100, watchers.streams())
      << watchers.connect_failures() << " of " << watchers.streams() << " connects failed";
  std::printf("control-stress: %lld watcher connects failed and were tried again\n",
              static_cast<long long>(watchers.connect_failures()));
  load.Stop();

  Outcomes outcomes;
  const bool all_done = WaitFor(
      [&] {
        if (!retryd.Running()) return true;
        outcomes = Outcomes::Read(topics);
        return outcomes.Missing().empty();
      },
      absl::Seconds(180));
  ASSERT_TRUE(retryd.Running()) << "retryd "
                                << DescribeStatus(*retryd.WaitExit(absl::ZeroDuration()));
  EXPECT_THAT(outcomes.truncated, ::testing::IsEmpty());
  EXPECT_TRUE(all_done) << "after 180 s, " << outcomes.Missing().size()
                        << " keys have no outcome: " << First(outcomes.Missing());
  EXPECT_THAT(outcomes.Misplaced(), ::testing::IsEmpty());
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

  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));
  EXPECT_THAT(retryd.Stderr(), Not(HasSubstr("Sanitizer")));

  EXPECT_THAT(log_.Failures(), ::testing::IsEmpty());
  std::printf("control-stress: %zu keys, %zu records in output+dlq, %s\n",
              std::set<std::string>(outcomes.input.begin(), outcomes.input.end()).size(),
              outcomes.output.size() + outcomes.dlq.size(), outcomes.DuplicateSummary().c_str());
  std::printf("control-stress: RPCs: %s\n", log_.Summary().c_str());
}

// A retry thread stopped while the cluster takes requests but answers none
// (every broker's answers delayed by a minute, as behind a network that
// drops packets) cannot leave its group before its stop deadline: retryd
// gives its consumer up and leaves the handle to librdkafka, since
// rd_kafka_destroy would block until the leave is answered. That handle is
// abandoned on purpose, not leaked: under LeakSanitizer retryd must still
// exit 0 with no report.
TEST_F(ControlStressTest, StopMeetingAnUnresponsiveClusterLeaksNothing) {
  const TestTopics topics = CreateTopics("abandon", 2);
  StressConfigOptions config;
  config.retry_threads = 1;
  // The consumer's session outlives its stop deadline (shutdown_timeout_ms
  // plus two seconds for its last commit and its group leave), so the leave
  // is still waiting for the coordinator when the deadline passes.
  config.session_timeout_ms = 10000;
  config.heartbeat_interval_ms = 500;
  config.shutdown_timeout_ms = 1000;
  const std::string config_path = Path("retryd.textproto");
  {
    std::FILE* f = std::fopen(config_path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string text = StressConfig(topics, topics.input + "-group", config);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  kafka::EmbeddedBroker& broker = Broker();
  RetrydProcess retryd(Path("retryd"), {"--config", config_path, "--summary_interval_s", "0"});
  ASSERT_TRUE(retryd.started());
  const std::string address = ControlAddress(retryd);
  ASSERT_FALSE(address.empty()) << "retryd printed no control address";
  std::unique_ptr<RetrydClient> control = NewClient(address, kControlDeadline);
  // The retry thread has joined its group once it is assigned partitions.
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::GetStatusResponse> status = control->GetStatus();
        if (!status.ok()) return false;
        for (const v1::ThreadInfo& t : status->threads()) {
          if (t.role() == v1::THREAD_ROLE_RETRY && t.assigned_partitions_size() > 0) return true;
        }
        return false;
      },
      absl::Seconds(60)))
      << "the retry thread never joined its group";

  // A refused connection would end the leave at once (librdkafka sends no
  // LeaveGroup without a coordinator); an unanswered one keeps it waiting.
  for (int id = 1; id <= broker.broker_count(); ++id) {
    ASSERT_TRUE(broker.SetBrokerRtt(id, absl::Minutes(1)).ok());
  }
  const absl::Status stopped = log_.Record("StopRetryThreads", [&] {
    return control->StopRetryThreads(1, /*graceful=*/false).status();
  });
  for (int id = 1; id <= broker.broker_count(); ++id) {
    ASSERT_TRUE(broker.SetBrokerRtt(id, absl::ZeroDuration()).ok());
  }
  EXPECT_TRUE(stopped.ok()) << stopped;
  EXPECT_THAT(retryd.Stderr(), HasSubstr("abandoning the consumer"))
      << "the stop did not give its consumer up: this test proves nothing";

  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(kExitTimeout), 0));
  EXPECT_THAT(retryd.Stderr(), Not(HasSubstr("Sanitizer")));
}

}  // namespace
}  // namespace retryd::testing
