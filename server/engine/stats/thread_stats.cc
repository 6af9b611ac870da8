#include "server/engine/stats/thread_stats.h"

namespace retryd::engine {

const char* ThreadStateName(ThreadState state) {
  switch (state) {
    case ThreadState::kStarting:
      return "STARTING";
    case ThreadState::kRunning:
      return "RUNNING";
    case ThreadState::kIdle:
      return "IDLE";
    case ThreadState::kWaitingBackoff:
      return "WAITING_BACKOFF";
    case ThreadState::kPaused:
      return "PAUSED";
    case ThreadState::kWaitingDownstream:
      return "WAITING_DOWNSTREAM";
    case ThreadState::kStopping:
      return "STOPPING";
    case ThreadState::kStopped:
      return "STOPPED";
    case ThreadState::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

}  // namespace retryd::engine
