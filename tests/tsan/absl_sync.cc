// Makes ThreadSanitizer see Debian's absl::Mutex, CondVar and Notification.
//
// Debian's Abseil is built without -fsanitize=thread, so its Mutex takes and
// hands over the lock with plain atomics and futexes that TSan never sees:
// every field guarded by an absl::Mutex would look racy. Linked into a test
// executable, the member functions defined here interpose the library's
// exported ones (the executable comes first in symbol lookup, also for calls
// that libabsl makes to itself through its PLT), call the real function
// found with dlsym(RTLD_NEXT), and add around it the annotations that
// Abseil's mutex.cc makes when it is itself built with TSan.
//
// Not interposed, on purpose: Mutex's and CondVar's *WithTimeout variants,
// which Debian's libabsl implements by calling the *WithDeadline ones through
// its PLT (so they reach the wrappers below, and wrapping both would annotate
// twice), and the private slow paths, which the public entry points cover.
// Condition functions that the real library evaluates run inside the lock
// operation, where TSan ignores accesses: a race inside a Condition is not
// reported, but none is invented.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1,
              "the mangled names below assume absl's inline namespace");
static_assert(sizeof(absl::Mutex) == sizeof(std::atomic<intptr_t>),
              "absl::Mutex is expected to be its state word alone");
static_assert(sizeof(absl::Notification) == 2 * sizeof(absl::Mutex),
              "absl::Notification is expected to be {Mutex, atomic<bool>}");

namespace {

#define RETRYD_TSAN_STRINGIFY_INNER(x) #x
#define RETRYD_TSAN_STRINGIFY(x) RETRYD_TSAN_STRINGIFY_INNER(x)

// Looks up the library's own definition of a member of absl::<inline ns>.
// `qualifier` is "N" or "NK" (const member), `rest` the mangled name after
// the namespaces, e.g. "5Mutex4LockEv". Aborts if it is missing: silently
// skipping an interposer would bring the false reports back.
template <typename Fn>
Fn Real(const char* qualifier, const char* rest) {
  const std::string ns = RETRYD_TSAN_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name =
      std::string("_Z") + qualifier + "4absl" + std::to_string(ns.size()) + ns + rest;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan shim: %s not found in the loaded Abseil\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

// Abseil's mutex word: the writer bit tells whether the calling thread,
// which holds the mutex, holds it exclusively (see TsanFlags in mutex.cc).
constexpr intptr_t kMuWriter = 0x0008;

unsigned HeldFlags(const absl::Mutex* mu) {
  const auto* word = reinterpret_cast<const std::atomic<intptr_t>*>(mu);
  return (word->load(std::memory_order_relaxed) & kMuWriter) != 0 ? 0 : __tsan_mutex_read_lock;
}

// Runs `wait`, which releases `mu` (held with `flags`) and takes it again,
// annotated as an unlock followed by a lock. When the real call returns at
// once (condition already true) the pair models nothing that did not happen:
// the thread holds `mu` throughout.
template <typename Wait>
auto AsRelock(absl::Mutex* mu, unsigned flags, Wait wait) {
  __tsan_mutex_pre_unlock(mu, flags);
  auto result = wait();
  __tsan_mutex_post_unlock(mu, flags);
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// The flag that Notification::HasBeenNotified() acquire-loads inline, in
// instrumented code; it follows the Mutex (asserted above).
const void* NotifiedFlag(const absl::Notification* n) {
  return reinterpret_cast<const char*>(n) + sizeof(absl::Mutex);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// ---- Mutex: lock and unlock --------------------------------------------------

Mutex::~Mutex() {
  static const auto real = Real<void (*)(Mutex*)>("N", "5MutexD1Ev");
  __tsan_mutex_destroy(this, __tsan_mutex_not_static);
  real(this);
}

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("N", "5Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("N", "5Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("N", "5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("N", "5Mutex13ReaderTryLockEv");
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("N", "5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("N", "5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

// ---- Mutex: lock when a condition holds ---------------------------------------

void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("N", "5Mutex8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "N", "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  // Locked on return whether or not the condition became true.
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("N", "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "N", "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return met;
}

// ---- Mutex: wait, holding it, for a condition ------------------------------------

void Mutex::Await(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("N", "5Mutex5AwaitERKNS0_9ConditionE");
  AsRelock(this, HeldFlags(this), [&] {
    real(this, cond);
    return 0;
  });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "N", "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return AsRelock(this, HeldFlags(this), [&] { return real(this, cond, deadline); });
}

// ---- CondVar -------------------------------------------------------------------
// As in Abseil, a CondVar orders nothing by itself: the waiter's unlock and
// relock of its Mutex does.

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("N", "7CondVar4WaitEPNS0_5MutexE");
  AsRelock(mu, HeldFlags(mu), [&] {
    real(this, mu);
    return 0;
  });
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "N", "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return AsRelock(mu, HeldFlags(mu), [&] { return real(this, mu, deadline); });
}

void CondVar::Signal() {
  static const auto real = Real<void (*)(CondVar*)>("N", "7CondVar6SignalEv");
  __tsan_mutex_pre_signal(this, 0);
  real(this);
  __tsan_mutex_post_signal(this, 0);
}

void CondVar::SignalAll() {
  static const auto real = Real<void (*)(CondVar*)>("N", "7CondVar9SignalAllEv");
  __tsan_mutex_pre_signal(this, 0);
  real(this);
  __tsan_mutex_post_signal(this, 0);
}

// ---- Notification --------------------------------------------------------------
// Notify() sets the flag under its Mutex (whose Lock/Unlock reach the wrappers
// above through libabsl's PLT), but readers may test the flag without the
// Mutex: HasBeenNotified() inline, and WaitForNotification*() in libabsl when
// the flag is already set. So Notify() also releases on the flag's address,
// before the store that readers can see; the inline acquire load in
// HasBeenNotified() and the acquire below pair with it.

void Notification::Notify() {
  static const auto real = Real<void (*)(Notification*)>("N", "12Notification6NotifyEv");
  __tsan_release(const_cast<void*>(NotifiedFlag(this)));
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      Real<void (*)(const Notification*)>("NK", "12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<void*>(NotifiedFlag(this)));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, absl::Duration)>(
      "NK", "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<void*>(NotifiedFlag(this)));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, absl::Time)>(
      "NK", "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<void*>(NotifiedFlag(this)));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
