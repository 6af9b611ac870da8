#!/usr/bin/env bash
# Builds retryd with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan/ and runs the whole suite under them, leak detection included;
# the e2e tests run the sanitized retryd binary, so its own exit at the end
# of a test is checked too. Any report fails the test that produced it.
# scripts/test.sh (and so CI) runs it.
#
#   scripts/sanitize.sh [extra ctest args...]      e.g. -L control
#
# The `kafka` label (a real broker, fetched and started by the plain suite
# step) and the `browser` label are left out: they run once, in the plain
# suite, and a sanitizer run of them would double CI's time on 2 cores.
#
# ThreadSanitizer is scripts/tsan.sh, for the engine's tests only: Debian's
# gRPC is not instrumented, so TSan cannot check the control and client tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-asan}"

SETUP_BROWSER_TOOLS=0 bash "$ROOT/scripts/setup.sh" -DRETRYD_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
# halt_on_error: a UBSan finding fails the test rather than scrolling by.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# shellcheck source=scripts/ctest_run.sh
source "$ROOT/scripts/ctest_run.sh"
run_ctest "$BUILD_DIR" --output-on-failure -j6 --timeout 600 --no-tests=error \
  -LE 'kafka|browser' "$@"
