// Cheap checks behind the contracts the comments state (a `REQUIRES:` line,
// a "confined to its thread" note), active in debug builds (no NDEBUG: the
// sanitizer and fuzz builds) and compiled out of release builds.
//
//   RETRYD_DCHECK(cond, what)  aborts with `what`, the condition and the
//                              place when `cond` is false; in a release
//                              build `cond` is not even evaluated.
//   ThreadOwner                the thread an object is confined to: Bind()
//                              on it, then Check() where the contract holds.
//   MatchMutexChecksToBuild()  abseil's mutex deadlock detection as the
//                              build asks: on in debug builds, off in
//                              release builds.
//
// Thread-safety: ThreadOwner's Bind() and Check() may race only as the
// contract they check is broken; both touch one atomic.
#ifndef RETRYD_SERVER_COMMON_DEBUG_CHECK_H_
#define RETRYD_SERVER_COMMON_DEBUG_CHECK_H_

#include <atomic>
#include <thread>

namespace retryd {

// Whether RETRYD_DCHECK and ThreadOwner::Check() do anything in this build.
#ifdef NDEBUG
inline constexpr bool kDebugChecks = false;
#else
inline constexpr bool kDebugChecks = true;
#endif

[[noreturn]] void DebugCheckFailed(const char* condition, const char* what, const char* file,
                                   int line);

#ifdef NDEBUG
#define RETRYD_DCHECK(cond, what) \
  do {                            \
  } while (false)
#else
#define RETRYD_DCHECK(cond, what)                                               \
  do {                                                                          \
    if (!(cond)) ::retryd::DebugCheckFailed(#cond, (what), __FILE__, __LINE__); \
  } while (false)
#endif

// Debian builds abseil without NDEBUG, which leaves its mutex deadlock
// detection on in every program linking it: each Lock() and Unlock() then
// updates a process-wide lock graph under a global spin lock, four times the
// instructions of the lock itself, on every thread. A release binary calls
// this first thing in main(), before any thread starts; a debug build keeps
// the detection (it aborts on a lock-order cycle, which the sanitizer runs
// want to see).
void MatchMutexChecksToBuild();

class ThreadOwner {
 public:
  // From now on the calling thread owns the object.
  void Bind() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  // True on the owner's thread, and before anyone bound it (an object is
  // set up on its creator's thread before its own thread starts).
  bool OnOwner() const {
    const std::thread::id owner = owner_.load(std::memory_order_relaxed);
    return owner == std::thread::id() || owner == std::this_thread::get_id();
  }
  // In debug builds, aborts naming `what` off the owner's thread.
  void Check(const char* what) const { RETRYD_DCHECK(OnOwner(), what); }

 private:
  std::atomic<std::thread::id> owner_{};
};

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_DEBUG_CHECK_H_
