#!/usr/bin/env bash
# Smoke check of the two peers on a one-node Apache Kafka on loopback:
# builds both jars, then for each run (Spring @RetryableTopic, Parallel
# Consumer with KEY and with UNORDERED ordering) creates its own topics,
# produces N ok-, N flaky- and N perm- records, starts the app with short
# backoffs, waits (bounded) until every ok-/flaky- key is in the output and
# every perm- key in the dead-letter topic, prints the counts and stops the app.
#
#   bench/peers/smoke.sh [N]     N records of each kind, default 100
#
# Environment: SMOKE_TIMEOUT (seconds per run, default 180), SMOKE_HEAP
# (default 512m), SKIP_BUILD=1 to use the jars already built.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
N="${1:-100}"
TIMEOUT="${SMOKE_TIMEOUT:-180}"
HEAP="${SMOKE_HEAP:-512m}"
PY=/usr/bin/python3  # Debian's, with kafka-python

# shellcheck source=../../scripts/local_kafka.sh
source "$ROOT/scripts/local_kafka.sh"

WORK="$(mktemp -d)"
app_pid=""

stop_app() {
  [[ -n "$app_pid" ]] || return 0
  kill -TERM "$app_pid" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$app_pid" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.2  # Another process's exit: polled, nothing to wait on.
  done
  kill -KILL "$app_pid" 2>/dev/null || true
  wait "$app_pid" 2>/dev/null || true
  app_pid=""
}

cleanup() {
  stop_app
  stop_local_kafka
  rm -rf "$WORK"
}
trap cleanup EXIT

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
run() {  # run LABEL JAR [EXTRA ARGS...]
  local label="$1" jar="$2"; shift 2
  local in="smoke-$label.in" out="smoke-$label.out" dlq="smoke-$label.dlq"
  "$PY" "$HERE/smoke_check.py" setup "$BOOT" "$in" "$out" "$dlq" "$N"
  local started=$SECONDS
  java -Xms"$HEAP" -Xmx"$HEAP" -jar "$jar" "${COMMON[@]}" \
    --peer.input-topic="$in" --peer.output-topic="$out" --peer.dlq-topic="$dlq" \
    --peer.group-id="smoke-$label" "$@" >"$WORK/$label.log" 2>&1 &
  app_pid=$!
  if ! "$PY" "$HERE/smoke_check.py" wait "$BOOT" "$out" "$dlq" "$N" \
      --pid "$app_pid" --timeout "$TIMEOUT" --label "$label"; then
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

if ((failed)); then
  echo "smoke: FAILED"
  exit 1
fi
echo "smoke: all runs passed"
