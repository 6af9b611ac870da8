// One WatchOperation stream: an OperationWatcher writes the operation at
// once, then again whenever it changed (looked at every
// `kOperationWatchInterval`), and finishes OK after writing it ended. The
// operations themselves are kept by the OperationRegistry
// (server/operations/operation_registry.h).
//
// Thread-safety: a watcher's reactions run on gRPC threads (as
// MetricsWatcher's).
#ifndef RETRYD_SERVER_CONTROL_OPERATION_WATCHER_H_
#define RETRYD_SERVER_CONTROL_OPERATION_WATCHER_H_

#include <grpcpp/alarm.h>
#include <grpcpp/support/server_callback.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "retryd/v1/control.pb.h"
#include "server/control/metrics_watcher.h"
#include "server/operations/operation_registry.h"

namespace retryd::control {

inline constexpr absl::Duration kOperationWatchInterval = absl::Milliseconds(500);

class OperationWatcher final : public grpc::ServerWriteReactor<v1::Operation>,
                               public StoppableStream {
 public:
  // Registers with `watchers` and writes the operation `id`, or finishes
  // with NOT_FOUND. `operations` and `watchers` must outlive the call.
  OperationWatcher(WatcherRegistry& watchers, const OperationRegistry& operations, std::string id);

  void Stop(absl::Status why) override ABSL_LOCKS_EXCLUDED(mu_);

  // grpc::ServerWriteReactor.
  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override;

 private:
  ~OperationWatcher() override = default;  // Only OnDone deletes.

  void OnAlarm(bool fired) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the operation if it changed, or waits, or finishes.
  void Step() ABSL_LOCKS_EXCLUDED(mu_);

  WatcherRegistry& watchers_;
  const OperationRegistry& operations_;
  const std::string id_;

  absl::Mutex mu_;  // Guards the fields below; never held across two reactions.
  std::optional<absl::Status> stop_ ABSL_GUARDED_BY(mu_);
  v1::Operation written_ ABSL_GUARDED_BY(mu_);  // Being written, or last written.
  bool wrote_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_OPERATION_WATCHER_H_
