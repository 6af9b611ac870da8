#include "client/watch_table.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/retryctl_format.h"
#include "google/protobuf/message.h"

namespace retryd::retryctl {
namespace {

// The rate columns: the cumulative counts of v1::ThreadMetrics whose display
// option names a column, in the proto's order.
const std::vector<ShownCount>& RateColumns() {
  static const std::vector<ShownCount>* const columns = [] {
    auto* out = new std::vector<ShownCount>;
    for (ShownCount& count : ShownCounts(*v1::ThreadMetrics::descriptor())) {
      if (!count.rate_column.empty()) out->push_back(std::move(count));
    }
    return out;
  }();
  return *columns;
}

std::string FormatRate(double per_second) {
  if (per_second < 1000) return absl::StrFormat("%.1f", per_second);
  return absl::StrFormat("%.0f", per_second);
}

std::string FormatMs(const v1::LatencySummary& latency, double ms) {
  if (latency.count() == 0) return "-";
  if (ms < 10) return absl::StrFormat("%.2f", ms);
  if (ms < 1000) return absl::StrFormat("%.1f", ms);
  return absl::StrFormat("%.0f", ms);
}

// The line above the table: the snapshot's time and the engine's state.
// With autoscale, the newest automatic start or stop below it.
std::string SummaryLine(const v1::MetricsSnapshot& snapshot, absl::TimeZone time_zone) {
  std::string line = absl::StrFormat(
      "retryd %s  engine %s  ordering %s  retry backlog %d  threads %d  every %dms\n",
      absl::FormatTime("%H:%M:%S", absl::FromUnixMillis(snapshot.time_unix_ms()), time_zone),
      EngineStateName(snapshot.engine_state()),
      OrderingName(snapshot.ordering(), snapshot.in_order()), snapshot.retry_backlog(),
      snapshot.threads_size(), snapshot.interval_ms());
  if (!snapshot.scaling_events().empty()) {
    absl::StrAppend(
        &line, "autoscale ",
        FormatScalingEvent(*snapshot.scaling_events().rbegin(), snapshot.time_unix_ms()), "\n");
  }
  return line;
}

std::vector<const v1::ThreadMetrics*> ThreadsById(const v1::MetricsSnapshot& snapshot) {
  std::vector<const v1::ThreadMetrics*> threads;
  threads.reserve(snapshot.threads_size());
  for (const v1::ThreadMetrics& thread : snapshot.threads()) threads.push_back(&thread);
  std::stable_sort(threads.begin(), threads.end(),
                   [](const auto* a, const auto* b) { return a->thread_id() < b->thread_id(); });
  return threads;
}

// The table's first row: the names of the columns before the last error's.
std::string HeaderRow() {
  std::string header =
      absl::StrFormat("%4s %-7s %-15s %8s %5s", "ID", "ROLE", "STATE", "IN-STATE", "PARTS");
  for (const ShownCount& column : RateColumns()) {
    absl::StrAppendFormat(&header, " %8s", column.rate_column);
  }
  absl::StrAppendFormat(&header, " %6s %6s %6s %8s %7s %7s %7s", "INFL", "SCHED", "PARKED", "LAG",
                        "P50ms", "P99ms", "MAXms");
  return header;
}

// The cumulative count of each rate column.
std::vector<int64_t> RateCounts(const v1::ThreadMetrics& thread) {
  const google::protobuf::Reflection& reflection = *thread.GetReflection();
  std::vector<int64_t> values;
  values.reserve(RateColumns().size());
  for (const ShownCount& column : RateColumns()) {
    values.push_back(reflection.GetInt64(thread, column.field));
  }
  return values;
}

// The rate per second of each count from `before` to `now`, "-" where it has
// none. Rates need time that moved forward, and counts that did not go back
// (a restarted thread).
std::vector<std::string> Rates(const std::vector<int64_t>& now, int64_t now_unix_ms,
                               const std::vector<int64_t>& before, int64_t before_unix_ms) {
  std::vector<std::string> rates(now.size(), "-");
  if (now_unix_ms <= before_unix_ms) return rates;
  const double seconds = static_cast<double>(now_unix_ms - before_unix_ms) / 1000.0;
  for (size_t i = 0; i < rates.size(); ++i) {
    if (now[i] >= before[i]) {
      rates[i] = FormatRate(static_cast<double>(now[i] - before[i]) / seconds);
    }
  }
  return rates;
}

std::string ThreadRow(const v1::ThreadMetrics& thread, const std::vector<std::string>& rates) {
  const v1::LatencySummary& latency = thread.processing_latency();
  std::string row =
      absl::StrFormat("%4d %-7s %-15s %8s %5d", thread.thread_id(), RoleName(thread.role()),
                      ThreadStateName(thread.state()), FormatElapsed(thread.time_in_state_ms()),
                      thread.assigned_partitions_size());
  for (const std::string& rate : rates) absl::StrAppendFormat(&row, " %8s", rate);
  absl::StrAppendFormat(&row, " %6d %6d %6d %8d %7s %7s %7s", thread.in_flight(),
                        thread.scheduled(), thread.parked(), thread.lag(),
                        FormatMs(latency, latency.p50_ms()), FormatMs(latency, latency.p99_ms()),
                        FormatMs(latency, latency.max_ms()));
  return row;
}

// The thread's last error and how long ago it happened; "" if it has none.
std::string LastError(const v1::ThreadMetrics& thread, int64_t now_unix_ms) {
  std::string error;
  if (!thread.last_error().empty()) {
    if (thread.last_error_unix_ms() > 0) {
      error = absl::StrCat(FormatElapsed(now_unix_ms - thread.last_error_unix_ms()), " ago: ");
    }
    error.append(thread.last_error());
  }
  return error;
}

// The rows, each followed by its last error if it has one.
std::string Table(const std::vector<std::string>& rows, const std::vector<std::string>& errors,
                  size_t width) {
  // The last error takes the rest of the terminal's width.
  size_t error_width = WatchTable::kDefaultErrorWidth;
  if (width > 0) {
    const size_t used = rows.front().size() + 2;
    error_width = std::max(width > used ? width - used : 0, WatchTable::kMinErrorWidth);
  }
  std::string out;
  for (size_t i = 0; i < rows.size(); ++i) {
    out.append(rows[i]);
    if (!errors[i].empty())
      absl::StrAppend(&out, "  ", SanitizeForTerminal(errors[i], error_width));
    out.push_back('\n');
  }
  return out;
}

}  // namespace

std::string WatchTable::Render(const v1::MetricsSnapshot& snapshot, size_t width) {
  const std::vector<const v1::ThreadMetrics*> threads = ThreadsById(snapshot);
  absl::flat_hash_map<uint32_t, Counts> current;
  current.reserve(threads.size());
  std::vector<std::string> rows;
  rows.reserve(threads.size() + 1);
  std::vector<std::string> errors;
  errors.reserve(threads.size() + 1);
  rows.push_back(HeaderRow());
  errors.push_back("LAST ERROR");

  for (const v1::ThreadMetrics* thread : threads) {
    Counts counts{snapshot.time_unix_ms(), RateCounts(*thread)};
    // Rates need the same thread in the previous snapshot.
    std::vector<std::string> rates(counts.values.size(), "-");
    const auto previous = previous_.find(thread->thread_id());
    if (previous != previous_.end()) {
      rates = Rates(counts.values, counts.time_unix_ms, previous->second.values,
                    previous->second.time_unix_ms);
    }
    rows.push_back(ThreadRow(*thread, rates));
    errors.push_back(LastError(*thread, snapshot.time_unix_ms()));
    current[thread->thread_id()] = std::move(counts);
  }

  previous_ = std::move(current);
  return SummaryLine(snapshot, options_.time_zone) + Table(rows, errors, width);
}

}  // namespace retryd::retryctl
