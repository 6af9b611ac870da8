// What an operator sees of the records the engine's threads hold
// (Engine::ListInFlight), and a record named by its original coordinates
// (Engine::DeadLetterRecord). held/in_flight.h has the requests that reach
// a worker's thread to list them or to dead-letter one of them.
//
// Thread-safety: plain values.
#ifndef RETRYD_SERVER_ENGINE_API_IN_FLIGHT_H_
#define RETRYD_SERVER_ENGINE_API_IN_FLIGHT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "server/engine/api/thread_role.h"
#include "server/model/record.h"

namespace retryd::engine {

// Why a record has not completed yet. New reasons may be added (records
// parked behind an earlier record of their key, in key order); readers show
// an unknown one as it comes.
enum class InFlightState {
  kInCall,         // In a processor call now.
  kWaitingDue,     // Failed; held until its due time (by a retry thread, or in place in order).
  kWaitingBehind,  // Queued behind a held record of its partition (or for a call slot).
  kDeferred,       // Held while the processor's downstream is down; no attempt used.
  kParked,         // Key order: waiting behind an earlier record of its key.
};

inline const char* InFlightStateName(InFlightState state) {
  switch (state) {
    case InFlightState::kInCall:
      return "IN_CALL";
    case InFlightState::kWaitingDue:
      return "WAITING_DUE";
    case InFlightState::kWaitingBehind:
      return "WAITING_BEHIND";
    case InFlightState::kDeferred:
      return "DEFERRED";
    case InFlightState::kParked:
      return "PARKED";
  }
  return "UNKNOWN";
}

// One record a worker holds.
struct InFlightRecord {
  int thread_id = 0;
  ThreadRole role = ThreadRole::kPrimary;
  InFlightState state = InFlightState::kInCall;
  // The record's original input coordinates.
  std::string topic;
  int32_t partition = 0;
  int64_t offset = -1;
  // Where the thread read it: the input itself for a primary thread, the
  // retry topic for a retry thread.
  TopicPartition read_from;
  int64_t read_offset = -1;
  std::optional<std::string> key;
  int attempt = 1;       // The attempt in progress (kInCall) or to make next.
  int64_t due_ms = 0;    // Unix ms; 0 when it waits for no time (kInCall, kWaitingBehind).
  int64_t since_ms = 0;  // Unix ms: its first failure, else when it was read.
  std::string last_error;
};

// A record by its original input coordinates.
struct RecordCoordinates {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = -1;

  bool Names(const Record& record) const {
    return record.offset == offset && record.partition == partition && record.topic == topic;
  }
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_IN_FLIGHT_H_
