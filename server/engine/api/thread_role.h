// Which kind of thread a thread of the engine is: a primary thread (reading
// the input topics) or a retry thread (reading a retry topic).
//
// Thread-safety: a plain value.
#ifndef RETRYD_SERVER_ENGINE_API_THREAD_ROLE_H_
#define RETRYD_SERVER_ENGINE_API_THREAD_ROLE_H_

namespace retryd::engine {

enum class ThreadRole { kPrimary, kRetry };

inline const char* ThreadRoleName(ThreadRole role) {
  return role == ThreadRole::kPrimary ? "primary" : "retry";
}

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_THREAD_ROLE_H_
