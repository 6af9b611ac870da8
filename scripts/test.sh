#!/usr/bin/env bash
# Builds retryd (via scripts/setup.sh), runs the whole test suite, checks
# the formatting (scripts/format.sh --check), then compiles the code again
# under clang's thread-safety analysis (scripts/thread_safety.sh). Exits
# non-zero if any of them fails.
#
#   scripts/test.sh [extra ctest args...]     e.g. scripts/test.sh -L unit
#
# Environment: BUILD_DIR (default: <repo>/build), as for setup.sh.
#
# Tests run two at a time: every test that needs a port binds loopback port 0
# and lets the OS choose, so parallel tests do not collide.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR

bash "$ROOT/scripts/setup.sh"

echo "test.sh: running ctest in $BUILD_DIR"
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 300 --no-tests=error "$@" || rc=$?

# ctest has already printed its "N% tests passed, N tests failed out of M" line.
if ((rc != 0)); then
  echo "test.sh: FAILED (ctest exit status $rc)" >&2
  exit "$rc"
fi

echo "test.sh: tests passed; checking the formatting"
if ! bash "$ROOT/scripts/format.sh" --check; then
  echo "test.sh: FAILED (formatting: run scripts/format.sh)" >&2
  exit 1
fi

echo "test.sh: checking lock annotations"
if ! bash "$ROOT/scripts/thread_safety.sh"; then
  echo "test.sh: FAILED (thread-safety analysis)" >&2
  exit 1
fi
echo "test.sh: PASSED"
