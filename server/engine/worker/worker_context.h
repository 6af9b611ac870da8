// What every worker shares with the others and with the Engine that owns
// them: the options, the processor, the producer, the ordering mode and the
// key-order state. Apart from worker.h so the Engine's public header names
// it without the worker's inside.
//
// Thread-safety: the pointers are set once by the Engine before any worker
// starts; what they point to says how it may be used.
#ifndef RETRYD_SERVER_ENGINE_WORKER_WORKER_CONTEXT_H_
#define RETRYD_SERVER_ENGINE_WORKER_WORKER_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/engine/api/options.h"
#include "server/engine/api/processor.h"
#include "server/engine/handoff/producer_slot.h"
#include "server/engine/ordering/key_parking.h"
#include "server/engine/steering/downstream_gate.h"

namespace retryd::engine {

// What every worker shares; owned by the Engine, outlives its workers.
struct WorkerContext {
  const EngineOptions* options = nullptr;
  Processor* processor = nullptr;
  // The producer to hand records to; each worker takes its own reference
  // and moves to a replacement after a fatal error.
  ProducerSlot* producers = nullptr;
  // Read per record, so a runtime switch takes effect at the next record.
  const std::atomic<Ordering>* ordering = nullptr;
  // While set, primary threads pause all their partitions (a drain).
  const std::atomic<bool>* input_paused = nullptr;
  // Whether the processor's downstream takes calls; while it does not, every
  // thread pauses its partitions.
  DownstreamGate* gate = nullptr;
  // Key order: the keys parked in the retry topic.
  KeyParking* parking = nullptr;
  // Set while key order is being switched on (Engine::SwitchToKeyOrder):
  // retry threads already keep their keyed records where they are in the
  // retry topic, as in key order, rather than send them back to it.
  const std::atomic<bool>* key_order_coming = nullptr;
  // Keyed records retry threads are sending back to the retry topic (a
  // re-send after a failure, a hand-back), not yet acknowledged or given
  // up: the switch to key order waits for none before it reads which keys
  // are parked, so none is missed or placed where it no longer is.
  std::shared_ptr<std::atomic<int64_t>> keyed_sends_back;
  // Key order: the records parked in the retry topic (Engine's
  // ReadParkedRecords), and the retry group's committed offsets, by retry
  // partition. Both block up to their timeout; any thread.
  std::function<absl::StatusOr<std::vector<ParkedRecord>>(absl::Duration)> read_parked;
  std::function<absl::StatusOr<std::map<int32_t, int64_t>>(absl::Duration)> retry_committed;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_WORKER_CONTEXT_H_
