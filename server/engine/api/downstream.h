// The processor's downstream as the engine sees it (Engine::downstream()):
// what the downstream gate (steering/downstream_gate.h, which names these
// DownstreamGate::Snapshot, RoleSnapshot and Evidence) knows, per role.
//
// Thread-safety: plain values.
#ifndef RETRYD_SERVER_ENGINE_API_DOWNSTREAM_H_
#define RETRYD_SERVER_ENGINE_API_DOWNSTREAM_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/engine/api/processor.h"
#include "server/engine/api/thread_role.h"

namespace retryd::engine {

// Why a role is down.
enum class DownstreamEvidence { kNone, kChannel, kHealth, kRefusals };

struct DownstreamRoleSnapshot {
  ThreadRole role = ThreadRole::kPrimary;
  bool down = false;
  DownstreamEvidence evidence = DownstreamEvidence::kNone;  // While down.
  absl::Time since = absl::InfinitePast();                  // When it last went down.
  int64_t refused_in_a_row = 0;                  // Distinct records, since the last answer.
  int64_t outages = 0;                           // Times it went down.
  int64_t waiting = 0;                           // Records held until the downstream takes them.
  int64_t probes = 0;                            // Probes sent, in all.
  absl::Time last_probe = absl::InfinitePast();  // When the last probe ended.
  std::string last_probe_result;                 // "answered", or why it was refused.
  absl::Time next_probe = absl::InfinitePast();  // While down.
};

struct DownstreamSnapshot {
  bool down = false;  // Some role is down.
  absl::Time since;   // When the longest-down role went down; InfinitePast() if none.
  int64_t consecutive_unavailable = 0;          // Calls refused since the last answer.
  int64_t outages = 0;                          // Times some role went down while none was.
  std::string last_error;                       // The last refusal's reason.
  absl::Time next_probe;                        // While down: the soonest of the roles'.
  DownstreamHealth health;                      // What the processor reported last.
  std::array<DownstreamRoleSnapshot, 2> roles;  // Primary, retry.
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_DOWNSTREAM_H_
