#include "client/request_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace retryd {

bool IsUuid(std::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !absl::ascii_isxdigit(static_cast<unsigned char>(text[i]))) {
      return false;
    }
  }
  return true;
}

std::string UuidV4(std::array<uint8_t, 16> random) {
  random[6] = (random[6] & 0x0f) | 0x40;  // Version 4.
  random[8] = (random[8] & 0x3f) | 0x80;  // Variant 10.
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < random.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[random[i] >> 4]);
    out.push_back(kHex[random[i] & 0x0f]);
  }
  return out;
}

absl::StatusOr<std::string> NewRequestId() {
  std::array<uint8_t, 16> random{};
  size_t filled = 0;
  while (filled < random.size()) {
    // Blocks only before the kernel's pool is first seeded, early at boot.
    const ssize_t n = getrandom(random.data() + filled, random.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("cannot make a request id: getrandom: ", std::strerror(errno)));
    }
    filled += static_cast<size_t>(n);
  }
  return UuidV4(random);
}

}  // namespace retryd
