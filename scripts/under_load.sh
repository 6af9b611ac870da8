#!/usr/bin/env bash
# The suite under load: runs the `integration` and `kafka` labels ROUNDS
# times in a row while the `stress` label runs over and over beside them on
# the same cores, and stops at the first failure. What it shows: tests that
# wait for what they judge, not for time, pass on a busy machine too.
#
#   scripts/under_load.sh [--rounds N] [-j N] [--labels REGEX] [--tests REGEX]
#
#   --rounds N      rounds of the judged labels (default 3)
#   -j N, -jN       tests at once in each round (default 4)
#   --labels REGEX  the judged labels (default 'integration|kafka')
#   --tests REGEX   judge the tests whose names match instead of labels
#                   (e.g. one test that once hung, --rounds 50)
#
# Needs a built BUILD_DIR (default <repo>/build; scripts/setup.sh builds it).
# The kafka label starts its own one-node broker in each round (its ctest
# fixture), unless RETRYD_TEST_KAFKA names one. Bounded: the stress loop
# starts no pass after the last round ends (the one under way runs to its
# end, a few minutes, so that no test is cut off with children of its own),
# and none after the 50th.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
rounds=3
jobs=4
labels='integration|kafka'
tests=''

say() { printf 'under_load.sh: %s\n' "$*"; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit "${1:-2}"; }
while (($# > 0)); do
  case "$1" in
    --rounds) (($# >= 2)) || usage; rounds="$2"; shift 2 ;;
    -j) (($# >= 2)) || usage; jobs="$2"; shift 2 ;;
    -j*) jobs="${1#-j}"; shift ;;
    --labels) (($# >= 2)) || usage; labels="$2"; shift 2 ;;
    --tests) (($# >= 2)) || usage; tests="$2"; shift 2 ;;
    -h | --help) usage 0 ;;
    *) say "unknown argument '$1'"; usage ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { say "--rounds needs a positive number"; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { say "-j needs a positive number"; exit 2; }
[[ -f "$BUILD_DIR/CTestTestfile.cmake" ]] ||
  { say "no build in $BUILD_DIR: run scripts/setup.sh first"; exit 2; }

work="$(mktemp -d)"
stop_file="$work/stop"
stress_log="$work/stress.log"
# The load: the stress label again and again until the rounds are over.
(
  for ((pass = 1; pass <= 50; pass++)); do
    [[ -e "$stop_file" ]] && break
    if ctest --test-dir "$BUILD_DIR" -L stress --timeout 600 >>"$stress_log" 2>&1; then
      echo "stress pass $pass: passed" >>"$work/stress.passes"
    else
      echo "stress pass $pass: FAILED" >>"$work/stress.passes"
    fi
  done
) &
stress_pid=$!
finish() {
  local rc=$?
  touch "$stop_file"
  # The running stress pass ends by itself (its tests are bounded); wait
  # for it rather than leave its children behind.
  wait "$stress_pid" 2>/dev/null || true
  if [[ -f "$work/stress.passes" ]]; then
    say "load: $(grep -c passed "$work/stress.passes" || true) stress passes passed," \
      "$(grep -c FAILED "$work/stress.passes" || true) failed"
  fi
  # Kept for a look when anything failed; gone otherwise.
  if ((rc == 0)) && ! grep -q FAILED "$work/stress.passes" 2>/dev/null; then
    rm -rf "$work"
  else
    say "the stress label's output: $stress_log"
  fi
}
trap finish EXIT

if [[ -n "$tests" ]]; then
  selection=(-R "$tests")
else
  selection=(-L "$labels")
fi
started=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  say "round $round of $rounds: ctest ${selection[*]} -j$jobs beside the stress label"
  round_started=$SECONDS
  if ! ctest --test-dir "$BUILD_DIR" "${selection[@]}" -j"$jobs" --timeout 600 --output-on-failure \
    --no-tests=error; then
    say "round $round FAILED after $((SECONDS - round_started)) s"
    exit 1
  fi
  say "round $round passed in $((SECONDS - round_started)) s"
done
say "PASSED: $rounds rounds of '${selection[*]}' under load in $((SECONDS - started)) s"
