// The watch table from hand-built snapshots: columns, rates from
// consecutive snapshots, and what a row shows when a rate cannot be known.
#include "client/watch_table.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

// Columns of a thread row, split on blanks; the last error is what follows.
enum Column {
  kId,
  kRole,
  kState,
  kInState,
  kParts,
  kProcessedPerSecond,
  kOkPerSecond,
  kFailedPerSecond,
  kRetriedPerSecond,
  kDlqPerSecond,
  kInFlight,
  kScheduled,
  kParked,
  kLag,
  kP50,
  kP99,
  kMax,
  kColumns,
};

struct Counts {
  int64_t processed, succeeded, failed, retried, dlq;
};

v1::ThreadMetrics Thread(uint32_t id, v1::ThreadRole role, const Counts& counts) {
  v1::ThreadMetrics thread;
  thread.set_thread_id(id);
  thread.set_role(role);
  thread.set_state(v1::THREAD_STATE_RUNNING);
  thread.set_time_in_state_ms(61'000);
  thread.add_assigned_partitions()->set_partition(0);
  thread.add_assigned_partitions()->set_partition(1);
  thread.set_processed(counts.processed);
  thread.set_succeeded(counts.succeeded);
  thread.set_failed_attempts(counts.failed);
  thread.set_sent_to_retry(counts.retried);
  thread.set_dead_lettered(counts.dlq);
  thread.set_in_flight(3);
  thread.set_scheduled(4);
  thread.set_parked(5);
  thread.set_lag(1234);
  return thread;
}

v1::MetricsSnapshot Snapshot(int64_t time_unix_ms, std::vector<v1::ThreadMetrics> threads) {
  v1::MetricsSnapshot snapshot;
  snapshot.set_time_unix_ms(time_unix_ms);
  snapshot.set_interval_ms(1000);
  snapshot.set_engine_state(v1::ENGINE_STATE_RUNNING);
  snapshot.set_retry_backlog(7);
  for (v1::ThreadMetrics& thread : threads) *snapshot.add_threads() = std::move(thread);
  return snapshot;
}

std::vector<std::string> Lines(const std::string& table) {
  return absl::StrSplit(table, '\n', absl::SkipEmpty());
}

std::vector<std::string> Cells(const std::string& row) {
  return absl::StrSplit(row, ' ', absl::SkipEmpty());
}

WatchTable UtcTable() {
  WatchTableOptions options;
  options.time_zone = absl::UTCTimeZone();
  return WatchTable(options);
}

TEST(WatchTableTest, HeaderLineAndColumnTitles) {
  WatchTable table = UtcTable();
  v1::MetricsSnapshot snapshot = Snapshot(3'723'000, {Thread(0, v1::THREAD_ROLE_PRIMARY, {})});
  snapshot.set_ordering(v1::ORDERING_KEY);
  std::vector<std::string> lines = Lines(table.Render(snapshot));
  ASSERT_THAT(lines, SizeIs(3));
  EXPECT_EQ(lines[0],
            "retryd 01:02:03  engine RUNNING  ordering key  retry backlog 7  threads 1  every "
            "1000ms");
  EXPECT_THAT(Cells(lines[1]),
              ElementsAre("ID", "ROLE", "STATE", "IN-STATE", "PARTS", "PROC/s", "OK/s", "FAIL/s",
                          "RETRY/s", "DLQ/s", "INFL", "SCHED", "PARKED", "LAG", "P50ms", "P99ms",
                          "MAXms", "LAST", "ERROR"));

  // A server older than `ordering` says in_order only.
  snapshot.clear_ordering();
  snapshot.set_in_order(true);
  lines = Lines(table.Render(snapshot));
  ASSERT_THAT(lines, SizeIs(3));
  EXPECT_THAT(lines[0], HasSubstr("  ordering in-order  "));
}

TEST(WatchTableTest, NewestScalingEventUnderTheHeaderLine) {
  WatchTable table = UtcTable();
  v1::MetricsSnapshot snapshot = Snapshot(3'723'000, {Thread(0, v1::THREAD_ROLE_PRIMARY, {})});
  for (uint32_t id : {4u, 5u}) {
    v1::ScalingEvent* event = snapshot.add_scaling_events();
    event->set_time_unix_ms(3'721'000);
    event->set_thread_id(id);
    event->set_started(true);
    event->set_reason(
        "retry backlog of 50 records is over backlog_per_thread (10) x 1 retry "
        "threads");
  }
  const std::vector<std::string> lines = Lines(table.Render(snapshot));
  ASSERT_THAT(lines, SizeIs(4));
  EXPECT_EQ(lines[1],
            "autoscale 2.0s ago: started retry thread 5: retry backlog of 50 records is over "
            "backlog_per_thread (10) x 1 retry threads");
}

TEST(WatchTableTest, FirstSnapshotHasNoRates) {
  WatchTable table = UtcTable();
  const std::vector<std::string> lines = Lines(
      table.Render(Snapshot(10'000, {Thread(0, v1::THREAD_ROLE_PRIMARY, {100, 90, 10, 10, 0})})));
  ASSERT_THAT(lines, SizeIs(3));
  const std::vector<std::string> cells = Cells(lines[2]);
  ASSERT_THAT(cells, SizeIs(kColumns));
  EXPECT_EQ(cells[kId], "0");
  EXPECT_EQ(cells[kRole], "primary");
  EXPECT_EQ(cells[kState], "RUNNING");
  EXPECT_EQ(cells[kInState], "1m01s");
  EXPECT_EQ(cells[kParts], "2");
  for (int c = kProcessedPerSecond; c <= kDlqPerSecond; ++c) EXPECT_EQ(cells[c], "-") << c;
  EXPECT_EQ(cells[kInFlight], "3");
  EXPECT_EQ(cells[kScheduled], "4");
  EXPECT_EQ(cells[kParked], "5");
  EXPECT_EQ(cells[kLag], "1234");
  // No processor call in the interval: no latency.
  EXPECT_EQ(cells[kP50], "-");
  EXPECT_EQ(cells[kP99], "-");
  EXPECT_EQ(cells[kMax], "-");
}

TEST(WatchTableTest, RatesFromConsecutiveSnapshots) {
  WatchTable table = UtcTable();
  table.Render(Snapshot(10'000, {Thread(0, v1::THREAD_ROLE_PRIMARY, {100, 90, 10, 10, 0}),
                                 Thread(3, v1::THREAD_ROLE_RETRY, {5, 5, 0, 0, 0})}));
  // Two seconds later (not the nominal interval: rates use the real time).
  v1::ThreadMetrics retry = Thread(3, v1::THREAD_ROLE_RETRY, {5, 5, 0, 0, 0});
  v1::LatencySummary* latency = retry.mutable_processing_latency();
  latency->set_count(10);
  latency->set_p50_ms(1.234);
  latency->set_p99_ms(48.76);
  latency->set_max_ms(1500.4);
  const std::vector<std::string> lines = Lines(table.Render(
      Snapshot(12'000, {retry, Thread(0, v1::THREAD_ROLE_PRIMARY, {300, 250, 50, 40, 1})})));
  ASSERT_THAT(lines, SizeIs(4));

  // Rows in thread id order, whatever the server's order.
  const std::vector<std::string> primary = Cells(lines[2]);
  ASSERT_THAT(primary, SizeIs(kColumns));
  EXPECT_EQ(primary[kId], "0");
  EXPECT_EQ(primary[kProcessedPerSecond], "100.0");  // (300 - 100) / 2 s
  EXPECT_EQ(primary[kOkPerSecond], "80.0");          // (250 - 90) / 2 s
  EXPECT_EQ(primary[kFailedPerSecond], "20.0");      // (50 - 10) / 2 s
  EXPECT_EQ(primary[kRetriedPerSecond], "15.0");     // (40 - 10) / 2 s
  EXPECT_EQ(primary[kDlqPerSecond], "0.5");          // (1 - 0) / 2 s

  const std::vector<std::string> retry_cells = Cells(lines[3]);
  ASSERT_THAT(retry_cells, SizeIs(kColumns));
  EXPECT_EQ(retry_cells[kId], "3");
  EXPECT_EQ(retry_cells[kRole], "retry");
  EXPECT_EQ(retry_cells[kProcessedPerSecond], "0.0");
  EXPECT_EQ(retry_cells[kP50], "1.23");
  EXPECT_EQ(retry_cells[kP99], "48.8");
  EXPECT_EQ(retry_cells[kMax], "1500");
}

TEST(WatchTableTest, LargeRatesDropTheDecimal) {
  WatchTable table = UtcTable();
  table.Render(Snapshot(0, {Thread(1, v1::THREAD_ROLE_RETRY, {0, 0, 0, 0, 0})}));
  const std::vector<std::string> lines =
      Lines(table.Render(Snapshot(500, {Thread(1, v1::THREAD_ROLE_RETRY, {60'000, 0, 0, 0, 0})})));
  EXPECT_EQ(Cells(lines[2])[kProcessedPerSecond], "120000");
}

TEST(WatchTableTest, NewThreadRestartedCountersAndStalledClockShowNoRate) {
  WatchTable table = UtcTable();
  table.Render(Snapshot(1'000, {Thread(1, v1::THREAD_ROLE_RETRY, {50, 50, 0, 0, 0})}));
  // Thread 2 is new; thread 1's counts went back (a new thread with a
  // reused id): neither has a rate.
  std::vector<std::string> lines =
      Lines(table.Render(Snapshot(2'000, {Thread(1, v1::THREAD_ROLE_RETRY, {10, 10, 0, 0, 0}),
                                          Thread(2, v1::THREAD_ROLE_RETRY, {10, 10, 0, 0, 0})})));
  ASSERT_THAT(lines, SizeIs(4));
  EXPECT_EQ(Cells(lines[2])[kProcessedPerSecond], "-");
  EXPECT_EQ(Cells(lines[2])[kFailedPerSecond], "0.0");  // 0 -> 0 is a rate.
  EXPECT_EQ(Cells(lines[3])[kProcessedPerSecond], "-");

  // The same time again: no interval to divide by.
  lines =
      Lines(table.Render(Snapshot(2'000, {Thread(1, v1::THREAD_ROLE_RETRY, {20, 20, 0, 0, 0})})));
  EXPECT_EQ(Cells(lines[2])[kProcessedPerSecond], "-");
}

TEST(WatchTableTest, RatesCompareWithTheLatestSnapshotOnly) {
  WatchTable table = UtcTable();
  table.Render(Snapshot(0, {Thread(1, v1::THREAD_ROLE_RETRY, {0, 0, 0, 0, 0})}));
  table.Render(Snapshot(1'000, {}));  // Thread 1 filtered out or gone.
  const std::vector<std::string> lines =
      Lines(table.Render(Snapshot(2'000, {Thread(1, v1::THREAD_ROLE_RETRY, {10, 0, 0, 0, 0})})));
  EXPECT_EQ(Cells(lines[2])[kProcessedPerSecond], "-");
}

TEST(WatchTableTest, LastErrorIsAgedSanitizedAndFitsTheTerminal) {
  WatchTable table = UtcTable();
  v1::ThreadMetrics thread = Thread(1, v1::THREAD_ROLE_RETRY, {});
  thread.set_last_error(std::string("processor timed out\n\x1b[2J") + std::string(200, 'x'));
  thread.set_last_error_unix_ms(50'000 - 12'300);
  const v1::MetricsSnapshot snapshot = Snapshot(50'000, {thread});

  std::string table_text = table.Render(snapshot);
  std::vector<std::string> lines = Lines(table_text);
  EXPECT_THAT(table_text, Not(HasSubstr("\x1b")));
  const size_t error_at = lines[2].find("12.3s ago: processor timed out ?[2J");
  ASSERT_NE(error_at, std::string::npos) << lines[2];
  EXPECT_EQ(lines[2].size() - error_at, WatchTable::kDefaultErrorWidth);
  EXPECT_THAT(lines[2], testing::EndsWith("..."));

  // A 200-column terminal: every line fits, the error fills the row.
  lines = Lines(table.Render(snapshot, 200));
  for (const std::string& line : lines) EXPECT_LE(line.size(), 200u) << line;
  EXPECT_EQ(lines[2].size(), 200u);

  // Too narrow a terminal still shows the start of the error.
  lines = Lines(table.Render(snapshot, 40));
  EXPECT_THAT(lines[2], testing::EndsWith("  12.3s ago: pr..."));
}

TEST(WatchTableTest, NoThreads) {
  WatchTable table = UtcTable();
  const std::vector<std::string> lines = Lines(table.Render(Snapshot(0, {})));
  ASSERT_THAT(lines, SizeIs(2));
  EXPECT_THAT(lines[0], HasSubstr("threads 0"));
  EXPECT_THAT(lines[1], StartsWith("  ID ROLE"));
}

}  // namespace
}  // namespace retryd::retryctl
