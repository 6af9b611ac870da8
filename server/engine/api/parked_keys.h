// What key order has parked now, as Engine::ParkedKeys() reports it
// (KeyParking::Summary is this).
//
// Thread-safety: a plain value.
#ifndef RETRYD_SERVER_ENGINE_API_PARKED_KEYS_H_
#define RETRYD_SERVER_ENGINE_API_PARKED_KEYS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace retryd::engine {

struct ParkedKeysSummary {
  int64_t keys = 0;     // Parked keys.
  int64_t records = 0;  // Their records in the retry topic, not yet complete.
  absl::Time oldest = absl::InfiniteFuture();  // The longest-parked key's since.
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_PARKED_KEYS_H_
