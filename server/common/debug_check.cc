#include "server/common/debug_check.h"

#include <cstdio>
#include <cstdlib>

namespace retryd {

void DebugCheckFailed(const char* condition, const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: debug check failed: %s (%s)\n", file, line, what, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace retryd
