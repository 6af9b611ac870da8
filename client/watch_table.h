// The table `retryctl watch` shows: one row per thread, with rates per
// second computed from the cumulative counts of consecutive snapshots.
//
// Typical use:
//   WatchTable table(options);
//   for each snapshot: out << table.Render(snapshot);
//
// Thread-safety: not thread-safe; one watcher renders on one thread.
#ifndef RETRYD_CLIENT_WATCH_TABLE_H_
#define RETRYD_CLIENT_WATCH_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "retryd/v1/control.pb.h"

namespace retryd::retryctl {

struct WatchTableOptions {
  // Zone of the clock in the header line.
  absl::TimeZone time_zone = absl::LocalTimeZone();
};

class WatchTable {
 public:
  explicit WatchTable(WatchTableOptions options) : options_(std::move(options)) {}

  // The last-error column gets what the terminal's `width` leaves of it,
  // at least kMinErrorWidth; width 0 (unknown): kDefaultErrorWidth.
  static constexpr size_t kDefaultErrorWidth = 48;
  static constexpr size_t kMinErrorWidth = 16;

  // The header line and table of `snapshot`, ending in a newline. Rates
  // compare it with the previous snapshot rendered; a thread not in that
  // one shows '-' (so do all threads in the first snapshot).
  std::string Render(const v1::MetricsSnapshot& snapshot, size_t width = 0);

 private:
  // The cumulative counts the rates are computed from, one per rate column.
  struct Counts {
    int64_t time_unix_ms = 0;
    std::vector<int64_t> values;
  };

  const WatchTableOptions options_;
  // The previous snapshot's counts by thread id.
  absl::flat_hash_map<uint32_t, Counts> previous_;
};

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_WATCH_TABLE_H_
