// Whether the processor's downstream takes calls, shared by every thread of
// an engine: a circuit breaker that keeps a downstream outage from being
// taken for poison records.
//
// Up (closed): every call goes. A call that ends kUnavailable (see
// processor.h) counts; `outage_after` of them in a row, with no answer in
// between, take the downstream for down. Down (open): no call goes, except
// one probe at a time once the probe delay has passed (doubling per failed
// probe, from probe_initial_ms to probe_max_ms). Any answer that judges a
// record (ok, retriable, permanent) brings it back up at once.
//
// While it is down the workers pause their intake, and a record whose call
// was unavailable waits (no attempt used) until the next probe.
//
// Thread-safe.
#ifndef RETRYD_SERVER_ENGINE_DOWNSTREAM_GATE_H_
#define RETRYD_SERVER_ENGINE_DOWNSTREAM_GATE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/options.h"

namespace retryd {

class DownstreamGate {
 public:
  enum class Admission {
    kCall,   // Up: call.
    kProbe,  // Down, and this call is the probe: call, and report how it ended.
    kWait,   // Down: do not call before next_probe().
  };

  struct Snapshot {
    bool down = false;
    absl::Time since;  // When it went down; InfinitePast() if never.
    int64_t consecutive_unavailable = 0;
    int64_t outages = 0;     // Times it went down.
    std::string last_error;  // The last unavailable call's reason.
    absl::Time next_probe;   // While down.
  };

  explicit DownstreamGate(const DownstreamOptions& options);

  DownstreamGate(const DownstreamGate&) = delete;
  DownstreamGate& operator=(const DownstreamGate&) = delete;

  Admission Admit(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // A call admitted as kCall or kProbe answered for its record.
  void OnAnswered(bool probe) ABSL_LOCKS_EXCLUDED(mu_);
  // A call admitted as kCall or kProbe found the downstream unavailable.
  void OnUnavailable(bool probe, std::string reason, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // A probe ended without an answer (cancelled by retryd): another may go.
  void OnProbeAbandoned() ABSL_LOCKS_EXCLUDED(mu_);

  // Lock-free, for per-record checks.
  bool down() const { return down_.load(std::memory_order_relaxed); }
  // Answers that judged a record so far: a record whose call was unavailable
  // while this moved on is refused by a downstream that answers others.
  int64_t answers() const { return answers_.load(std::memory_order_relaxed); }
  // When a record whose call was unavailable at `now` should try again.
  absl::Time RetryAt(absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);

  Snapshot snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const DownstreamOptions options_;
  std::atomic<bool> down_{false};
  std::atomic<int64_t> answers_{0};
  // consecutive_ > 0, readable without the lock (OnAnswered's fast path).
  std::atomic<bool> streak_{false};
  mutable absl::Mutex mu_;  // Guards the fields below; down_ changes under it.
  int64_t consecutive_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t outages_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_probe_ ABSL_GUARDED_BY(mu_);
  absl::Duration probe_delay_ ABSL_GUARDED_BY(mu_);
  bool probing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_ENGINE_DOWNSTREAM_GATE_H_
