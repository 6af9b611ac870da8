#!/usr/bin/env bash
# Smoke check of the two peers on a one-node Apache Kafka on loopback:
# builds both jars, then for each run (Spring @RetryableTopic, Parallel
# Consumer with KEY and with UNORDERED ordering, then Spring and Parallel
# Consumer again calling the example downstream over gRPC) creates its own
# topics, produces N ok-, N flaky- and N perm- records, starts the app with
# short backoffs, waits (bounded) until every ok-/flaky- key is in the output
# and every perm- key in the dead-letter topic, prints the counts and stops
# the app.
#
#   bench/peers/smoke.sh [N]     N records of each kind, default 100
#
# Environment: SMOKE_TIMEOUT (seconds per run, default 180), SMOKE_HEAP
# (default 512m), SKIP_BUILD=1 to use the jars already built,
# DOWNSTREAM_BINARY (default build/client/examples/retryd-example-downstream,
# built with the project).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
N="${1:-100}"
TIMEOUT="${SMOKE_TIMEOUT:-180}"
HEAP="${SMOKE_HEAP:-512m}"
PY=/usr/bin/python3  # Debian's, with kafka-python
DOWNSTREAM_BINARY="${DOWNSTREAM_BINARY:-$ROOT/build/client/examples/retryd-example-downstream}"

if [[ ! -x "$DOWNSTREAM_BINARY" ]]; then
  echo "smoke: no example downstream at $DOWNSTREAM_BINARY: build it" \
    "(cmake --build build --target retryd-example-downstream) or set DOWNSTREAM_BINARY" >&2
  exit 1
fi

# shellcheck source=../../scripts/local_kafka.sh
source "$ROOT/scripts/local_kafka.sh"

WORK="$(mktemp -d)"
app_pid=""
downstream_pid=""

stop_process() {  # stop_process PID: SIGTERM, then SIGKILL after 30 s
  local pid="$1"
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.2  # Another process's exit: polled, nothing to wait on.
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

stop_app() {
  stop_process "$app_pid"
  app_pid=""
}

cleanup() {
  stop_app
  stop_process "$downstream_pid"
  downstream_pid=""
  stop_local_kafka
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  mvn -q -f "$HERE/pom.xml" package -DskipTests
fi
SPRING_JAR="$HERE/spring-retry-topic/target/spring-retry-topic.jar"
PC_JAR="$HERE/parallel-consumer/target/parallel-consumer.jar"

start_local_kafka "$WORK"
BOOT="$LOCAL_KAFKA_BOOTSTRAP"
echo "smoke: Kafka at $BOOT"

# Short backoffs, so a run takes seconds: 4 attempts, 100 ms x 2, max 1 s.
COMMON=(--peer.bootstrap-servers="$BOOT" --peer.attempts=4
        --peer.backoff.initial-ms=100 --peer.backoff.multiplier=2.0
        --peer.backoff.max-ms=1000 --peer.processing-ms=1)

failed=0
run() {  # run LABEL JAR [--processed-by NAME] [EXTRA ARGS...]
  local label="$1" jar="$2"; shift 2
  local check=()
  if [[ "${1:-}" == --processed-by ]]; then
    check=(--processed-by "$2"); shift 2
  fi
  local in="smoke-$label.in" out="smoke-$label.out" dlq="smoke-$label.dlq"
  "$PY" "$HERE/smoke_check.py" setup "$BOOT" "$in" "$out" "$dlq" "$N"
  local started=$SECONDS
  java -Xms"$HEAP" -Xmx"$HEAP" -jar "$jar" "${COMMON[@]}" \
    --peer.input-topic="$in" --peer.output-topic="$out" --peer.dlq-topic="$dlq" \
    --peer.group-id="smoke-$label" "$@" >"$WORK/$label.log" 2>&1 &
  app_pid=$!
  if ! "$PY" "$HERE/smoke_check.py" wait "$BOOT" "$out" "$dlq" "$N" \
      --pid "$app_pid" --timeout "$TIMEOUT" --label "$label" "${check[@]}"; then
    failed=1
    echo "smoke: $label: last lines of its log:"
    tail -n 40 "$WORK/$label.log" || true
  fi
  echo "smoke: $label: $((SECONDS - started)) s"
  stop_app
  local lines
  lines=$(wc -l <"$WORK/$label.log")
  echo "smoke: $label: the app printed $lines lines"
}

run spring "$SPRING_JAR"
run pc-key "$PC_JAR" --peer.ordering=KEY
run pc-unordered "$PC_JAR" --peer.ordering=UNORDERED

# The example downstream with the peers' rule: flaky- keys fail attempts 1 and
# 2, perm- keys fail (retriably) every attempt. Its parent-death signal stops
# it even if this script is killed outright.
setpriv --pdeathsig TERM "$DOWNSTREAM_BINARY" --port 0 --flaky_attempts 2 --perm_retriable \
  >"$WORK/downstream.out" 2>"$WORK/downstream.log" &
downstream_pid=$!
deadline=$((SECONDS + 30))
until grep -q '^listening on ' "$WORK/downstream.out"; do
  if ! kill -0 "$downstream_pid" 2>/dev/null || ((SECONDS > deadline)); then
    echo "smoke: the example downstream did not start:" >&2
    cat "$WORK/downstream.log" >&2
    exit 1
  fi
  sleep 0.2  # Another process's output: polled, nothing to wait on.
done
DOWNSTREAM="127.0.0.1:$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$WORK/downstream.out")"
echo "smoke: example downstream at $DOWNSTREAM"

# The downstream upper-cases each value and adds a processed-by header.
run spring-downstream "$SPRING_JAR" --processed-by cpp-example --peer.downstream="$DOWNSTREAM"
run pc-downstream "$PC_JAR" --processed-by cpp-example --peer.ordering=KEY \
  --peer.downstream="$DOWNSTREAM"

if ((failed)); then
  echo "smoke: FAILED"
  exit 1
fi
echo "smoke: all runs passed"
