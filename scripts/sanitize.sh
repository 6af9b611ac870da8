#!/usr/bin/env bash
# Builds retryd with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan/ and runs the tests that exercise its own threads and memory
# (unit, integration, control, client). Not part of CI (it doubles the build
# time); run it before changing the engine, the Kafka layer or the control
# service.
#
#   scripts/sanitize.sh [extra ctest args...]
#
# ThreadSanitizer is scripts/tsan.sh, for the engine's tests only: Debian's
# gRPC is not instrumented, so TSan cannot check the control and client tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-asan}"

bash "$ROOT/scripts/setup.sh" -DRETRYD_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 600 \
  -L 'unit|integration|control|client' "$@"
