#!/usr/bin/env bash
# Compiles retryd (server and client, not the tests) with clang's static
# thread-safety analysis into build-tsa/, turning its findings into errors:
# a field marked ABSL_GUARDED_BY(mu) touched without mu held, a function
# marked ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) called without it, a lock not
# released on some path. scripts/test.sh runs it after the test suite.
#
#   scripts/thread_safety.sh
#
# Installs Debian's clang (as root) if it is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${TSA_BUILD_DIR:-$ROOT/build-tsa}"

say() { printf 'thread_safety.sh: %s\n' "$*"; }

if ! command -v clang++ >/dev/null 2>&1; then
  if [[ "$(id -u)" -ne 0 ]]; then
    say "clang++ not found; install Debian's clang package as root and run again" >&2
    exit 1
  fi
  say "installing clang"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends clang
fi

bash "$ROOT/scripts/setup.sh" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" \
  -DRETRYD_BUILD_TESTS=OFF
say "PASSED: no thread-safety findings"
