// Whether the processor's downstream takes calls, per role (primary, retry):
// a circuit breaker that keeps a downstream outage from being taken for
// poison records, and a poison record from being taken for an outage.
//
// Evidence that the downstream is down, and what each kind does:
//  * kChannel: its channel is not ready (connecting, the connection refused
//    or reset), as the processor reports (Processor::health());
//  * kHealth: its health service answers NOT_SERVING;
//  * kRefusals: `outage_after` distinct records of one role refused in a
//    row (Outcome::kUnavailable), on a ready channel, with no answer from
//    the downstream in between.
// kChannel and kHealth take every role down; kRefusals only the role whose
// records were refused. The retry role holds exactly the records that failed
// before, so its refusals must not stop the primary's intake.
//
// Up: every call goes. Down: that role's workers pause their intake; one
// probe at a time goes (per role), once the probe delay has passed (doubling
// per refused probe, from probe_initial_ms to probe_max_ms; under kRefusals
// alone no longer than the longest retry backoff, since each such probe uses
// an attempt). Probes rotate: the record probed last is not probed again
// while another waits. A probe waiting on kChannel goes at once when the
// channel is ready again. Any answer — a record judged on any thread, or a
// health check answering SERVING — brings every role up.
//
// A refusal (Refused()) is the record's own, and uses an attempt, when
// nothing shows the downstream down (its channel is ready or unknown, its
// health is not NOT_SERVING) and either the record was refused so before
// (then it waited once, and its role did not go down meanwhile) or it was
// its role's probe while the role was down on kRefusals (a probe refused on
// a ready channel while the role is down on kChannel or kHealth only moves
// the role to kRefusals). Otherwise it waits,
// using no attempt. A record whose previous attempt ended in such a refusal
// (read back from the retry topic) does not count toward kRefusals: the
// retry role would otherwise take the records it exists for, refused on
// their earlier attempts, for an outage.
//
// Thread-safe. The fast paths (Admit and IntakePaused while every role is up,
// an answer with no streak to reset) take no lock.
#ifndef RETRYD_SERVER_ENGINE_STEERING_DOWNSTREAM_GATE_H_
#define RETRYD_SERVER_ENGINE_STEERING_DOWNSTREAM_GATE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/api/downstream.h"
#include "server/engine/api/options.h"
#include "server/engine/api/processor.h"
#include "server/engine/api/thread_role.h"
#include "server/engine/held/byte_charge.h"

namespace retryd::engine {

class DownstreamGate {
 public:
  enum class Admission {
    kCall,   // Up: call.
    kProbe,  // Down, and this call is the role's probe: call, and report how it ended.
    kWait,   // Down: do not call before RetryAt().
  };

  // Why a role is down (api/downstream.h).
  using Evidence = DownstreamEvidence;
  static const char* EvidenceName(Evidence evidence);

  // What a refused call means for its record.
  struct Verdict {
    // True: the refusal is the record's own; judge it by its fallback, with
    // `reason` (which says why it counts) as the failure's reason. False:
    // it waits, using no attempt.
    bool own = false;
    // The refusal came on a ready channel: the record's next one, while its
    // role is up, is its own (the caller keeps this as `refused_before`).
    bool mark = false;
    std::string reason;
    // outage_epoch() when the verdict was given: a mark from an earlier
    // epoch no longer counts (see outage_epoch()).
    int64_t epoch = 0;
  };

  // What snapshot() reports (api/downstream.h).
  using RoleSnapshot = DownstreamRoleSnapshot;
  using Snapshot = DownstreamSnapshot;

  // `processor` (may be null: no health) must outlive the gate; `max_backoff`
  // caps the probe delay of a role down on kRefusals alone.
  DownstreamGate(const DownstreamOptions& options, const Processor* processor,
                 absl::Duration max_backoff);

  DownstreamGate(const DownstreamGate&) = delete;
  DownstreamGate& operator=(const DownstreamGate&) = delete;

  // May a call for the record `id` (see RecordId) of `role` go now?
  Admission Admit(ThreadRole role, uint64_t id, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // A call admitted as kCall or kProbe answered for its record.
  void OnAnswered(ThreadRole role, bool probe, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // What the engine knows of a refused record's past.
  struct RefusedRecord {
    uint64_t id = 0;  // RecordId().
    // A refusal of it on a ready channel, since it was last read, already
    // made it wait (Verdict::mark).
    bool refused_before = false;
    // Its previous attempt ended in a refusal judged its own (its last
    // error is one of this gate's reasons, IsRefusalReason): its refusals
    // are no evidence of an outage.
    bool refused_last_attempt = false;
    // Answers since its first refusal here.
    int64_t answers_since = 0;
  };

  // A call admitted as kCall or kProbe was refused (Outcome::kUnavailable)
  // for `record`, with `reason`.
  Verdict Refused(ThreadRole role, const RefusedRecord& record, bool probe,
                  const std::string& reason, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `error` (a record's last error) is a reason Refused() gave.
  static bool IsRefusalReason(absl::string_view error);
  // A probe ended without an answer (cancelled by retryd): another may go.
  void OnProbeAbandoned(ThreadRole role) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `role`'s workers pause their intake: while the role is down and
  // records wait for it (or a probe is out). A role down with nothing to
  // probe lets records in, so that one of them becomes the probe. Also
  // takes in what the processor's health says. Every worker, every loop.
  bool IntakePaused(ThreadRole role, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // Lock-free, for per-record checks.
  bool down(ThreadRole role) const { return down_[Index(role)].load(std::memory_order_relaxed); }
  bool down() const { return down(ThreadRole::kPrimary) || down(ThreadRole::kRetry); }
  // Moves each time the channel or the health service takes the roles down:
  // a record refused (and marked) before that was likely refused by the
  // outage coming, so its mark no longer makes its next refusal its own.
  int64_t outage_epoch() const { return epoch_.load(std::memory_order_relaxed); }
  // Answers so far: records judged, and health checks answering SERVING.
  int64_t answers() const { return answers_.load(std::memory_order_relaxed); }
  // When a record of `role` that must wait at `now` should try again.
  absl::Time RetryAt(ThreadRole role, absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);
  // Counts one record of `role` waiting (deferred) for as long as the
  // charge lives: it goes with the record.
  ByteCharge CountWaiting(ThreadRole role) const { return ByteCharge(waiting_[Index(role)], 1); }

  Snapshot snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  // A record's identity for the gate: its original coordinates, the same on
  // every attempt.
  static uint64_t RecordId(const std::string& topic, int32_t partition, int64_t offset);

 private:
  struct Role {
    Evidence evidence = Evidence::kNone;
    absl::Time since = absl::InfinitePast();
    absl::flat_hash_set<uint64_t> refused;  // Distinct records since the last answer.
    int64_t outages = 0;
    absl::Time next_probe = absl::InfinitePast();
    absl::Duration probe_delay;
    bool probing = false;
    bool probed_any = false;
    uint64_t last_probed = 0;
    int64_t probes = 0;
    absl::Time last_probe = absl::InfinitePast();
    std::string last_probe_result;
  };
  static size_t Index(ThreadRole role) { return role == ThreadRole::kPrimary ? 0 : 1; }

  // Reads the processor's health: a new SERVING answer counts as an answer
  // (every role up), a new NOT_SERVING takes every role down, and a ready
  // channel lets a probe waiting on kChannel go at once.
  void TakeHealth(const DownstreamHealth& health, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GoDown(size_t index, Evidence evidence, absl::Time now, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AllUp(absl::Time now, const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProbeRefused(size_t index, absl::Time now, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  DownstreamHealth ReadHealth() const;

  // Constant after construction.
  const DownstreamOptions options_;
  const Processor* const processor_;
  const absl::Duration refusal_probe_max_;
  // Records waiting per role (CountWaiting), counted by their charges.
  const std::array<std::shared_ptr<std::atomic<int64_t>>, 2> waiting_;

  // Lock-free, written under mu_.
  std::array<std::atomic<bool>, 2> down_{};
  std::atomic<int64_t> answers_{0};
  std::atomic<int64_t> epoch_{0};  // outage_epoch().
  // Some role has refusals counted since the last answer (OnAnswered's fast
  // path reads it without the lock).
  std::atomic<bool> streak_{false};
  // The health checks taken in so far (DownstreamHealth::checks).
  std::atomic<int64_t> seen_checks_{0};

  mutable absl::Mutex mu_;  // Guards the fields below.
  std::array<Role, 2> roles_ ABSL_GUARDED_BY(mu_);
  int64_t consecutive_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t outages_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  DownstreamHealth health_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_STEERING_DOWNSTREAM_GATE_H_
