// The request_id of a mutating control call (control.proto): a UUID that
// names one call, so that retryd answers a retry of it with the first
// answer instead of applying it again.
//
// Thread-safety: stateless functions; safe from any thread.
#ifndef RETRYD_CLIENT_REQUEST_ID_H_
#define RETRYD_CLIENT_REQUEST_ID_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace retryd {

// Whether `text` is a UUID as retryd takes one: 8-4-4-4-12 hex digits (any
// case), as uuidgen prints.
bool IsUuid(std::string_view text);

// The version 4 (random) UUID of these 16 random bytes, in lower case: the
// version and variant bits overwritten, as RFC 9562 says.
std::string UuidV4(std::array<uint8_t, 16> random);

// A new version 4 UUID from the kernel's random source (getrandom(2)); an
// error only if that fails.
absl::StatusOr<std::string> NewRequestId();

}  // namespace retryd

#endif  // RETRYD_CLIENT_REQUEST_ID_H_
