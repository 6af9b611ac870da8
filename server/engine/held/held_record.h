// A record a thread holds, as it holds it: the record, where it was read
// from, its attempt, its failures so far, its refusals by the downstream and
// its bytes charged to the thread (ByteCharge). What the worker's parts pass
// along (DueScheduler, KeyLanes, InOrderQueue, hand-offs, calls).
//
// Thread-safety: a plain value, moved between the parts of one worker's
// thread.
#ifndef RETRYD_SERVER_ENGINE_HELD_HELD_RECORD_H_
#define RETRYD_SERVER_ENGINE_HELD_HELD_RECORD_H_

#include <cstdint>
#include <string>
#include <utility>

#include "server/engine/held/byte_charge.h"
#include "server/model/record.h"

namespace retryd::engine {

struct HeldRecord {
  // The record as the processor sees it: original coordinates, retryd
  // headers stripped.
  Record record;
  // Where it was consumed from (a retry topic partition). Counts and
  // DropPartition() key on this.
  TopicPartition source;
  int64_t source_offset = -1;
  int attempt = 1;  // The attempt to make when due.
  int64_t first_failure_ms = 0;
  int64_t due_ms = 0;
  std::string last_error;
  // The last failure's machine-readable reason (Outcome::error_reason).
  std::string last_error_reason;
  // The last_error of its first failure; empty before, or when not known.
  std::string first_error;
  // Unix ms when this thread read it (what ListInFlight measures a record
  // that never failed from).
  int64_t read_ms = 0;
  // Held by Defer() (the downstream refused it, or is down) rather than
  // after a failure.
  bool deferred = false;
  // A call for it was refused on a ready channel since it was read (see
  // DownstreamGate::Verdict::mark): the next refusal, while its role is
  // up, is its own. Not kept in the retry topic: each attempt starts anew.
  bool refused_before = false;
  // The DownstreamGate's outage_epoch() when it was marked so.
  int64_t refused_epoch = 0;
  // Its previous attempt ended in a refusal judged its own (see
  // DownstreamGate::RefusedRecord).
  bool refused_last_attempt = false;
  // The DownstreamGate's answers() at its first refusal since it was read
  // (-1: none), for the reason a refusal of its own gives.
  int64_t refused_at_answers = -1;
  // Counts it among its role's records waiting for the downstream while it
  // is deferred (DownstreamGate::CountWaiting).
  ByteCharge waiting;
  // Key order: the record in progress of its key on this thread (see
  // Worker's lanes): the records of its key read after it wait for it.
  bool laned = false;
  // Its bytes, charged to the thread that holds it until it is done there.
  ByteCharge charge;
};

// A record just read from `source` at `offset`, at `read_ms`, its bytes
// `charge`d: what every held record starts from (its first attempt). The
// reader fills in the record itself.
inline HeldRecord ReadFrom(const TopicPartition& source, int64_t offset, int64_t read_ms,
                           ByteCharge charge) {
  HeldRecord held;
  held.charge = std::move(charge);
  held.source = source;
  held.source_offset = offset;
  held.read_ms = read_ms;
  return held;
}

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HELD_HELD_RECORD_H_
