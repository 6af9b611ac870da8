#include "server/common/log_throttle.h"

#include "absl/strings/str_cat.h"

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

std::string LogThrottle::HeldBackNote(int64_t held_back) {
  return held_back > 0 ? absl::StrCat(" (", held_back, " more since the last line)") : "";
}

}  // namespace retryd
