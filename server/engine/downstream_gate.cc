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
  absl::MutexLock lock(&mu_);
  if (probe) probing_ = false;
  consecutive_ = 0;
  if (!down_.load(std::memory_order_relaxed)) return;
  down_.store(false, std::memory_order_relaxed);
  probe_delay_ = absl::Milliseconds(options_.probe_initial_ms);
  LogInfo("downstream answers again after ",
          absl::FormatDuration(absl::Trunc(absl::Now() - since_, absl::Milliseconds(1))),
          "; intake resumes");
}

void DownstreamGate::OnUnavailable(bool probe, std::string reason, absl::Time now) {
  absl::MutexLock lock(&mu_);
  ++consecutive_;
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
  LogWarning("downstream unavailable for ", consecutive_, " calls in a row (", last_error_,
             "): intake pauses; probing it every ", options_.probe_initial_ms, " ms and up to ",
             options_.probe_max_ms, " ms");
}

void DownstreamGate::OnProbeAbandoned() {
  absl::MutexLock lock(&mu_);
  probing_ = false;
}

absl::Time DownstreamGate::RetryAt(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (down_.load(std::memory_order_relaxed)) return std::max(now, next_probe_);
  return now + absl::Milliseconds(options_.probe_initial_ms);
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
