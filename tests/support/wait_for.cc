#include "tests/support/wait_for.h"

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace retryd::testing {

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Notification never;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    never.WaitForNotificationWithTimeout(absl::Milliseconds(50));
  }
  return true;
}

}  // namespace retryd::testing
