// Helpers for the stress tests (tests/stress/): the built retryd as a child
// process on the test binary's mock cluster, a load that keeps records
// flowing, a log of every control RPC, and the checks a user would make
// afterwards (every key at its outcome, every group committed to the end).
#ifndef RETRYD_TESTS_STRESS_STRESS_SUPPORT_H_
#define RETRYD_TESTS_STRESS_STRESS_SUPPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/retryd_client.h"
#include "gtest/gtest.h"
#include "server/kafka/producer.h"
#include "tests/support/retryd_process.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::testing {

// The value of the environment variable `name` if it is a positive integer,
// else `fallback`: how a long run is asked for.
int EnvInt(const char* name, int fallback);

struct StressConfigOptions {
  int primary_threads = 1;
  int retry_threads = 1;
  int max_retry_threads = 4;
  // The mock delays each rebalance by the members' session timeout less a
  // second: it sets the pace of every retry-thread start and stop.
  int session_timeout_ms = 6000;
  int heartbeat_interval_ms = 1000;
  // Also bounds how long librdkafka waits for a JoinGroup answer (this plus
  // 3 s) before it connects again and re-sends it. After an outage that
  // outlasted its session, the mock coordinator has been seen to leave a
  // member's JoinGroup unanswered for good (its connection blocked); with
  // librdkafka's default of 300 s the thread would rejoin only after the
  // test's waits had run out.
  int max_poll_interval_ms = 30000;
  int shutdown_timeout_ms = 5000;
  int latency_ms = 1;
};

// A retryd config over `topics` in group `group` on Broker(): perm- keys
// fail for good, flaky- keys fail twice then succeed (simulate rules by
// key_prefix); control API on a free loopback port. One produce request in
// flight per connection, since the mock does not check an idempotent
// producer's sequence numbers (see docs/testing.md, "Stress tests").
std::string StressConfig(const TestTopics& topics, const std::string& group,
                         const StressConfigOptions& options);

// The control API address retryd printed ("" if it exited or printed none
// within `timeout`).
std::string ControlAddress(RetrydProcess& retryd, absl::Duration timeout = absl::Seconds(60));

// A client of `address` whose unary calls each get `deadline`. Its channel
// has a subchannel pool of its own, so each client makes its own connection.
std::unique_ptr<RetrydClient> NewClient(const std::string& address, absl::Duration deadline);

// Every control RPC a test makes, with its status and latency. A call that
// fails for any reason, a client-side deadline included, counts as a
// failure: the calls the tests make must all succeed within their deadline.
// Thread-safe.
class RpcLog {
 public:
  // Runs `call`, records its status and how long it took under `name`, and
  // returns the status.
  absl::Status Record(const std::string& name, absl::FunctionRef<absl::Status()> call)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One line per failed call: name, status.
  std::vector<std::string> Failures() const ABSL_LOCKS_EXCLUDED(mu_);
  // "GetStatus: 12 calls, max 3 ms; ..." per name.
  std::string Summary() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t calls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct PerName {
    int64_t calls = 0;
    absl::Duration max_latency;
  };
  mutable absl::Mutex mu_;  // Guards the fields below.
  std::map<std::string, PerName> by_name_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
};

// `n` keys numbered from `first`: every 13th perm-, every 7th flaky-, the
// rest ok-, each ending in "-<tag><number>".
std::vector<std::string> StressKeys(int first, int n, const std::string& tag);

// Keeps records flowing into `topic`: `batch` keys (StressKeys) every
// `period` on a thread of its own, until Stop(). Its producer keeps one
// request in flight per connection (see StressConfig) and retries for as
// long as Kafka is unreachable.
class Load {
 public:
  Load(std::string topic, int batch, absl::Duration period, std::string tag);
  ~Load();  // Stop()s.

  Load(const Load&) = delete;
  Load& operator=(const Load&) = delete;

  // Stops producing and waits (up to `flush_timeout`) for the acks.
  void Stop(absl::Duration flush_timeout = absl::Seconds(120));

  int64_t produced() const;  // Keys handed to the producer.
  int64_t failed() const;    // Deliveries that failed for good.

 private:
  void Run();

  const std::string topic_;
  const int batch_;
  const absl::Duration period_;
  const std::string tag_;
  std::unique_ptr<kafka::Producer> producer_;
  absl::Notification stop_;
  std::thread thread_;
  mutable absl::Mutex mu_;  // Guards the counters below.
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
};

// Where the keys of a run stand, read from the topics as any Kafka client
// would: the input topic says which keys there are, the output and dead-
// letter topics where they ended.
struct Outcomes {
  std::multiset<std::string> input, output, dlq;
  // One line per partition whose log no longer starts at offset 0: the mock
  // keeps a bounded log and drops the oldest records silently, so a run
  // that large cannot tell loss from truncation.
  std::vector<std::string> truncated;
  // The end offset of each partition of the input and retry topics.
  std::map<int32_t, int64_t> input_end, retry_end;

  static Outcomes Read(const TestTopics& topics);
  // Keys of the input not at their outcome: perm- in the DLQ, every other
  // key in the output.
  std::vector<std::string> Missing() const;
  // Keys at an outcome they must never reach.
  std::vector<std::string> Misplaced() const;
  // Records in output and DLQ beyond one per distinct key.
  size_t Duplicates() const;
  // "N duplicates (ok- a, flaky- b, perm- c)": Duplicates() by kind of key,
  // which tells what repeated them (ok- keys only the primaries process).
  std::string DuplicateSummary() const;
};

// One line per partition of `topic` on which `group` has not committed up
// to `end` (the end offset per partition): "p2: committed 10 of 15".
std::vector<std::string> UncommittedPartitions(const std::string& group, const std::string& topic,
                                               const std::map<int32_t, int64_t>& end);

// The first `n` of `items`, comma-separated, with the total if there are more.
std::string First(const std::vector<std::string>& items, size_t n = 10);

// A fresh directory per test for configs and the children's logs; on
// failure the logs' tails are printed and the directory is kept.
class StressTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) KeepLogsAndPrintTails(dir_, 60);
  }
  std::string Path(const std::string& name) const { return dir_.Path(name); }
  // Writes `contents` to Path(name); returns that path.
  std::string WriteFile(const std::string& name, const std::string& contents) const {
    return dir_.WriteFile(name, contents);
  }

 private:
  TempDir dir_;
};

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_STRESS_STRESS_SUPPORT_H_
