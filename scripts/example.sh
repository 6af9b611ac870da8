#!/usr/bin/env bash
# Builds retryd and its examples (via scripts/setup.sh) and runs an example
# downstream of client/examples/: a retryd.v1.RecordProcessor server on
# 127.0.0.1:50061, for deploy/examples/grpc-demo.textproto.
#
#   scripts/example.sh [python|cpp] [example flags: --host H --port P]
#
# python (the default) runs client/examples/python/downstream.py with
# Debian's /usr/bin/python3; cpp runs build/client/examples/retryd-example-downstream.
# Ctrl-C stops it.
#
# Environment: BUILD_DIR (default: <repo>/build), as for setup.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR

language="${1:-python}"
(($# > 0)) && shift
case "$language" in
  python | cpp) ;;
  *)
    echo "example.sh: unknown example '$language' (python or cpp)" >&2
    exit 2
    ;;
esac

bash "$ROOT/scripts/setup.sh"

if [[ "$language" == "python" ]]; then
  exec /usr/bin/python3 "$ROOT/client/examples/python/downstream.py" \
    --gen-dir "$BUILD_DIR/client/examples/python" "$@"
fi
exec "$BUILD_DIR/client/examples/retryd-example-downstream" "$@"
