#!/usr/bin/env bash
# Builds retryd (via scripts/setup.sh) and runs it in demo mode on the
# embedded broker with deploy/examples/demo.textproto, or with the config
# file given.
#
#   scripts/demo.sh [--config FILE] [extra retryd flags...]
#
# e.g. `scripts/demo.sh --config deploy/examples/grpc-demo.textproto` sends
# the demo load to the example downstream of scripts/example.sh.
#
# Environment: BUILD_DIR (default: <repo>/build), as for setup.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR

config="$ROOT/deploy/examples/demo.textproto"
if [[ "${1:-}" == "--config" ]]; then
  config="${2:?--config needs a file}"
  shift 2
fi

bash "$ROOT/scripts/setup.sh"

exec "$BUILD_DIR/retryd" --config "$config" --demo "$@"
