#!/usr/bin/env bash
# The ctest fixture of the `kafka` label: one single-node Kafka for the whole
# ctest run, whichever of its tests run (tests/kafka/CMakeLists.txt).
#
#   broker_fixture.sh start DIR    writes the bootstrap to DIR/bootstrap
#   broker_fixture.sh stop DIR     stops the broker start started
#
# With RETRYD_TEST_KAFKA set (scripts/test.sh's broker, or a user's cluster)
# start only writes that bootstrap and stop does nothing. A broker it starts
# itself is the project's: it writes DIR/owned beside the bootstrap, so that
# tests may kill its nodes (tests/kafka/real_kafka.py). Otherwise start runs
# scripts/kafka.sh (fetching Kafka first if the cache is empty) in a session
# of its own, with ctest as its owner: if ctest dies before the cleanup test
# runs, the broker stops all the same.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
action="${1:?usage: broker_fixture.sh start|stop DIR}"
dir="${2:?usage: broker_fixture.sh start|stop DIR}"
START_TIMEOUT=180  # seconds for the broker to serve once the jars are fetched

say() { printf 'broker_fixture: %s\n' "$*"; }

stop_broker() {
  [[ -f "$dir/pid" ]] || return 0
  local pid deadline
  pid="$(cat "$dir/pid")"
  rm -f "$dir/pid"
  # Only a kafka.sh of ours: a pid left by an old run may be someone else's now.
  if [[ "$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null)" != *"kafka.sh run"*"$dir/cluster"* ]]; then
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || return 0
  deadline=$((SECONDS + 90))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    say "kafka.sh (pid $pid) did not stop in 90 s: SIGKILL (its nodes die with it)"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  say "broker stopped"
}

case "$action" in
  start)
    stop_broker  # a broker a killed run left behind, if any
    rm -rf "$dir"
    mkdir -p "$dir"
    if [[ -n "${RETRYD_TEST_KAFKA:-}" ]]; then
      say "using RETRYD_TEST_KAFKA=$RETRYD_TEST_KAFKA; starting no broker"
      printf '%s\n' "$RETRYD_TEST_KAFKA" >"$dir/bootstrap"
      exit 0
    fi
    bash "$ROOT/scripts/kafka.sh" fetch >/dev/null
    # $PPID is ctest, which runs this script.
    setsid bash "$ROOT/scripts/kafka.sh" run --nodes 1 --dir "$dir/cluster" --owner-pid "$PPID" \
      </dev/null >"$dir/run.out" 2>"$dir/run.log" &
    pid=$!
    echo "$pid" >"$dir/pid"
    deadline=$((SECONDS + START_TIMEOUT))
    until grep -q '^bootstrap: ' "$dir/run.out" 2>/dev/null; do
      if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
        say "the broker did not start:"
        cat "$dir/run.log" >&2
        stop_broker
        exit 1
      fi
      sleep 0.2  # Another process's output: polled, nothing to wait on.
    done
    sed -n 's/^bootstrap: //p' "$dir/run.out" >"$dir/bootstrap"
    : >"$dir/owned"
    say "broker at $(cat "$dir/bootstrap") (logs in $dir/cluster)"
    cat "$dir/run.out"
    ;;
  stop)
    stop_broker
    ;;
  *)
    say "unknown action '$action' (start or stop)" >&2
    exit 2
    ;;
esac
