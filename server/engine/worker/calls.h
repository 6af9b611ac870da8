// A worker's processor calls in flight (asynchronous processors), by call id,
// with their count per partition, and the mailbox their outcomes come back
// through. Calls are not partition state: a call outlives its partition's
// revoke until it ends (it is cancelled, and its outcome is then dropped
// through its abandoned tracker), so they live here, keyed by call, and not
// in Partitions.
//
// Thread-safety: Calls is confined to the worker's thread; WorkerMailbox is
// shared with the processor's callbacks (and the producer's delivery
// reports), each field under the lock that says so.
#ifndef RETRYD_SERVER_ENGINE_WORKER_CALLS_H_
#define RETRYD_SERVER_ENGINE_WORKER_CALLS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/api/cancellation.h"
#include "server/engine/api/processor.h"
#include "server/engine/handoff/completion_tracker.h"
#include "server/engine/handoff/hand_offs.h"
#include "server/engine/held/in_flight.h"
#include "server/engine/worker/due_scheduler.h"
#include "server/kafka/consumer.h"
#include "server/model/record.h"

namespace retryd::engine {

// A worker's stats and the mailboxes other threads fill for it: the
// hand-offs' (HandOffMailbox), the processor calls that ended, and the
// requests posted to it. Shared with those threads' callbacks, which may
// outlive the worker.
struct WorkerMailbox : HandOffMailbox {
  using HandOffMailbox::HandOffMailbox;

  // Processor calls that ended, by call id, for the worker to take.
  absl::Mutex call_mu;  // Guards the fields below.
  std::vector<std::pair<int64_t, Outcome>> finished_calls ABSL_GUARDED_BY(call_mu);
  // Woken when a call ends or a request comes; cleared before the consumer
  // closes.
  kafka::Consumer* wake ABSL_GUARDED_BY(call_mu) = nullptr;
  // Requests posted to the worker's thread (Worker::Post), served in order;
  // none is taken once the thread stops serving them.
  std::vector<std::shared_ptr<WorkerRequest>> requests ABSL_GUARDED_BY(call_mu);
  bool requests_closed ABSL_GUARDED_BY(call_mu) = false;
};

class Calls {
 public:
  // A processor call in flight.
  struct Call {
    HeldRecord held;
    std::shared_ptr<CompletionTracker> tracker;
    std::shared_ptr<Cancellation> cancel;
    absl::Time started;
    bool probe = false;  // The DownstreamGate's probe.
  };

  // At most `max_calls` at once.
  Calls(Processor& processor, std::shared_ptr<WorkerMailbox> mailbox, int max_calls);

  Calls(const Calls&) = delete;
  Calls& operator=(const Calls&) = delete;

  bool at_limit() const { return static_cast<int>(calls_.size()) >= max_calls_; }
  size_t size() const { return calls_.size(); }
  bool empty() const { return calls_.empty(); }
  // Calls of records read from `tp`.
  int For(const TopicPartition& tp) const;
  // Whether a call of any of `tps` (null: any call) is in flight.
  bool InFlight(const std::vector<TopicPartition>* tps) const;

  // Starts the call of `held`, whose partition's tracker is `tracker`, at
  // `now`; its outcome comes back through the mailbox, waking the consumer.
  void Start(HeldRecord held, std::shared_ptr<CompletionTracker> tracker, absl::Time now,
             bool probe);
  // Hands each call that ended, with its outcome, to `ended`, in the order
  // they ended.
  void TakeFinished(const std::function<void(Call, Outcome)>& ended);
  // Waits until a call has ended (TakeFinished has one) or `deadline`.
  void AwaitFinished(absl::Time deadline);
  // Cancels the calls of `tps` (null: every call).
  void Cancel(const std::vector<TopicPartition>* tps);

  void ForEach(const std::function<void(const Call&)>& fn) const;
  void ForEachMutable(const std::function<void(Call&)>& fn);

 private:
  void UpdateGauge();

  Processor& processor_;
  const std::shared_ptr<WorkerMailbox> mailbox_;
  const int max_calls_;
  std::map<int64_t, Call> calls_;
  // Their count per partition (a partition's count outlives its revoke until
  // its calls end).
  std::map<TopicPartition, int> calling_;
  int64_t next_id_ = 0;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_CALLS_H_
