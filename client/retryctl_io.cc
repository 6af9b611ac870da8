#include "client/retryctl_io.h"

namespace retryd::retryctl {

int ExitStatusFor(absl::StatusCode code) { return kExitRpcFailedBase + static_cast<int>(code); }

bool Interrupt::Trigger() {
  absl::MutexLock lock(&mu_);
  triggered_ = true;
  if (client_ == nullptr) return false;
  client_->Cancel();
  return true;
}

bool Interrupt::triggered() const {
  absl::MutexLock lock(&mu_);
  return triggered_;
}

void Interrupt::Attach(RetrydClient& client) {
  absl::MutexLock lock(&mu_);
  client_ = &client;
}

void Interrupt::Detach() {
  absl::MutexLock lock(&mu_);
  client_ = nullptr;
}

}  // namespace retryd::retryctl
