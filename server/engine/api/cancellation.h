// A one-shot signal that abandons a long engine operation (a drain) from
// outside: the control service cancels it when its gRPC call is cancelled,
// so the engine itself stays free of gRPC.
//
// Thread-safe. Cancel() may be called from any thread, any number of times;
// the first call runs the registered wake-ups, on the cancelling thread.
#ifndef RETRYD_SERVER_ENGINE_API_CANCELLATION_H_
#define RETRYD_SERVER_ENGINE_API_CANCELLATION_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace retryd::engine {

class Cancellation {
 public:
  // Keeps a wake-up registered (see OnCancel) for as long as it lives.
  class Subscription {
   public:
    Subscription() = default;
    Subscription(Subscription&& other) noexcept
        : token_(std::exchange(other.token_, nullptr)), id_(other.id_) {}
    Subscription& operator=(Subscription&&) = delete;
    Subscription(const Subscription&) = delete;
    ~Subscription() {
      if (token_ != nullptr) token_->Unsubscribe(id_);
    }

   private:
    friend class Cancellation;
    Subscription(Cancellation* token, int64_t id) : token_(token), id_(id) {}
    Cancellation* token_ = nullptr;
    int64_t id_ = 0;
  };

  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  void Cancel() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    for (auto& [id, wake] : wakes_) wake();
  }

  // Lock-free, so it may sit in another mutex's wait condition.
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Runs `wake` when Cancel() is first called, as long as the returned
  // subscription lives (its destructor waits for a wake-up in progress).
  // `wake` runs under this token's lock: it must not block, and whoever
  // destroys the subscription must not hold a lock that `wake` takes.
  // Typically `wake` takes and releases the mutex a waiter waits on with a
  // condition that reads cancelled(), so the waiter re-checks at once.
  [[nodiscard]] Subscription OnCancel(absl::AnyInvocable<void()> wake) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const int64_t id = next_id_++;
    wakes_.emplace(id, std::move(wake));
    return Subscription(this, id);
  }

 private:
  void Unsubscribe(int64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    wakes_.erase(id);
  }

  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;  // Guards the fields below; held while the wake-ups run.
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, absl::AnyInvocable<void()>> wakes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_CANCELLATION_H_
