// A test that needs a tool of the machine (openssl, promtool, ...) that is
// missing: skipped where someone runs the suite on a machine without it,
// failed under CI=true (or CI=1), where a skip would pass unseen and the check
// it stands for would never run. Either way the message names the tool and
// the Debian package that brings it (scripts/setup.sh installs them all).
// tests/support/missing_tool.py is the same rule for the Python tests.
#ifndef RETRYD_TESTS_SUPPORT_MISSING_TOOL_H_
#define RETRYD_TESTS_SUPPORT_MISSING_TOOL_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"

namespace retryd::testing {

// Whether the environment says every tool must be there: CI is "true" or
// "1" (CI services set CI=true).
inline bool ToolsRequired() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string value = absl::AsciiStrToLower(absl::StripAsciiWhitespace(ci));
  return value == "true" || value == "1";
}

}  // namespace retryd::testing

// In a test's body or SetUp(): ends it, failed under CI=true, else skipped.
// `package` says what brings the tool: "Debian package openssl".
#define RETRYD_MISSING_TOOL(tool, package)                                                     \
  do {                                                                                         \
    if (::retryd::testing::ToolsRequired()) {                                                  \
      GTEST_FAIL() << (tool) << " is missing (" << (package)                                   \
                   << "), and CI=true requires every tool: bash scripts/setup.sh installs it"; \
    }                                                                                          \
    GTEST_SKIP() << (tool) << " is missing (" << (package)                                     \
                 << "; bash scripts/setup.sh installs it): skipped";                           \
  } while (0)

#endif  // RETRYD_TESTS_SUPPORT_MISSING_TOOL_H_
