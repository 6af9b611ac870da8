#include "server/control/operation_watcher.h"

#include <utility>

#include "absl/time/clock.h"
#include "server/control/status.h"

namespace retryd::control {

OperationWatcher::OperationWatcher(WatcherRegistry& watchers, const OperationRegistry& operations,
                                   std::string id)
    : watchers_(watchers), operations_(operations), id_(std::move(id)) {
  absl::Status registered = watchers_.Add(this);
  if (!registered.ok()) {
    absl::MutexLock lock(&mu_);
    stop_ = registered;
  }
  Step();  // Held back by gRPC until the handler has returned this reactor.
}

void OperationWatcher::Step() {
  bool write = false;
  absl::Status finish;
  {
    absl::MutexLock lock(&mu_);
    if (stop_.has_value()) {
      finish = *stop_;
    } else if (wrote_ && written_.done()) {
      finish = absl::OkStatus();
    } else if (absl::StatusOr<v1::Operation> op = operations_.Get(id_); !op.ok()) {
      finish = op.status();
    } else if (!wrote_ || op->SerializeAsString() != written_.SerializeAsString()) {
      written_ = *std::move(op);
      wrote_ = true;
      write = true;
    } else {
      alarm_ = std::make_unique<grpc::Alarm>();
      alarm_->Set(absl::ToChronoTime(absl::Now() + kOperationWatchInterval),
                  [this](bool fired) { OnAlarm(fired); });
      return;
    }
  }
  // Either may lead to OnDone on another thread: nothing of `this` is
  // touched after them.
  if (write) {
    StartWrite(&written_);
  } else {
    Finish(ToGrpcStatus(finish));
  }
}

void OperationWatcher::Stop(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (stop_.has_value()) return;
  stop_ = std::move(why);
  // As in MetricsWatcher::Stop: a pending alarm fires at once (not fired).
  if (alarm_ != nullptr) alarm_->Cancel();
}

void OperationWatcher::OnCancel() { Stop(absl::CancelledError("the client cancelled the stream")); }

void OperationWatcher::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    if (!ok && !stop_.has_value()) {
      stop_ = absl::CancelledError("the stream broke: the client is gone");
    }
  }
  Step();
}

void OperationWatcher::OnAlarm(bool fired) {
  if (!fired) {
    absl::MutexLock lock(&mu_);
    if (!stop_.has_value()) stop_ = absl::UnavailableError("the control server is stopping");
  }
  Step();
}

void OperationWatcher::OnDone() {
  watchers_.Remove(this);
  delete this;
}

}  // namespace retryd::control
