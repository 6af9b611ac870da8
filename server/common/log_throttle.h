// Lets one log line through per interval and counts the ones held back.
//
// For failures that arrive in bursts: an outage or a rebalance fails every
// request in flight at once, and one line a second with a count says as much
// as a hundred identical lines. Thread-safe.
#ifndef RETRYD_SERVER_COMMON_LOG_THROTTLE_H_
#define RETRYD_SERVER_COMMON_LOG_THROTTLE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace retryd {

class LogThrottle {
 public:
  explicit LogThrottle(absl::Duration interval) : interval_(interval) {}

  LogThrottle(const LogThrottle&) = delete;
  LogThrottle& operator=(const LogThrottle&) = delete;

  // True if a line may be written at `now`: the first call, and then the
  // first call at least one interval after the last line let through. On
  // true, *held_back is how many calls were refused since that last line.
  bool Allow(absl::Time now, int64_t* held_back);

  // " (N more since the last line)" to end a line with, or "" if N is 0.
  static std::string HeldBackNote(int64_t held_back);

 private:
  const absl::Duration interval_;
  absl::Mutex mu_;  // Guards the two fields below.
  absl::Time last_line_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t held_back_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_LOG_THROTTLE_H_
