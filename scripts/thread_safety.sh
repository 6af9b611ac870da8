#!/usr/bin/env bash
# Compiles retryd (server and client, not the tests) with clang's static
# thread-safety analysis into build-tsa/, turning its findings into errors:
# a field marked ABSL_GUARDED_BY(mu) touched without mu held, a function
# marked ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) called without it, a lock not
# released on some path. scripts/test.sh runs it after the test suite.
#
#   scripts/thread_safety.sh
#
# scripts/setup.sh installs Debian's clang with the other packages.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${TSA_BUILD_DIR:-$ROOT/build-tsa}"

say() { printf 'thread_safety.sh: %s\n' "$*"; }

# The analysis does not depend on optimisation: a Debug build is quicker.
SETUP_BROWSER_TOOLS=0 bash "$ROOT/scripts/setup.sh" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" \
  -DRETRYD_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Debug
say "PASSED: no thread-safety findings"
