// The server side of one WatchMetrics stream, and the registry through which
// a stopping server ends every open stream.
//
// A MetricsWatcher is one grpc::ServerWriteReactor holding all of its
// stream's state. It writes a snapshot at once, then one per interval,
// timed by a grpc::Alarm; at most one write is in flight, and the next
// snapshot is built only when it is due, from the sampler's newest sample,
// so a slow reader gets the latest state rather than a backlog (if a write
// takes longer than the interval, the next goes out as soon as it is done).
// The stream ends when the client cancels, the write fails, or Stop() is
// called (the server stopping); Finish is called exactly once, only when no
// write and no alarm is pending, and the reactor deletes itself in OnDone.
// Every reaction locks the reactor's mutex only for its own duration.
//
// Thread-safety: created by the service's handler; its reactions run on gRPC
// threads; Stop() may be called from any thread while the watcher is
// registered (the registry's lock keeps it alive).
#ifndef RETRYD_SERVER_CONTROL_METRICS_WATCHER_H_
#define RETRYD_SERVER_CONTROL_METRICS_WATCHER_H_

#include <grpcpp/alarm.h>
#include <grpcpp/support/server_callback.h>

#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "retryd/v1/control.pb.h"
#include "server/control/snapshot_builder.h"
#include "server/control/status.h"
#include "server/engine/metrics_sampler.h"

namespace retryd::control {

// A server stream that a stopping server ends (MetricsWatcher,
// OperationWatcher).
class StoppableStream {
 public:
  // Ends the stream with `why` as soon as no write is in flight. Only the
  // first call counts. Never blocks.
  virtual void Stop(absl::Status why) = 0;

 protected:
  ~StoppableStream() = default;
};

// The open streams of one service. Thread-safe.
class WatcherRegistry {
 public:
  explicit WatcherRegistry(int max_watchers) : max_watchers_(max_watchers) {}

  // UNAVAILABLE after Close(), RESOURCE_EXHAUSTED when `max_watchers`
  // streams are open.
  absl::Status Add(StoppableStream* watcher) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(StoppableStream* watcher) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends every open stream with UNAVAILABLE and refuses new ones. Returns at
  // once; the streams finish as soon as their writes in flight complete.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int max_watchers_;
  // Guards the fields below. Held while calling MetricsWatcher::Stop(), so a
  // watcher cannot be deleted meanwhile (OnDone removes it under this lock).
  absl::Mutex mu_;
  absl::flat_hash_set<StoppableStream*> watchers_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

class MetricsWatcher final : public grpc::ServerWriteReactor<v1::MetricsSnapshot>,
                             public StoppableStream {
 public:
  // Registers with `registry` and writes the first snapshot; if the
  // registry refuses, finishes with its status. `thread_ids`: empty means
  // every thread. `registry` and `sampler` must outlive the call.
  MetricsWatcher(WatcherRegistry& registry, const engine::MetricsSampler& sampler,
                 absl::Duration interval, std::vector<int> thread_ids);

  void Stop(absl::Status why) override ABSL_LOCKS_EXCLUDED(mu_);

  // grpc::ServerWriteReactor.
  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override;

 private:
  ~MetricsWatcher() override = default;  // Only OnDone deletes.

  void OnAlarm(bool fired) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the next snapshot, or finishes the call if it was stopped.
  void WriteNextOrFinish() ABSL_LOCKS_EXCLUDED(mu_);
  // Builds the next snapshot into `snapshot_`, to be written.
  void PrepareWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WatcherRegistry& registry_;
  const engine::MetricsSampler& sampler_;
  const absl::Duration interval_;

  absl::Mutex mu_;  // Guards the fields below; never held across two reactions.
  // Why to finish, once asked. Finish is called only after it is set, so a
  // stream that has it finishes at its next reaction (or has finished).
  std::optional<absl::Status> stop_ ABSL_GUARDED_BY(mu_);
  SnapshotBuilder builder_ ABSL_GUARDED_BY(mu_);
  // The message being written; left alone until its OnWriteDone.
  v1::MetricsSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  // A fresh alarm per wait: a fired alarm's callback may still be returning
  // when the next wait begins. Null until the first wait.
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);
};

// A stream refused before it began (bad argument, no token): finishes at
// once with `status`.
template <typename Message>
class RefusedStream final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedStream(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }

 private:
  ~RefusedStream() override = default;
};
using RefusedWriter = RefusedStream<v1::MetricsSnapshot>;

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_METRICS_WATCHER_H_
