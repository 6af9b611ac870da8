#!/usr/bin/env bash
# The full kill soak: builds retryd (via scripts/setup.sh), then runs
# tests/soak/kill_soak.py with 100,000 records and 5 SIGKILLs of retryd, and
# its independent checker. Exits 0 only if nothing was lost.
#
#   scripts/soak.sh [kill_soak.py args...]     e.g. scripts/soak.sh --kills 10 --seed 42
#
# Later arguments override the defaults (--records 100000 --kills 5); see
# `python3 tests/soak/kill_soak.py --help`. The CI-sized variant is the ctest
# test kill_soak (label soak). Environment: BUILD_DIR (default: <repo>/build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR

bash "$ROOT/scripts/setup.sh"

exec /usr/bin/python3 "$ROOT/tests/soak/kill_soak.py" \
  --retryd "$BUILD_DIR/retryd" --broker "$BUILD_DIR/retryd-mock-broker" \
  --records 100000 --kills 5 "$@"
