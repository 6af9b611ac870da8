#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan into
# build-fuzz/ (only those targets and the libraries they use) and runs each
# for SECONDS seconds, starting from its checked-in seed corpus and crash
# inputs. Fails if any target crashes, leaks, hangs or trips a sanitizer,
# and prints where the input that did it was saved.
#
#   scripts/fuzz.sh [SECONDS]      SECONDS per target, default 10; e.g. 600 for a long run
#
# Environment: FUZZ_BUILD_DIR (default: <repo>/build-fuzz); FUZZ_TARGETS
# (default: every target, space-separated, e.g. "config_loader").
#
# New inputs the fuzzer finds go to a temporary directory, never into the
# checked-in corpus; crash inputs go to build-fuzz/crashes/<target>/. Runs
# offline once scripts/setup.sh has installed the packages (clang and
# libclang-rt-14-dev, which holds libFuzzer).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
FUZZ_DIR="$ROOT/tests/fuzz"
read -r -a targets <<<"${FUZZ_TARGETS:-retry_headers config_loader control_requests processor_response dead_letters}"
seconds="${1:-10}"

say() { printf 'fuzz.sh: %s\n' "$*"; }
die() { printf 'fuzz.sh: error: %s\n' "$*" >&2; exit 2; }

[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a positive whole number, got '$seconds'"
command -v clang++ >/dev/null 2>&1 || die "clang++ not found (scripts/setup.sh installs it)"

# Debug with -O1: quicker to build than -O2, and the fuzzers still run fast.
say "configuring $BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 \
  -DRETRYD_FUZZ=ON -DRETRYD_BUILD_TESTS=OFF >/dev/null
say "building ${targets[*]}"
cmake --build "$BUILD_DIR" -j"$(nproc 2>/dev/null || echo 2)" --target "${targets[@]/%/_fuzz}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

failed=()
for target in "${targets[@]}"; do
  corpus="$FUZZ_DIR/corpus/$target"
  [[ -n "$(ls -A "$corpus" 2>/dev/null)" ]] || die "no seed corpus in $corpus"
  crashes="$BUILD_DIR/crashes/$target"
  mkdir -p "$crashes" "$work/$target"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$crashes/")
  [[ -f "$FUZZ_DIR/$target.dict" ]] && args+=(-dict="$FUZZ_DIR/$target.dict")
  # libFuzzer writes new inputs only to the first directory: the temporary one.
  dirs=("$work/$target" "$corpus")
  [[ -d "$FUZZ_DIR/regressions/$target" ]] && dirs+=("$FUZZ_DIR/regressions/$target")
  log="$BUILD_DIR/$target.log"
  say "running $target for ${seconds}s (log: $log)"
  touch "$work/$target.start"
  rc=0
  # stdin from /dev/null: a config naming /dev/stdin as a file to read must
  # not make the run wait.
  "$BUILD_DIR/tests/fuzz/${target}_fuzz" "${args[@]}" "${dirs[@]}" </dev/null >"$log" 2>&1 || rc=$?
  if ((rc == 0)); then
    say "$target: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | tr -s '\t ' ' ')"
    continue
  fi
  failed+=("$target")
  tail -n 60 "$log" >&2
  say "FAILED: $target exited with status $rc" >&2
  # Only this run's inputs: the directory keeps those of earlier runs.
  find "$crashes" -type f -newer "$work/$target.start" | while read -r input; do
    say "  input: $input" >&2
    say "  reproduce: $BUILD_DIR/tests/fuzz/${target}_fuzz $input" >&2
    say "  once fixed, keep it: cp $input tests/fuzz/regressions/$target/" >&2
  done
done

if ((${#failed[@]} > 0)); then
  say "FAILED: ${failed[*]}" >&2
  exit 1
fi
say "PASSED: ${targets[*]}, ${seconds}s each"
