#include "server/engine/steering/downstream_gate.h"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/logging.h"

namespace retryd::engine {
namespace {

const char* RoleName(size_t index) { return index == 0 ? "primary" : "retry"; }

}  // namespace

const char* DownstreamGate::EvidenceName(Evidence evidence) {
  switch (evidence) {
    case Evidence::kNone:
      return "none";
    case Evidence::kChannel:
      return "channel";
    case Evidence::kHealth:
      return "health";
    case Evidence::kRefusals:
      return "refusals";
  }
  return "unknown";
}

uint64_t DownstreamGate::RecordId(const std::string& topic, int32_t partition, int64_t offset) {
  return absl::Hash<std::tuple<std::string_view, int32_t, int64_t>>{}(
      std::make_tuple(std::string_view(topic), partition, offset));
}

DownstreamGate::DownstreamGate(const DownstreamOptions& options, const Processor* processor,
                               absl::Duration max_backoff)
    : options_(options),
      processor_(processor),
      refusal_probe_max_(
          std::min(absl::Milliseconds(options.probe_max_ms),
                   std::max(max_backoff, absl::Milliseconds(options.probe_initial_ms)))),
      waiting_{std::make_shared<std::atomic<int64_t>>(0),
               std::make_shared<std::atomic<int64_t>>(0)} {
  absl::MutexLock lock(&mu_);
  for (Role& r : roles_) r.probe_delay = absl::Milliseconds(options_.probe_initial_ms);
}

DownstreamHealth DownstreamGate::ReadHealth() const {
  return processor_ == nullptr ? DownstreamHealth{} : processor_->health();
}

DownstreamGate::Admission DownstreamGate::Admit(ThreadRole role, uint64_t id, absl::Time now) {
  const size_t i = Index(role);
  if (!down_[i].load(std::memory_order_relaxed)) return Admission::kCall;
  const DownstreamHealth health = ReadHealth();
  absl::MutexLock lock(&mu_);
  TakeHealth(health, now);
  if (!down_[i].load(std::memory_order_relaxed)) return Admission::kCall;
  Role& r = roles_[i];
  if (r.probing || now < r.next_probe) return Admission::kWait;
  // Rotation: the record probed last waits while another does (the caller
  // no longer counts this one among the waiting).
  if (r.probed_any && r.last_probed == id && waiting_[i]->load(std::memory_order_relaxed) > 0) {
    return Admission::kWait;
  }
  r.probing = true;
  r.probed_any = true;
  r.last_probed = id;
  ++r.probes;
  // Should the probe never report (it always does), the next goes after
  // another delay rather than never.
  r.next_probe = now + r.probe_delay;
  return Admission::kProbe;
}

void DownstreamGate::OnAnswered(ThreadRole role, bool probe, absl::Time now) {
  answers_.fetch_add(1, std::memory_order_relaxed);
  // Every record's answer comes here: with nothing to reset, no lock.
  if (!probe && !down() && !streak_.load(std::memory_order_relaxed)) return;
  absl::MutexLock lock(&mu_);
  if (probe) {
    Role& r = roles_[Index(role)];
    r.probing = false;
    r.last_probe = now;
    r.last_probe_result = "answered";
  }
  consecutive_ = 0;
  for (Role& r : roles_) r.refused.clear();
  streak_.store(false, std::memory_order_relaxed);
  if (down()) AllUp(now, "a record was answered");
}

namespace {

// The reasons a refusal judged the record's own gives (documented in
// processor.proto): IsRefusalReason knows them by these beginnings.
constexpr absl::string_view kRefusedWhile = "refused while ";
constexpr absl::string_view kRefusedAgain = "refused again ";
constexpr absl::string_view kRefusedAs = "refused as the ";

// What the processor's health shows of the downstream, when a call was
// refused with `reason`: kChannel or kHealth (the downstream down, `why`
// saying so), or kNone.
DownstreamGate::Evidence ShownDown(const DownstreamHealth& health, const std::string& reason,
                                   std::string& why) {
  if (health.channel == DownstreamHealth::Channel::kNotReady) {
    why = absl::StrCat("its channel is not ready (", reason, ")");
    return DownstreamGate::Evidence::kChannel;
  }
  if (health.serving == DownstreamHealth::Serving::kNotServing) {
    why = absl::StrCat("its health service answers NOT_SERVING (", reason, ")");
    return DownstreamGate::Evidence::kHealth;
  }
  return DownstreamGate::Evidence::kNone;
}

// Why a record refused before (and made to wait) owns its refusal now.
std::string RefusedAgainReason(const DownstreamGate::RefusedRecord& record,
                               const std::string& reason) {
  return record.answers_since > 0
             ? absl::StrCat(kRefusedWhile, "the downstream answered ", record.answers_since,
                            " other records: ", reason)
             : absl::StrCat(kRefusedAgain, "while nothing showed the downstream down: ", reason);
}

}  // namespace

bool DownstreamGate::IsRefusalReason(absl::string_view error) {
  return absl::StartsWith(error, kRefusedWhile) || absl::StartsWith(error, kRefusedAgain) ||
         absl::StartsWith(error, kRefusedAs);
}

DownstreamGate::Verdict DownstreamGate::Refused(ThreadRole role, const RefusedRecord& record,
                                                bool probe, const std::string& reason,
                                                absl::Time now) {
  const DownstreamHealth health = ReadHealth();
  absl::MutexLock lock(&mu_);
  TakeHealth(health, now);
  ++consecutive_;
  last_error_ = reason;
  streak_.store(true, std::memory_order_relaxed);
  const size_t i = Index(role);
  Role& r = roles_[i];

  // The downstream itself says it is down: every role waits, no attempt used.
  std::string why;
  if (const Evidence shown = ShownDown(health, reason, why); shown != Evidence::kNone) {
    for (size_t j = 0; j < roles_.size(); ++j) GoDown(j, shown, now, why);
    if (probe) ProbeRefused(i, now, reason);
    return {.own = false, .mark = false, .reason = {}, .epoch = outage_epoch()};
  }

  // On a ready (or unknown) channel.
  if (down_[i].load(std::memory_order_relaxed)) {
    // A call admitted before the role went down waits for the probes.
    if (!probe) return {.own = false, .mark = true, .reason = {}, .epoch = outage_epoch()};
    if (r.evidence != Evidence::kRefusals) {
      // Down on the channel or the health service, which no longer show
      // it: this probe uses no attempt, the next ones do (kRefusals).
      r.evidence = Evidence::kRefusals;
      ProbeRefused(i, now, reason);
      return {.own = false, .mark = true, .reason = {}, .epoch = outage_epoch()};
    }
    ProbeRefused(i, now, reason);
    return {.own = true,
            .mark = true,
            .reason = absl::StrCat(
                kRefusedAs, RoleName(i),
                " role's probe while the downstream answered no other record: ", reason)};
  }
  if (probe) {  // Admitted as a probe, but the role came up meanwhile.
    r.probing = false;
    r.last_probe = now;
    r.last_probe_result = reason;
  }
  if (record.refused_before) {
    return {.own = true,
            .mark = true,
            .reason = RefusedAgainReason(record, reason),
            .epoch = outage_epoch()};
  }
  if (!record.refused_last_attempt) {
    r.refused.insert(record.id);
    if (static_cast<int64_t>(r.refused.size()) >= options_.outage_after) {
      GoDown(i, Evidence::kRefusals, now,
             absl::StrCat(r.refused.size(), " records refused in a row with no answer between (",
                          reason, ")"));
    }
  }
  return {.own = false, .mark = true, .reason = {}, .epoch = outage_epoch()};
}

void DownstreamGate::OnProbeAbandoned(ThreadRole role) {
  absl::MutexLock lock(&mu_);
  roles_[Index(role)].probing = false;
}

bool DownstreamGate::IntakePaused(ThreadRole role, absl::Time now) {
  const size_t i = Index(role);
  const DownstreamHealth health = ReadHealth();
  if (!down_[i].load(std::memory_order_relaxed) &&
      health.checks == seen_checks_.load(std::memory_order_relaxed)) {
    return false;
  }
  absl::MutexLock lock(&mu_);
  TakeHealth(health, now);
  if (!down_[i].load(std::memory_order_relaxed)) return false;
  return roles_[i].probing || waiting_[i]->load(std::memory_order_relaxed) > 0;
}

void DownstreamGate::TakeHealth(const DownstreamHealth& health, absl::Time now) {
  health_ = health;
  if (health.checks != seen_checks_.load(std::memory_order_relaxed)) {
    seen_checks_.store(health.checks, std::memory_order_relaxed);
    if (health.serving == DownstreamHealth::Serving::kServing) {
      answers_.fetch_add(1, std::memory_order_relaxed);
      consecutive_ = 0;
      for (Role& r : roles_) r.refused.clear();
      streak_.store(false, std::memory_order_relaxed);
      if (down()) AllUp(now, "its health service answers SERVING");
    } else if (health.serving == DownstreamHealth::Serving::kNotServing) {
      for (size_t j = 0; j < roles_.size(); ++j) {
        GoDown(j, Evidence::kHealth, now, "its health service answers NOT_SERVING");
      }
    }
  }
  if (health.channel != DownstreamHealth::Channel::kReady) return;
  for (size_t j = 0; j < roles_.size(); ++j) {
    Role& r = roles_[j];
    if (down_[j].load(std::memory_order_relaxed) && r.evidence == Evidence::kChannel &&
        !r.probing && r.next_probe > now) {
      r.next_probe = now;  // Connected again: see at once whether it answers.
    }
  }
}

void DownstreamGate::GoDown(size_t index, Evidence evidence, absl::Time now,
                            const std::string& why) {
  Role& r = roles_[index];
  const bool shown = evidence == Evidence::kChannel || evidence == Evidence::kHealth;
  if (shown && !(down_[index].load(std::memory_order_relaxed) && r.evidence == evidence)) {
    epoch_.fetch_add(1, std::memory_order_relaxed);
  }
  if (down_[index].load(std::memory_order_relaxed)) {
    r.evidence = evidence;
    return;
  }
  if (!down()) ++outages_;
  down_[index].store(true, std::memory_order_relaxed);
  r.evidence = evidence;
  r.since = now;
  ++r.outages;
  r.probing = false;
  r.probe_delay = absl::Milliseconds(options_.probe_initial_ms);
  r.next_probe = now + r.probe_delay;
  r.refused.clear();
  LogWarning("downstream taken for down for the ", RoleName(index), " role: ", why,
             "; its intake pauses, probing every ", options_.probe_initial_ms, " ms and up to ",
             absl::ToInt64Milliseconds(evidence == Evidence::kRefusals
                                           ? refusal_probe_max_
                                           : absl::Milliseconds(options_.probe_max_ms)),
             " ms");
}

void DownstreamGate::AllUp(absl::Time now, const char* why) {
  absl::Time since = absl::InfiniteFuture();
  for (size_t j = 0; j < roles_.size(); ++j) {
    if (!down_[j].load(std::memory_order_relaxed)) continue;
    Role& r = roles_[j];
    since = std::min(since, r.since);
    down_[j].store(false, std::memory_order_relaxed);
    r.evidence = Evidence::kNone;
    r.probe_delay = absl::Milliseconds(options_.probe_initial_ms);
  }
  if (since == absl::InfiniteFuture()) return;
  LogInfo("downstream up again after ",
          absl::FormatDuration(absl::Trunc(now - since, absl::Milliseconds(1))), " (", why,
          "); intake resumes");
}

void DownstreamGate::ProbeRefused(size_t index, absl::Time now, const std::string& why) {
  Role& r = roles_[index];
  r.probing = false;
  r.last_probe = now;
  r.last_probe_result = why;
  const absl::Duration longest = r.evidence == Evidence::kRefusals
                                     ? refusal_probe_max_
                                     : absl::Milliseconds(options_.probe_max_ms);
  r.probe_delay = std::min(r.probe_delay * 2, longest);
  r.next_probe = now + r.probe_delay;
}

absl::Time DownstreamGate::RetryAt(ThreadRole role, absl::Time now) const {
  // Never `now`: while a probe outlasts its delay, next_probe is past, and a
  // record due at once would be popped and deferred again in a loop.
  const absl::Time soonest = now + absl::Milliseconds(options_.probe_initial_ms);
  const size_t i = Index(role);
  if (!down_[i].load(std::memory_order_relaxed)) return soonest;
  absl::MutexLock lock(&mu_);
  return std::max(soonest, roles_[i].next_probe);
}

DownstreamGate::Snapshot DownstreamGate::snapshot() const {
  absl::MutexLock lock(&mu_);
  Snapshot s;
  s.since = absl::InfinitePast();
  s.next_probe = absl::InfinitePast();
  s.consecutive_unavailable = consecutive_;
  s.outages = outages_;
  s.last_error = last_error_;
  s.health = health_;
  for (size_t j = 0; j < roles_.size(); ++j) {
    const Role& r = roles_[j];
    RoleSnapshot& out = s.roles[j];
    out.role = j == 0 ? ThreadRole::kPrimary : ThreadRole::kRetry;
    out.down = down_[j].load(std::memory_order_relaxed);
    out.evidence = out.down ? r.evidence : Evidence::kNone;
    out.since = r.since;
    out.refused_in_a_row = static_cast<int64_t>(r.refused.size());
    out.outages = r.outages;
    out.waiting = waiting_[j]->load(std::memory_order_relaxed);
    out.probes = r.probes;
    out.last_probe = r.last_probe;
    out.last_probe_result = r.last_probe_result;
    if (!out.down) continue;
    out.next_probe = r.next_probe;
    if (!s.down || r.since < s.since) s.since = r.since;
    if (!s.down || r.next_probe < s.next_probe) s.next_probe = r.next_probe;
    s.down = true;
  }
  return s;
}

}  // namespace retryd::engine
