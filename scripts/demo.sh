#!/usr/bin/env bash
# Builds retryd (via scripts/setup.sh) and runs it in demo mode on the
# embedded broker with deploy/examples/demo.textproto.
#
#   scripts/demo.sh [extra retryd flags...]
#
# Environment: BUILD_DIR (default: <repo>/build), as for setup.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR

bash "$ROOT/scripts/setup.sh"

exec "$BUILD_DIR/retryd" --config "$ROOT/deploy/examples/demo.textproto" --demo "$@"
