// One automatic start or stop of a retry thread, as Engine::ScalingEvents()
// reports it (the autoscaler records them).
//
// Thread-safety: a plain value.
#ifndef RETRYD_SERVER_ENGINE_API_SCALING_EVENT_H_
#define RETRYD_SERVER_ENGINE_API_SCALING_EVENT_H_

#include <cstdint>
#include <string>

namespace retryd::engine {

// One automatic start or stop of a retry thread.
struct ScalingEvent {
  int64_t time_ms = 0;  // Unix ms, when the operation completed.
  int thread_id = 0;
  bool started = false;  // false: stopped.
  std::string reason;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_SCALING_EVENT_H_
