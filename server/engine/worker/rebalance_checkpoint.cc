#include "server/engine/worker/rebalance_checkpoint.h"

namespace retryd::engine {

void RebalanceCheckpoint::Request(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  step_ = Step::kRequested;
  deadline_ = deadline;
}

bool RebalanceCheckpoint::AwaitServed(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return step_ != Step::kRequested; };
  return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

bool RebalanceCheckpoint::AwaitRebalanced(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return step_ != Step::kRequested && step_ != Step::kQuiesced;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

void RebalanceCheckpoint::Release() {
  absl::MutexLock lock(&mu_);
  step_ = Step::kReleased;
}

RebalanceCheckpoint::Step RebalanceCheckpoint::Take(absl::Time* deadline) {
  absl::MutexLock lock(&mu_);
  const Step step = step_;
  *deadline = deadline_;
  if (step == Step::kReleased) step_ = Step::kNone;
  return step;
}

void RebalanceCheckpoint::Served() {
  absl::MutexLock lock(&mu_);
  if (step_ == Step::kRequested) step_ = Step::kQuiesced;
}

void RebalanceCheckpoint::Rebalanced() {
  absl::MutexLock lock(&mu_);
  if (step_ == Step::kQuiesced) step_ = Step::kRebalanced;
}

}  // namespace retryd::engine
