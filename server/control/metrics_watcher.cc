#include "server/control/metrics_watcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/control/status.h"

namespace retryd::control {

absl::Status WatcherRegistry::Add(StoppableStream* watcher) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the control server is stopping");
  if (static_cast<int>(watchers_.size()) >= max_watchers_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many WatchMetrics streams or WatchOperation streams open (",
                     max_watchers_, "); close one and try again"));
  }
  watchers_.insert(watcher);
  return absl::OkStatus();
}

void WatcherRegistry::Remove(StoppableStream* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

void WatcherRegistry::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (StoppableStream* watcher : watchers_) {
    watcher->Stop(absl::UnavailableError("the control server is stopping"));
  }
}

MetricsWatcher::MetricsWatcher(WatcherRegistry& registry, const engine::MetricsSampler& sampler,
                               absl::Duration interval, std::vector<int> thread_ids)
    : registry_(registry),
      sampler_(sampler),
      interval_(interval),
      builder_(std::move(thread_ids), absl::ToUnixMillis(absl::Now()),
               [&sampler](int id, int64_t from_ms, int64_t to_ms) {
                 return sampler.MaxOver(id, from_ms, to_ms);
               }) {
  absl::Status registered = registry_.Add(this);
  if (!registered.ok()) {
    absl::MutexLock lock(&mu_);
    if (!stop_.has_value()) stop_ = registered;
  }
  // Held back by gRPC until the handler has returned this reactor.
  WriteNextOrFinish();
}

void MetricsWatcher::WriteNextOrFinish() {
  bool write = false;
  absl::Status finish;
  {
    absl::MutexLock lock(&mu_);
    if (stop_.has_value()) {
      finish = *stop_;
    } else {
      PrepareWrite();
      write = true;
    }
  }
  // Either may lead to OnDone on another thread: nothing of `this` is
  // touched after them.
  if (write) {
    StartWrite(&snapshot_);
  } else {
    Finish(ToGrpcStatus(finish));
  }
}

void MetricsWatcher::PrepareWrite() {
  builder_.Build(sampler_.Latest(), snapshot_);
  last_write_ = absl::Now();
}

void MetricsWatcher::Stop(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (stop_.has_value()) return;
  stop_ = std::move(why);
  // A write in flight ends in OnWriteDone, which finishes; a pending alarm
  // fires at once (not fired) and OnAlarm finishes; cancelling an alarm
  // that already fired does nothing. The alarm's callback never runs on
  // this thread, so holding mu_ here is safe.
  if (alarm_ != nullptr) alarm_->Cancel();
}

void MetricsWatcher::OnCancel() { Stop(absl::CancelledError("the client cancelled the stream")); }

void MetricsWatcher::OnWriteDone(bool ok) {
  absl::Status finish;
  {
    absl::MutexLock lock(&mu_);
    if (!ok && !stop_.has_value()) {
      stop_ = absl::CancelledError("the stream broke: the client is gone");
    }
    if (!stop_.has_value()) {
      // A slow reader makes the due time pass: the next snapshot goes out at
      // once, built from the newest sample.
      const absl::Time due = std::max(last_write_ + interval_, absl::Now());
      alarm_ = std::make_unique<grpc::Alarm>();
      alarm_->Set(absl::ToChronoTime(due), [this](bool fired) { OnAlarm(fired); });
      return;
    }
    finish = *stop_;
  }
  Finish(ToGrpcStatus(finish));
}

void MetricsWatcher::OnAlarm(bool fired) {
  if (!fired) {
    absl::MutexLock lock(&mu_);
    if (!stop_.has_value()) stop_ = absl::UnavailableError("the control server is stopping");
  }
  WriteNextOrFinish();
}

void MetricsWatcher::OnDone() {
  registry_.Remove(this);
  delete this;
}

}  // namespace retryd::control
