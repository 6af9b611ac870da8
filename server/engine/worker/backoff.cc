#include "server/engine/worker/backoff.h"

#include <algorithm>
#include <cmath>

namespace retryd::engine {

Backoff::Backoff(const BackoffOptions& options, uint64_t seed) : options_(options), rng_(seed) {}

int64_t Backoff::DelayMs(int failed_attempt) {
  const int64_t cap = CapMs(options_, failed_attempt);
  if (cap <= 0) return 0;
  std::uniform_int_distribution<int64_t> delay(0, cap);
  return delay(rng_);
}

int64_t Backoff::CapMs(const BackoffOptions& options, int failed_attempt) {
  // Options are validated at start-up, but this is the last line of defence
  // against a delay that is negative or wraps around, so clamp anyway.
  const int64_t max_ms = std::max<int64_t>(options.max_ms, 0);
  const int64_t initial_ms = std::clamp<int64_t>(options.initial_ms, 0, max_ms);
  const double multiplier =
      std::isfinite(options.multiplier) && options.multiplier >= 1.0 ? options.multiplier : 1.0;
  const int exponent = std::max(failed_attempt, 1) - 1;
  // Computed in floating point so a huge exponent becomes +inf rather than
  // wrapping; the negated comparison also sends inf (and any NaN) to max_ms.
  const double cap = static_cast<double>(initial_ms) * std::pow(multiplier, exponent);
  if (!(cap < static_cast<double>(max_ms))) return max_ms;
  // cap < max_ms <= INT64_MAX here, so the conversion is defined.
  return static_cast<int64_t>(cap);
}

}  // namespace retryd::engine
