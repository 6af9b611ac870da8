#!/usr/bin/env bash
# The whole test command (.ci/run runs exactly this). On a fresh Debian 12
# machine as root it installs what it needs, then runs, stopping at the first
# failure:
#
#   suite          build (scripts/setup.sh, the benches included) and run
#                  every ctest test, the `kafka` label on one real
#                  single-node Kafka that this step starts (scripts/kafka.sh,
#                  fetched on first use) and stops;
#                  then REPEATED_TESTS ten times in a row
#   format         scripts/format.sh --check
#   thread-safety  scripts/thread_safety.sh: clang's lock analysis
#   asan           scripts/sanitize.sh: the whole suite again under
#                  AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer
#   tsan           scripts/tsan.sh: the engine's tests under ThreadSanitizer
#   fuzz           scripts/fuzz.sh: a few seconds of each fuzzer
#
#   scripts/test.sh                      all of it
#   scripts/test.sh -L unit              the suite only, with these ctest args
#   TEST_STEPS="suite asan" scripts/test.sh    chosen steps
#
# Environment: BUILD_DIR (default: <repo>/build), as for setup.sh; the
# sanitizer and fuzz builds have their own directories (build-asan/,
# build-tsan/, build-fuzz/, build-tsa/). RETRYD_TEST_KAFKA=host:port runs the
# `kafka` label on that cluster instead of starting a broker
# (RETRYD_TEST_KAFKA_PROPERTIES=FILE for its SASL/SSL settings); the
# sanitizer steps leave that label out.
#
# CI=true (or CI=1; CI services set it) makes a test whose tool is missing
# (Chromium, promtool, openssl, systemd-analyze, ...) fail, naming the tool
# and its package, where it is otherwise skipped (tests/support/
# missing_tool.py and missing_tool.h): on CI a skip would pass unseen.
#
# Tests run six at a time: most of a test's time is spent waiting on the
# broker's timers (a group join, a fetch wait), so six use about a third of
# two cores; every test that needs a port binds loopback port 0 and lets
# the OS choose, so parallel tests do not collide. Under ASan too (its
# tests' times add up to about the plain suite's: they wait, they do not
# compute); under TSan four at a time, as its threads run several times
# slower.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR

ALL_STEPS="suite format thread-safety asan tsan fuzz"
if (($# > 0)); then
  default_steps="suite"  # ctest arguments pick tests of the plain build
else
  default_steps="$ALL_STEPS"
fi
read -r -a steps <<<"${TEST_STEPS:-$default_steps}"

say() { printf 'test.sh: %s\n' "$*"; }

case "$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]')" in
  true | 1) say "CI=${CI}: a test whose tool is missing fails" ;;
  *) say "a test whose tool is missing is skipped (CI=true makes it fail)" ;;
esac

# One broker for the whole ctest run: its tests share it through
# RETRYD_TEST_KAFKA (a broker per test would be a JVM per test case). Its
# owner is this script, so it stops even if this script is killed.
# shellcheck source=scripts/local_kafka.sh
source "$ROOT/scripts/local_kafka.sh"
# shellcheck source=scripts/ctest_run.sh
source "$ROOT/scripts/ctest_run.sh"
start_kafka() {
  if [[ -n "${RETRYD_TEST_KAFKA:-}" ]]; then
    say "the kafka label runs on RETRYD_TEST_KAFKA=$RETRYD_TEST_KAFKA"
    return 0
  fi
  local dir="$BUILD_DIR/kafka-run"
  rm -rf "$dir" && mkdir -p "$dir" || return 1
  KAFKA_WAIT=180 start_local_kafka "$dir" || return 1
  RETRYD_TEST_KAFKA="$LOCAL_KAFKA_BOOTSTRAP"
  # The cluster is the project's own: tests that kill brokers may run on it
  # (tests/kafka/real_kafka.py), never on a user's.
  RETRYD_TEST_KAFKA_OWNED=1
  export RETRYD_TEST_KAFKA RETRYD_TEST_KAFKA_OWNED
  say "Kafka at $RETRYD_TEST_KAFKA for the kafka label (logs in $dir/cluster)"
}
# kafka.sh bounds its own stop (SIGKILL after a minute).
stop_kafka() {
  [[ -n "$local_kafka_pid" ]] || return 0
  stop_local_kafka
  unset RETRYD_TEST_KAFKA RETRYD_TEST_KAFKA_OWNED
}
trap stop_kafka EXIT

# Steps run in an `||` list, where errexit is off: chain with &&.
# Tests that once failed only now and then, run again and again when the
# whole suite runs (not with chosen ctest arguments): each must pass ten times
# in a row.
REPEATED_TESTS='^DownstreamDetectorTest\.FlakyKeysNeverTakeThePrimaryRoleDown$'
step_suite() {
  local rc=0
  # The benches are built too: nothing else would notice one that no longer
  # compiles, and their pieces that judge a run have unit tests of their own.
  bash "$ROOT/scripts/setup.sh" -DRETRYD_BUILD_BENCH=ON && start_kafka && say "running ctest in $BUILD_DIR" &&
    run_ctest "$BUILD_DIR" --output-on-failure -j6 --timeout 300 --no-tests=error "$@" &&
    if (($# == 0)); then
      say "running $REPEATED_TESTS ten times in a row"
      ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 300 --no-tests=error \
        --repeat until-fail:10 -R "$REPEATED_TESTS"
    fi || rc=$?
  stop_kafka
  return $rc
}
step_format() { bash "$ROOT/scripts/format.sh" --check; }
step_thread-safety() { bash "$ROOT/scripts/thread_safety.sh"; }
# The sanitizer builds have build directories of their own; BUILD_DIR names
# the plain one.
step_asan() { env -u BUILD_DIR bash "$ROOT/scripts/sanitize.sh"; }
step_tsan() { env -u BUILD_DIR bash "$ROOT/scripts/tsan.sh"; }
step_fuzz() { bash "$ROOT/scripts/fuzz.sh"; }

summary=()
for step in "${steps[@]}"; do
  if [[ " $ALL_STEPS " != *" $step "* ]]; then
    say "unknown step '$step' (steps: $ALL_STEPS)" >&2
    exit 2
  fi
  say "---- $step ----"
  started=$SECONDS
  rc=0
  "step_$step" "$@" || rc=$?
  summary+=("$(printf '%-14s %4ds  %s' "$step" $((SECONDS - started)) \
    "$( ((rc == 0)) && echo passed || echo "FAILED (exit status $rc)")")")
  if ((rc != 0)); then
    printf 'test.sh: %s\n' "${summary[@]}" >&2
    say "FAILED in step '$step'" >&2
    exit "$rc"
  fi
done
printf 'test.sh: %s\n' "${summary[@]}"
say "PASSED"
