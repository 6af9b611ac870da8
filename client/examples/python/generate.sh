#!/usr/bin/env bash
# Generates the Python code of processor.proto for downstream.py:
#
#   client/examples/python/generate.sh OUTDIR
#
# writes OUTDIR/processor_pb2.py and OUTDIR/processor_pb2_grpc.py, and
# OUTDIR/google/rpc/{status,error_details}_pb2.py from the vendored
# google/rpc protos (a failure's reason goes in its status details; Debian
# packages no grpcio-status nor googleapis-common-protos), with
# Debian's protoc and grpc_python_plugin (packages protobuf-compiler and
# protobuf-compiler-grpc). Debian's python3-grpc-tools is too old for the
# proto3 `optional` fields of processor.proto. $PROTOC and $GRPC_PYTHON_PLUGIN
# name other binaries.
set -euo pipefail

if (($# != 1)); then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
mkdir -p "$1"
# The proto's own directory is the include path, so the modules are flat
# (`import processor_pb2`) rather than a retryd.v1 package.
"${PROTOC:-protoc}" -I "$ROOT/proto/retryd/v1" --python_out="$1" --grpc_python_out="$1" \
  --plugin=protoc-gen-grpc_python="${GRPC_PYTHON_PLUGIN:-/usr/bin/grpc_python_plugin}" \
  "$ROOT/proto/retryd/v1/processor.proto"
# google.rpc as a package beside google.protobuf (both namespace packages).
"${PROTOC:-protoc}" -I "$ROOT/proto" --python_out="$1" \
  "$ROOT/proto/google/rpc/status.proto" "$ROOT/proto/google/rpc/error_details.proto"
