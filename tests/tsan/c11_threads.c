// C11 <threads.h> on top of the pthread calls that ThreadSanitizer intercepts.
//
// Debian's librdkafka creates its threads and takes its locks with C11
// threads (thrd_create, mtx_lock, cnd_wait, ...). glibc implements those by
// calling its own pthread code internally, past TSan's interceptors, so TSan
// neither knows librdkafka's threads nor sees its locks and reports races on
// every hand-off between them. Linked into a test executable, the definitions
// below interpose glibc's for librdkafka.so (the executable comes first in
// symbol lookup) and make the same calls through the public pthread API.
//
// Each function matches glibc 2.36's own (nptl/thrd_*.c, mtx_*.c, cnd_*.c,
// call_once.c): mtx_t, cnd_t and once_flag are storage for pthread_mutex_t,
// pthread_cond_t and pthread_once_t, and errors map as in thrd_priv.h.
// thrd_current, thrd_equal, thrd_sleep, thrd_yield and tss_* are left to
// glibc: they carry no synchronisation.

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is not a pthread_mutex_t");
_Static_assert(alignof(mtx_t) == alignof(pthread_mutex_t), "mtx_t is not a pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is not a pthread_cond_t");
_Static_assert(alignof(cnd_t) == alignof(pthread_cond_t), "cnd_t is not a pthread_cond_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t), "once_flag is not a pthread_once_t");
_Static_assert(sizeof(thrd_t) == sizeof(pthread_t), "thrd_t is not a pthread_t");

// glibc's thrd_err_map.
static int ErrMap(int err) {
  switch (err) {
    case 0:
      return thrd_success;
    case ENOMEM:
      return thrd_nomem;
    case ETIMEDOUT:
      return thrd_timedout;
    case EBUSY:
      return thrd_busy;
    default:
      return thrd_error;
  }
}

static pthread_mutex_t* AsMutex(mtx_t* m) { return (pthread_mutex_t*)m; }
static pthread_cond_t* AsCond(cnd_t* c) { return (pthread_cond_t*)c; }

// ---- threads -----------------------------------------------------------------

// A C11 start routine returns int, a pthread one void*: glibc marks C11
// threads internally to convert the result; here a trampoline does it.
struct StartArgs {
  thrd_start_t func;
  void* arg;
};

static void* Trampoline(void* p) {
  struct StartArgs args = *(struct StartArgs*)p;
  free(p);
  return (void*)(intptr_t)args.func(args.arg);
}

int thrd_create(thrd_t* thr, thrd_start_t func, void* arg) {
  struct StartArgs* args = malloc(sizeof(*args));
  if (args == NULL) return thrd_nomem;
  args->func = func;
  args->arg = arg;
  int err = pthread_create(thr, NULL, Trampoline, args);
  if (err != 0) free(args);
  return ErrMap(err);
}

int thrd_join(thrd_t thr, int* res) {
  void* ret;
  int err = pthread_join(thr, &ret);
  if (res != NULL) *res = (int)(intptr_t)ret;
  return ErrMap(err);
}

int thrd_detach(thrd_t thr) { return ErrMap(pthread_detach(thr)); }

void thrd_exit(int res) { pthread_exit((void*)(intptr_t)res); }

// ---- mutexes -----------------------------------------------------------------

int mtx_init(mtx_t* m, int type) {
  int kind;
  switch (type) {
    case mtx_plain:
    case mtx_timed:  // POSIX mutexes all support timed locking.
      kind = PTHREAD_MUTEX_NORMAL;
      break;
    case mtx_plain | mtx_recursive:
    case mtx_timed | mtx_recursive:
      kind = PTHREAD_MUTEX_RECURSIVE;
      break;
    default:
      return thrd_error;
  }
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, kind);
  int err = pthread_mutex_init(AsMutex(m), &attr);
  pthread_mutexattr_destroy(&attr);
  return ErrMap(err);
}

int mtx_lock(mtx_t* m) { return ErrMap(pthread_mutex_lock(AsMutex(m))); }

int mtx_timedlock(mtx_t* restrict m, const struct timespec* restrict deadline) {
  return ErrMap(pthread_mutex_timedlock(AsMutex(m), deadline));
}

int mtx_trylock(mtx_t* m) { return ErrMap(pthread_mutex_trylock(AsMutex(m))); }

int mtx_unlock(mtx_t* m) { return ErrMap(pthread_mutex_unlock(AsMutex(m))); }

void mtx_destroy(mtx_t* m) { pthread_mutex_destroy(AsMutex(m)); }

// ---- condition variables -------------------------------------------------------

int cnd_init(cnd_t* c) { return ErrMap(pthread_cond_init(AsCond(c), NULL)); }

int cnd_signal(cnd_t* c) { return ErrMap(pthread_cond_signal(AsCond(c))); }

int cnd_broadcast(cnd_t* c) { return ErrMap(pthread_cond_broadcast(AsCond(c))); }

int cnd_wait(cnd_t* c, mtx_t* m) { return ErrMap(pthread_cond_wait(AsCond(c), AsMutex(m))); }

int cnd_timedwait(cnd_t* restrict c, mtx_t* restrict m, const struct timespec* restrict deadline) {
  return ErrMap(pthread_cond_timedwait(AsCond(c), AsMutex(m), deadline));
}

void cnd_destroy(cnd_t* c) { pthread_cond_destroy(AsCond(c)); }

// ---- once ----------------------------------------------------------------------

// TSan's pthread_once keeps its own protocol in the flag word, so every
// call_once on a flag must come here, which interposition ensures.
void call_once(once_flag* flag, void (*func)(void)) { pthread_once((pthread_once_t*)flag, func); }
