#include "server/common/debug_check.h"

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"

namespace retryd {

void DebugCheckFailed(const char* condition, const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: debug check failed: %s (%s)\n", file, line, what, condition);
  std::fflush(stderr);
  std::abort();
}

void MatchMutexChecksToBuild() {
  absl::SetMutexDeadlockDetectionMode(kDebugChecks ? absl::OnDeadlockCycle::kAbort
                                                   : absl::OnDeadlockCycle::kIgnore);
}

}  // namespace retryd
