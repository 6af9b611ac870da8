#include "client/watch_table.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/retryctl_format.h"

namespace retryd::retryctl {
namespace {

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

}  // namespace

std::string WatchTable::Render(const v1::MetricsSnapshot& snapshot, size_t width) {
  std::string out;
  absl::StrAppendFormat(
      &out, "retryd %s  engine %s  in_order %s  retry backlog %d  threads %d  every %dms\n",
      absl::FormatTime("%H:%M:%S", absl::FromUnixMillis(snapshot.time_unix_ms()),
                       options_.time_zone),
      EngineStateName(snapshot.engine_state()), snapshot.in_order() ? "on" : "off",
      snapshot.retry_backlog(), snapshot.threads_size(), snapshot.interval_ms());

  std::vector<const v1::ThreadMetrics*> threads;
  threads.reserve(snapshot.threads_size());
  for (const v1::ThreadMetrics& thread : snapshot.threads()) threads.push_back(&thread);
  std::stable_sort(threads.begin(), threads.end(),
                   [](const auto* a, const auto* b) { return a->thread_id() < b->thread_id(); });

  absl::flat_hash_map<uint32_t, Counts> current;
  current.reserve(threads.size());
  std::vector<std::string> rows;
  rows.reserve(threads.size() + 1);
  std::vector<std::string> errors;
  errors.reserve(threads.size() + 1);
  rows.push_back(
      absl::StrFormat("%4s %-7s %-15s %8s %5s %8s %8s %8s %8s %8s %6s %6s %8s %7s %7s %7s", "ID",
                      "ROLE", "STATE", "IN-STATE", "PARTS", "PROC/s", "OK/s", "FAIL/s", "RETRY/s",
                      "DLQ/s", "INFL", "SCHED", "LAG", "P50ms", "P99ms", "MAXms"));
  errors.push_back("LAST ERROR");

  for (const v1::ThreadMetrics* thread : threads) {
    const Counts counts{snapshot.time_unix_ms(), thread->processed(),
                        thread->succeeded(),     thread->failed_attempts(),
                        thread->sent_to_retry(), thread->dead_lettered()};
    current[thread->thread_id()] = counts;

    // Rates need the same thread in the previous snapshot, time that moved
    // forward, and counts that did not go back (a restarted thread).
    std::string rate[5] = {"-", "-", "-", "-", "-"};
    const auto previous = previous_.find(thread->thread_id());
    if (previous != previous_.end() && counts.time_unix_ms > previous->second.time_unix_ms) {
      const Counts& before = previous->second;
      const double seconds =
          static_cast<double>(counts.time_unix_ms - before.time_unix_ms) / 1000.0;
      const int64_t now_values[5] = {counts.processed, counts.succeeded, counts.failed_attempts,
                                     counts.sent_to_retry, counts.dead_lettered};
      const int64_t before_values[5] = {before.processed, before.succeeded, before.failed_attempts,
                                        before.sent_to_retry, before.dead_lettered};
      for (int i = 0; i < 5; ++i) {
        if (now_values[i] >= before_values[i]) {
          rate[i] = FormatRate(static_cast<double>(now_values[i] - before_values[i]) / seconds);
        }
      }
    }

    const v1::LatencySummary& latency = thread->processing_latency();
    rows.push_back(absl::StrFormat(
        "%4d %-7s %-15s %8s %5d %8s %8s %8s %8s %8s %6d %6d %8d %7s %7s %7s", thread->thread_id(),
        RoleName(thread->role()), ThreadStateName(thread->state()),
        FormatElapsed(thread->time_in_state_ms()), thread->assigned_partitions_size(), rate[0],
        rate[1], rate[2], rate[3], rate[4], thread->in_flight(), thread->scheduled(), thread->lag(),
        FormatMs(latency, latency.p50_ms()), FormatMs(latency, latency.p99_ms()),
        FormatMs(latency, latency.max_ms())));

    std::string error;
    if (!thread->last_error().empty()) {
      if (thread->last_error_unix_ms() > 0) {
        error = absl::StrCat(FormatElapsed(snapshot.time_unix_ms() - thread->last_error_unix_ms()),
                             " ago: ");
      }
      error.append(thread->last_error());
    }
    errors.push_back(std::move(error));
  }

  // The last error takes the rest of the terminal's width.
  size_t error_width = kDefaultErrorWidth;
  if (width > 0) {
    const size_t used = rows.front().size() + 2;
    error_width = std::max(width > used ? width - used : 0, kMinErrorWidth);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    out.append(rows[i]);
    if (!errors[i].empty())
      absl::StrAppend(&out, "  ", SanitizeForTerminal(errors[i], error_width));
    out.push_back('\n');
  }

  previous_ = std::move(current);
  return out;
}

}  // namespace retryd::retryctl
