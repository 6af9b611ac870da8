// Keeps librdkafka's read-write locks visible to ThreadSanitizer.
//
// suppressions.txt tells TSan to ignore the libc calls that librdkafka makes
// itself (called_from_lib): TSan then runs them unobserved, which is what we
// want for its free() and memcpy(), but it also drops the ordering of the
// pthread_rwlock_* calls it makes directly (its C11 mutexes come through
// c11_threads.c already). These definitions interpose libc's for every
// caller and pass the call on to the next definition, TSan's interceptor,
// which now sees it made from this executable and so observes it.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*RwlockFn)(pthread_rwlock_t*);

// Resolves `name` once; threads racing to do it store the same value.
static void* Next(void** slot, const char* name) {
  void* fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (fn != NULL) return fn;
  fn = dlsym(RTLD_NEXT, name);
  if (fn == NULL) {
    fprintf(stderr, "tsan shim: %s not found\n", name);
    abort();
  }
  __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
  return fn;
}

#define RETRYD_FORWARD_RWLOCK(name)              \
  int name(pthread_rwlock_t* lock) {             \
    static void* next;                           \
    return ((RwlockFn)Next(&next, #name))(lock); \
  }

RETRYD_FORWARD_RWLOCK(pthread_rwlock_rdlock)
RETRYD_FORWARD_RWLOCK(pthread_rwlock_wrlock)
RETRYD_FORWARD_RWLOCK(pthread_rwlock_unlock)
RETRYD_FORWARD_RWLOCK(pthread_rwlock_destroy)

int pthread_rwlock_init(pthread_rwlock_t* restrict lock,
                        const pthread_rwlockattr_t* restrict attr) {
  typedef int (*InitFn)(pthread_rwlock_t*, const pthread_rwlockattr_t*);
  static void* next;
  return ((InitFn)Next(&next, "pthread_rwlock_init"))(lock, attr);
}
