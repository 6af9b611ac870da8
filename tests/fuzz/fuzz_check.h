// Property checks inside fuzz targets. A broken property aborts, which
// libFuzzer reports as a crash (and saves the input), and which fails the
// replay test that runs the same target under GoogleTest.
#ifndef RETRYD_TESTS_FUZZ_FUZZ_CHECK_H_
#define RETRYD_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

namespace retryd::fuzz {

// Aborts with `what` (and `detail`, e.g. the status involved) unless `ok`.
inline void Require(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "fuzz property broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace retryd::fuzz

#endif  // RETRYD_TESTS_FUZZ_FUZZ_CHECK_H_
