// Reading a small file (a config, a token, a certificate) whole, with a cap
// on its size so that a wrong path (a device, a log) cannot exhaust memory.
//
// Thread-safe.
#ifndef RETRYD_SERVER_COMMON_READ_FILE_H_
#define RETRYD_SERVER_COMMON_READ_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace retryd {

// The contents of the file at `path`, if it holds at most `max_bytes`.
// Errors name the path (quoted, C-escaped, so that an error stays one line
// whatever the path holds): a failed open or read has the code errno gives
// (NOT_FOUND, PERMISSION_DENIED, ...) and its text; a larger file is
// INVALID_ARGUMENT, read no further than max_bytes + 1 bytes.
absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes);

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_READ_FILE_H_
