#!/usr/bin/env bash
# Builds retryd with ThreadSanitizer into build-tsan/ and runs the engine's
# unit and integration tests under it; any TSan report fails the test that
# produced it. scripts/test.sh (and so CI) runs it; only the test binaries of
# those labels are built.
#
#   scripts/tsan.sh [extra ctest args...]
#
# Only the engine's tests: the control and client tests run gRPC, which
# Debian builds without TSan and whose internal synchronisation TSan cannot
# see. Debian's librdkafka and Abseil are not instrumented either; the test
# executables link tests/tsan/, which makes their locks visible to TSan, and
# tests/tsan/suppressions.txt covers what remains inside librdkafka.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-tsan}"

# CMakeLists.txt adds the flags a TSan build against Debian's uninstrumented
# libraries needs; tests/CMakeLists.txt links tests/tsan/ into the tests.
BUILD_TARGETS="tests_unit tests_integration" \
  SETUP_BROWSER_TOOLS=0 bash "$ROOT/scripts/setup.sh" -DRETRYD_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug

# -LE: a test of those labels that also carries `kafka` (a real broker) or
# `browser` runs in the plain suite only.
# The suppressions file is always used; TSAN_OPTIONS from the caller add to it.
export TSAN_OPTIONS="suppressions=$ROOT/tests/tsan/suppressions.txt second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
# --timeout only covers tests without their own TIMEOUT; the integration tests
# set theirs (tests/integration/CMakeLists.txt) with room for TSan.
# shellcheck source=scripts/ctest_run.sh
source "$ROOT/scripts/ctest_run.sh"
run_ctest "$BUILD_DIR" --output-on-failure -j4 --timeout 900 --no-tests=error \
  -L 'unit|integration' -LE 'kafka|browser' "$@"
