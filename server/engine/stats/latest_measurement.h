// A value that several threads measure, each measurement taking a while
// (the retry backlog: two round trips to Kafka, from the health probe and
// from a drain at once): the measurement that began last is the one kept,
// whichever ends last. Without that, a probe that began before a drain's
// last measurement and ended after it would report the backlog the drain
// had already seen emptied.
//
// Thread-safety: any thread may call any method.
#ifndef RETRYD_SERVER_ENGINE_STATS_LATEST_MEASUREMENT_H_
#define RETRYD_SERVER_ENGINE_STATS_LATEST_MEASUREMENT_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace retryd::engine {

class LatestMeasurement {
 public:
  // Taken before a measurement begins; orders it among the others.
  using Ticket = int64_t;
  Ticket Begin() { return next_.fetch_add(1, std::memory_order_relaxed) + 1; }

  // Keeps `value`, measured under `ticket`, unless a measurement begun later
  // was kept already; returns whether it was kept.
  bool Store(Ticket ticket, int64_t value) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (ticket <= stored_) return false;
    stored_ = ticket;
    value_.store(value, std::memory_order_relaxed);
    return true;
  }

  // The value kept last; none before the first Store.
  std::optional<int64_t> value() const {
    const int64_t v = value_.load(std::memory_order_relaxed);
    if (v == kNone) return std::nullopt;
    return v;
  }

 private:
  static constexpr int64_t kNone = INT64_MIN;

  std::atomic<Ticket> next_{0};
  absl::Mutex mu_;  // Orders the stores: guards `stored_` (and writes of `value_`).
  Ticket stored_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> value_{kNone};  // Read without `mu_`.
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_STATS_LATEST_MEASUREMENT_H_
