#include "server/common/log_throttle.h"

namespace retryd {

bool LogThrottle::Allow(absl::Time now, int64_t* held_back) {
  absl::MutexLock lock(&mu_);
  if (now - last_line_ < interval_) {
    ++held_back_;
    return false;
  }
  last_line_ = now;
  *held_back = held_back_;
  held_back_ = 0;
  return true;
}

}  // namespace retryd
