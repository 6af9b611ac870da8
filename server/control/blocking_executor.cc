#include "server/control/blocking_executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/logging.h"

namespace retryd::control {

BlockingExecutor::BlockingExecutor(std::string name, int threads, int max_queued)
    : name_(std::move(name)), max_queued_(static_cast<size_t>(std::max(0, max_queued))) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Run(); });
}

BlockingExecutor::~BlockingExecutor() { Shutdown(); }

absl::Status BlockingExecutor::Submit(absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("the control server is stopping");
  if (queue_.size() >= max_queued_ + threads_.size()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many control operations waiting (", queue_.size(),
                     "); the engine runs them one at a time: try again when the others are done"));
  }
  queue_.push_back(std::move(task));
  return absl::OkStatus();
}

void BlockingExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    if (joined_) return;
    joined_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

bool BlockingExecutor::HasWorkOrStopping() const { return shutting_down_ || !queue_.empty(); }

void BlockingExecutor::Run() {
  SetThreadName(name_);
  SetThreadComponent("control");
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BlockingExecutor::HasWorkOrStopping));
      if (queue_.empty()) return;  // Shutting down with nothing left to run.
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace retryd::control
