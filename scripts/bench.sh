#!/usr/bin/env bash
# Builds and runs every benchmark, writes their CSVs and PNG charts to
# bench/results/. A few minutes on 2 cores with the defaults.
#
#   scripts/bench.sh [bench ...]        (default: every bench in BENCHES below)
#
# As root on Debian 12 it installs what is missing (scripts/setup.sh's
# packages, plus gnuplot-nox for the charts); as another user it says what
# to install. Builds into build-bench/ (BUILD_DIR to change).
#
# Environment:
#   BENCH_ARGS            flags given to every bench (e.g. --repeat=5)
#   <NAME>_ARGS           flags for one bench, upper case: RELAY_BENCH_ARGS,
#                         HEAD_OF_LINE_BENCH_ARGS, ... (after BENCH_ARGS)
#   BENCH_OUT             where CSVs and charts go (default: bench/results)
#   BUILD_DIR             build directory (default: build-bench)
#
# A bench listed here but not (yet) declared in bench/CMakeLists.txt is
# skipped with a message; one that fails is reported and the others still
# run; the script exits non-zero if any failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
OUT="${BENCH_OUT:-$ROOT/bench/results}"

# In the order they run, with the figures docs/performance.md shows.
BENCHES=(relay_bench head_of_line_bench retry_drain_bench control_plane_bench memory_bench)

say() { printf 'bench.sh: %s\n' "$*"; }

if (($# > 0)); then BENCHES=("$@"); fi

# ---- packages and build --------------------------------------------------------
if ! command -v gnuplot >/dev/null 2>&1; then
  if [[ "$(id -u)" -eq 0 ]]; then
    say "installing gnuplot-nox"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gnuplot-nox
  else
    say "gnuplot is missing: charts will be skipped (as root: apt-get install gnuplot-nox)"
  fi
fi
BUILD_DIR="$BUILD_DIR" BUILD_TARGETS=benches \
  bash "$ROOT/scripts/setup.sh" -DRETRYD_BUILD_BENCH=ON

# ---- run -----------------------------------------------------------------------
mkdir -p "$OUT"
read -r -a common <<<"${BENCH_ARGS:-}"
failed=()
for bench in "${BENCHES[@]}"; do
  binary="$BUILD_DIR/bench/$bench"
  if [[ ! -x "$binary" ]]; then
    say "skipping $bench: not built (not in bench/CMakeLists.txt yet)"
    continue
  fi
  var="$(printf '%s' "$bench" | tr '[:lower:]' '[:upper:]')_ARGS"
  read -r -a own <<<"${!var:-}"
  say "running $bench ${common[*]} ${own[*]}"
  start=$SECONDS
  # The embedded broker runs inside each bench; nothing else is started.
  if (cd "$ROOT" && "$binary" --out="$OUT" "${common[@]}" "${own[@]}"); then
    say "$bench done in $((SECONDS - start)) s"
  else
    say "$bench FAILED (exit $?) after $((SECONDS - start)) s"
    failed+=("$bench")
  fi
done

# ---- charts --------------------------------------------------------------------
if command -v gnuplot >/dev/null 2>&1; then
  bash "$ROOT/bench/charts.sh" "$OUT"
fi

if ((${#failed[@]} > 0)); then
  say "failed: ${failed[*]}"
  exit 1
fi
say "results in $OUT"
