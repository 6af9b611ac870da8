// Retry delays: exponential caps with full jitter.
//
// The cap for the n-th failed attempt is min(max_ms, initial_ms *
// multiplier^(n-1)); the delay is drawn uniformly from [0, cap]. Full jitter
// spreads the retries of records that failed together (say, during a
// downstream outage) so they do not all come due in the same millisecond.
//
// Thread-safety: a Backoff is NOT thread-safe; DelayMs() advances a private
// random engine. Each worker thread owns its own instance. CapMs() is a pure
// function and may be called from any thread.
#ifndef RETRYD_SERVER_ENGINE_WORKER_BACKOFF_H_
#define RETRYD_SERVER_ENGINE_WORKER_BACKOFF_H_

#include <cstdint>
#include <random>

#include "server/engine/api/options.h"

namespace retryd::engine {

class Backoff {
 public:
  // The same `options` and `seed` yield the same sequence of delays, which is
  // what makes retry timing reproducible in tests.
  Backoff(const BackoffOptions& options, uint64_t seed);

  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  // Returns a delay in [0, CapMs(options, failed_attempt)] milliseconds to
  // wait before the attempt that follows `failed_attempt` (1-based).
  int64_t DelayMs(int failed_attempt);

  // The upper bound of the delay after `failed_attempt` (1-based; values
  // below 1 are treated as 1). Never negative and never above
  // max(options.max_ms, 0), however large `failed_attempt` grows: a cap that
  // would overflow saturates at max_ms.
  static int64_t CapMs(const BackoffOptions& options, int failed_attempt);

 private:
  const BackoffOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_BACKOFF_H_
