// Every place a worker holds a record, seen as one: its processor calls, the
// records waiting for their due time, those waiting for their partition (in
// order, or for a call slot) and those waiting in their key's lane. What
// ListInFlight shows of them, and the record an operator dead-letters taken
// out of wherever it waits.
//
// It owns nothing: it borrows the parts that own the records (Calls,
// DueScheduler, InOrderQueue, KeyLanes), which outlive it.
//
// Thread-safety: NOT thread-safe. The worker's own thread only, as the parts
// it borrows.
#ifndef RETRYD_SERVER_ENGINE_WORKER_HELD_RECORDS_H_
#define RETRYD_SERVER_ENGINE_WORKER_HELD_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "server/engine/held/in_flight.h"
#include "server/engine/ordering/in_order_queue.h"
#include "server/engine/ordering/key_lanes.h"
#include "server/engine/stats/thread_stats.h"
#include "server/engine/worker/calls.h"
#include "server/engine/worker/due_scheduler.h"

namespace retryd::engine {

class HeldRecords {
 public:
  HeldRecords(int thread_id, ThreadRole role, const Calls& calls, DueScheduler& scheduler,
              InOrderQueue& queue, KeyLanes& lanes);

  HeldRecords(const HeldRecords&) = delete;
  HeldRecords& operator=(const HeldRecords&) = delete;

  // The records held, the oldest `limit` of them (KeepOldest); `total` is
  // how many there are. A call already cancelled is not shown: its record
  // is on its way out.
  std::vector<InFlightRecord> List(size_t limit, int64_t& total) const;
  // Whether `record` is in a processor call now (not cancelled).
  bool InCall(const RecordCoordinates& record) const;
  // Takes `record` out of where it waits: for its due time, in its key's
  // lane (the lane goes on without it), or for its partition. nullopt when
  // it waits nowhere here.
  std::optional<HeldRecord> Take(const RecordCoordinates& record);

 private:
  InFlightRecord Describe(const HeldRecord& held, InFlightState state) const;

  const int thread_id_;
  const ThreadRole role_;
  const Calls& calls_;
  DueScheduler& scheduler_;
  InOrderQueue& queue_;
  KeyLanes& lanes_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_HELD_RECORDS_H_
