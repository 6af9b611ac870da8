// Long-running operations of the control API (retryd.v1.Operation): a drain
// and the dead-letter tools' redrives.
//
// An OperationRegistry keeps every running operation and, for an hour after
// it ended, each ended one (the last 100 at most). Whoever runs an operation
// registers it with Begin(), which hands back its id and the Cancellation
// that CancelOperation sets, and ends it with Finish(). Its progress is
// asked of a function given at Begin(), whenever the operation is read.
// The registry can also run an operation on a thread of its own (Run()),
// joined by Shutdown().
//
// No gRPC here: the WatchOperation stream is control/'s OperationWatcher
// (server/control/operation_watcher.h), and an ended operation's error is
// built by rpc_status.h.
//
// Thread-safety: the registry is thread-safe.
#ifndef RETRYD_SERVER_OPERATIONS_OPERATION_REGISTRY_H_
#define RETRYD_SERVER_OPERATIONS_OPERATION_REGISTRY_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "retryd/v1/control.pb.h"
#include "server/engine/api/cancellation.h"

namespace retryd::control {

class OperationRegistry {
 public:
  // Fills the progress of a running operation.
  using Progress = std::function<void(v1::OperationProgress&)>;
  // The work of an operation run by Run(): given its cancellation, returns
  // how it ended and fills the result on success.
  using Work =
      absl::AnyInvocable<absl::Status(engine::Cancellation& cancel, v1::Operation& result) &&>;

  OperationRegistry() = default;
  ~OperationRegistry();  // Shutdown()s.
  OperationRegistry(const OperationRegistry&) = delete;
  OperationRegistry& operator=(const OperationRegistry&) = delete;

  struct Begun {
    std::string id;
    std::shared_ptr<engine::Cancellation> cancel;
  };
  // Registers a running operation of `kind`. `cancel`: the cancellation
  // CancelOperation sets (a new one if null).
  Begun Begin(v1::OperationKind kind, std::string request_id, Progress progress,
              std::shared_ptr<engine::Cancellation> cancel = nullptr, std::string id = "")
      ABSL_LOCKS_EXCLUDED(mu_);
  // Ends operation `id`: SUCCEEDED if `status` is OK, CANCELLED if it is
  // CANCELLED, FAILED otherwise; with `result`'s oneof result if it has one.
  void Finish(const std::string& id, const absl::Status& status, const v1::Operation& result)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Begin(), then `work` on a thread of the registry, then Finish().
  // UNAVAILABLE after Shutdown(). `id`: the operation's id, for one that
  // keeps its id across restarts (a resumed redrive; ALREADY_EXISTS if the
  // registry has it); empty: a new one (NewId()).
  absl::StatusOr<v1::Operation> Run(v1::OperationKind kind, std::string request_id,
                                    Progress progress, Work work, std::string id = "")
      ABSL_LOCKS_EXCLUDED(mu_);

  // A new operation id: a random UUID (version 4).
  static std::string NewId();

  // NOT_FOUND (OPERATION_NOT_FOUND) for an id not kept.
  absl::StatusOr<v1::Operation> Get(const std::string& id) const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<v1::Operation> List() const ABSL_LOCKS_EXCLUDED(mu_);  // Newest first.
  // Cancels a running operation, waits until it has ended or `wait_until`
  // passed, and returns it as it is then (an operation that cleans up when
  // cancelled, a redrive flushing its producer, has done so once it ended).
  absl::StatusOr<v1::Operation> Cancel(const std::string& id,
                                       absl::Time wait_until = absl::InfinitePast())
      ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels every running operation, refuses Run(), joins Run()'s threads.
  // Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    v1::Operation operation;  // Without its progress while it runs.
    Progress progress;
    std::shared_ptr<engine::Cancellation> cancel;
  };
  v1::Operation Snapshot(const Entry& entry) const;
  void ForgetOldLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;  // Guards the fields below.
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // Ids, oldest first.
  // Run()'s threads; each sets its flag as its last act, and the next Run()
  // joins those that have, so that an ended thread's stack does not linger.
  struct RunThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> ended;
  };
  std::vector<RunThread> threads_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_OPERATIONS_OPERATION_REGISTRY_H_
