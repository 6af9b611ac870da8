# Sourced, not run: a one-node Apache Kafka on loopback for the length of the
# calling script (scripts/demo.sh --kafka, scripts/bench.sh --kafka).
#
#   start_local_kafka DIR   starts scripts/kafka.sh run with its files in DIR
#                           (which must exist), owned by the calling shell
#                           (--owner-pid $$: it stops if that shell dies),
#                           waits until it serves and sets LOCAL_KAFKA_BOOTSTRAP;
#                           returns 1 after printing its log if it did not
#                           start within KAFKA_WAIT seconds (default 240)
#   stop_local_kafka        stops it and waits for it; safe to call twice
#
# The caller traps EXIT to stop_local_kafka.

LOCAL_KAFKA_SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka.sh"
LOCAL_KAFKA_BOOTSTRAP=""
local_kafka_pid=""

start_local_kafka() {
  local dir="$1" deadline
  bash "$LOCAL_KAFKA_SCRIPT" fetch >/dev/null || return 1
  bash "$LOCAL_KAFKA_SCRIPT" run --nodes 1 --dir "$dir/cluster" --owner-pid $$ \
    </dev/null >"$dir/run.out" 2>"$dir/run.log" &
  local_kafka_pid=$!
  deadline=$((SECONDS + ${KAFKA_WAIT:-240}))
  until grep -q '^bootstrap: ' "$dir/run.out" 2>/dev/null; do
    if ! kill -0 "$local_kafka_pid" 2>/dev/null || ((SECONDS > deadline)); then
      printf 'Kafka did not start:\n' >&2
      cat "$dir/run.log" >&2
      stop_local_kafka
      return 1
    fi
    sleep 0.2  # Another process's output: polled, nothing to wait on.
  done
  LOCAL_KAFKA_BOOTSTRAP="$(sed -n 's/^bootstrap: //p' "$dir/run.out")"
}

stop_local_kafka() {
  if [[ -n "$local_kafka_pid" ]]; then
    kill -TERM "$local_kafka_pid" 2>/dev/null || true
    wait "$local_kafka_pid" 2>/dev/null || true
    local_kafka_pid=""
  fi
}
