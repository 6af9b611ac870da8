#include "server/engine/downstream_gate.h"

#include <algorithm>
#include <utility>

#include "server/common/logging.h"

namespace retryd {

DownstreamGate::DownstreamGate(const DownstreamOptions& options)
    : options_(options), probe_delay_(absl::Milliseconds(options.probe_initial_ms)) {}

DownstreamGate::Admission DownstreamGate::Admit(absl::Time now) {
  if (!down()) return Admission::kCall;
  absl::MutexLock lock(&mu_);
  if (!down_.load(std::memory_order_relaxed)) return Admission::kCall;
  if (probing_ || now < next_probe_) return Admission::kWait;
  probing_ = true;
  // Should the probe never report (it always does), the next goes after
  // another delay rather than never.
  next_probe_ = now + probe_delay_;
  return Admission::kProbe;
}

void DownstreamGate::OnAnswered(bool probe) {
  answers_.fetch_add(1, std::memory_order_relaxed);
  // Every record's answer comes here: with nothing to reset, no lock.
  if (!probe && !down() && !streak_.load(std::memory_order_relaxed)) return;
  absl::Duration was_down;
  {
    absl::MutexLock lock(&mu_);
    if (probe) probing_ = false;
    consecutive_ = 0;
    streak_.store(false, std::memory_order_relaxed);
    if (!down_.load(std::memory_order_relaxed)) return;
    down_.store(false, std::memory_order_relaxed);
    probe_delay_ = absl::Milliseconds(options_.probe_initial_ms);
    was_down = absl::Now() - since_;
  }
  LogInfo("downstream answers again after ",
          absl::FormatDuration(absl::Trunc(was_down, absl::Milliseconds(1))), "; intake resumes");
}

void DownstreamGate::OnUnavailable(bool probe, std::string reason, absl::Time now) {
  int64_t in_a_row = 0;
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    ++consecutive_;
    streak_.store(true, std::memory_order_relaxed);
    last_error_ = std::move(reason);
    if (down_.load(std::memory_order_relaxed)) {
      if (!probe) return;
      probing_ = false;
      probe_delay_ = std::min(probe_delay_ * 2, absl::Milliseconds(options_.probe_max_ms));
      next_probe_ = now + probe_delay_;
      return;
    }
    if (consecutive_ < options_.outage_after) return;
    down_.store(true, std::memory_order_relaxed);
    ++outages_;
    since_ = now;
    probing_ = false;
    probe_delay_ = absl::Milliseconds(options_.probe_initial_ms);
    next_probe_ = now + probe_delay_;
    in_a_row = consecutive_;
    why = last_error_;
  }
  LogWarning("downstream unavailable for ", in_a_row, " calls in a row (", why,
             "): intake pauses; probing it every ", options_.probe_initial_ms, " ms and up to ",
             options_.probe_max_ms, " ms");
}

void DownstreamGate::OnProbeAbandoned() {
  absl::MutexLock lock(&mu_);
  probing_ = false;
}

absl::Time DownstreamGate::RetryAt(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  // Never `now`: while a probe outlasts its delay, next_probe_ is past, and a
  // record due at once would be popped and deferred again in a loop.
  const absl::Time soonest = now + absl::Milliseconds(options_.probe_initial_ms);
  if (down_.load(std::memory_order_relaxed)) return std::max(soonest, next_probe_);
  return soonest;
}

DownstreamGate::Snapshot DownstreamGate::snapshot() const {
  absl::MutexLock lock(&mu_);
  Snapshot s;
  s.down = down_.load(std::memory_order_relaxed);
  s.since = since_;
  s.consecutive_unavailable = consecutive_;
  s.outages = outages_;
  s.last_error = last_error_;
  s.next_probe = next_probe_;
  return s;
}

}  // namespace retryd
