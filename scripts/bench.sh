#!/usr/bin/env bash
# Builds and runs the benchmarks B1-B6, writes their CSVs and PNG charts to
# bench/results/. A few minutes on 2 cores with the defaults.
#
#   scripts/bench.sh [--kafka] [--only NAME[,NAME...]] [--out DIR] [-- BENCH_FLAG...]
#   scripts/bench.sh peers [--scale F] [--sides S,...] [--workloads W,...] [--out DIR] ...
#   scripts/bench.sh redrive [--rates R,...] [--max-records N]
#
#   redrive        how close a redrive of the dead-letter tools comes to its
#                  set rate, per rate, on one real Kafka broker started here
#                  (or RETRYD_TEST_KAFKA): bench/redrive_rate.py, results in
#                  bench/results/redrive.csv. About two minutes.
#   peers          retryd against its peers (a bare librdkafka relay, Spring
#                  Kafka's @RetryableTopic, Confluent's Parallel Consumer) on
#                  one real Kafka broker, started here (or RETRYD_TEST_KAFKA):
#                  bench/peers/run.py, whose --help lists its options; tables,
#                  CSVs and charts go to bench/results/peers/. The JVM peers
#                  set the pace: about 2.5 hours with the defaults on 2 busy
#                  cores, --scale 0.3 about one, --scale 0.1 about 20 minutes.
#                  SKIP_BUILD=1 uses the binaries and jars already built.
#                  See docs/performance-peers.md, "Against the peers".
#   --kafka        on a real Apache Kafka instead of the embedded broker (the
#                  mock cluster in each bench's process): the cluster at
#                  RETRYD_TEST_KAFKA=host:port if that is set, else one KRaft
#                  node on loopback (scripts/kafka.sh, fetched on first use),
#                  started here and stopped when the script ends, Ctrl-C or
#                  failure included. Results go to bench/results/kafka/.
#   --only NAMES   the benches to run, comma-separated, in the order given
#                  (default, in this order: relay_bench, head_of_line_bench,
#                  retry_drain_bench, control_plane_bench, memory_bench,
#                  held_work_bench)
#   --out DIR      where CSVs and charts go (default: bench/results, or
#                  bench/results/kafka with --kafka)
#   -h, --help     this text
#   --             everything after it goes to every bench run (after
#                  BENCH_ARGS and <NAME>_ARGS, so it wins); each bench's
#                  --help lists its flags, and rejects one it does not know
#
# As root on Debian 12 it installs what is missing (scripts/setup.sh's
# packages, plus gnuplot-nox for the charts); as another user it says what
# to install. Builds into build-bench/ (BUILD_DIR to change).
#
# Environment:
#   BENCH_ARGS            flags given to every bench (e.g. --repeat=5)
#   <NAME>_ARGS           flags for one bench, upper case: RELAY_BENCH_ARGS,
#                         HEAD_OF_LINE_BENCH_ARGS, ... (after BENCH_ARGS)
#   BENCH_OUT             where CSVs and charts go (--out wins)
#   BUILD_DIR             build directory (default: build-bench)
#   RETRYD_TEST_KAFKA     with --kafka: the cluster to use instead of starting
#                         one (RETRYD_TEST_KAFKA_PROPERTIES as for the tests,
#                         docs/kafka.md)
#
# A bench listed but not (yet) declared in bench/CMakeLists.txt is skipped
# with a message; one that fails is reported and the others still run; the
# script exits non-zero if any failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"

# In the order they run, with the figures docs/performance.md and its pages show.
ALL_BENCHES=(relay_bench head_of_line_bench retry_drain_bench control_plane_bench memory_bench
  held_work_bench)

say() { printf 'bench.sh: %s\n' "$*" >&2; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit "${1:-2}"; }

# ---- peers: scripts/bench.sh peers [run.py options] ------------------------------
peers() {
  local out="$ROOT/bench/results/peers" arg prev="" broker_pid=0 status=0
  for arg in "$@"; do
    [[ "$prev" == "--out" ]] && out="$arg"
    [[ "$arg" == --out=* ]] && out="${arg#--out=}"
    [[ "$arg" == -h || "$arg" == --help ]] && exec /usr/bin/python3 "$ROOT/bench/peers/run.py" --help
    prev="$arg"
  done
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    BUILD_DIR="$BUILD_DIR" BUILD_TARGETS="retryd retryd-example-downstream bare_relay peers_probe" \
      bash "$ROOT/scripts/setup.sh" -DRETRYD_BUILD_BENCH=ON
    mvn -q -f "$ROOT/bench/peers/pom.xml" package -DskipTests
  fi
  if ! command -v gnuplot >/dev/null 2>&1 && [[ "$(id -u)" -eq 0 ]]; then
    say "installing gnuplot-nox"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gnuplot-nox
  fi

  # The harness runs in the background and is waited for, so that a signal
  # is handled at once: it stops the harness (which stops every process it
  # started), then the EXIT trap stops the broker.
  run_pid=""
  trap '[[ -z "$run_pid" ]] || { kill -TERM "$run_pid" 2>/dev/null; wait "$run_pid"; }; exit 130' INT
  trap '[[ -z "$run_pid" ]] || { kill -TERM "$run_pid" 2>/dev/null; wait "$run_pid"; }; exit 143' TERM
  if [[ -n "${RETRYD_TEST_KAFKA:-}" ]]; then
    say "on the Kafka cluster at $RETRYD_TEST_KAFKA (RETRYD_TEST_KAFKA): no broker CPU measured"
    bootstrap="$RETRYD_TEST_KAFKA"
  else
    # shellcheck source=scripts/local_kafka.sh
    source "$ROOT/scripts/local_kafka.sh"
    # Global, not local: the EXIT trap runs after this function has returned.
    peers_kafka_dir="$(mktemp -d)"
    trap 'stop_local_kafka; rm -rf "$peers_kafka_dir"' EXIT
    start_local_kafka "$peers_kafka_dir" || exit 1
    bootstrap="$LOCAL_KAFKA_BOOTSTRAP"
    broker_pid="$(sed -n 's/^node 1 pid \([0-9]*\) .*/\1/p' "$peers_kafka_dir/run.out")"
    say "Kafka 4.1 at $bootstrap, one node, pid ${broker_pid:-?} (stopped when the run ends)"
  fi
  /usr/bin/python3 "$ROOT/bench/peers/run.py" --bootstrap "$bootstrap" \
    --broker-pid "${broker_pid:-0}" --build-dir "$BUILD_DIR" "$@" --out "$out" &
  run_pid=$!
  wait "$run_pid" || status=$?
  run_pid=""
  if command -v gnuplot >/dev/null 2>&1; then
    bash "$ROOT/bench/charts.sh" "$out"
  else
    say "gnuplot is missing: no charts (as root: apt-get install gnuplot-nox)"
  fi
  say "results in $out"
  exit "$status"
}
if [[ "${1:-}" == peers ]]; then
  shift
  peers "$@"
fi

# ---- redrive: scripts/bench.sh redrive [redrive_rate.py options] -------------------
if [[ "${1:-}" == redrive ]]; then
  shift
  BUILD_DIR="$BUILD_DIR" BUILD_TARGETS="retryd" bash "$ROOT/scripts/setup.sh"
  if [[ -z "${RETRYD_TEST_KAFKA:-}" ]]; then
    # shellcheck source=scripts/local_kafka.sh
    source "$ROOT/scripts/local_kafka.sh"
    redrive_kafka_dir="$(mktemp -d)"
    trap 'stop_local_kafka; rm -rf "$redrive_kafka_dir"' EXIT
    start_local_kafka "$redrive_kafka_dir" || exit 1
    export RETRYD_TEST_KAFKA="$LOCAL_KAFKA_BOOTSTRAP"
  fi
  mkdir -p "$ROOT/bench/results"
  /usr/bin/python3 "$ROOT/bench/redrive_rate.py" --retryd "$BUILD_DIR/retryd" \
    --proto-dir "$ROOT/proto" --out "$ROOT/bench/results/redrive.csv" "$@"
  exit $?
fi

kafka=0
only=""
out="${BENCH_OUT:-}"
extra=()
while (($# > 0)); do
  case "$1" in
    --kafka) kafka=1; shift ;;
    --only)
      (($# >= 2)) || { say "--only needs bench names"; usage; }
      only="$2"
      shift 2
      ;;
    --only=*) only="${1#--only=}"; shift ;;
    --out)
      (($# >= 2)) || { say "--out needs a directory"; usage; }
      out="$2"
      shift 2
      ;;
    --out=*) out="${1#--out=}"; shift ;;
    -h | --help) usage 0 ;;
    --) shift; extra+=("$@"); break ;;
    -*) say "unknown option '$1' (a bench's own flags go after --)"; usage ;;
    *) say "unknown argument '$1' (to run some benches: --only NAME[,NAME...])"; usage ;;
  esac
done

BENCHES=("${ALL_BENCHES[@]}")
if [[ -n "$only" ]]; then
  BENCHES=()
  IFS=',' read -r -a names <<<"$only"
  for name in "${names[@]}"; do
    [[ -z "$name" ]] && continue
    if [[ " ${ALL_BENCHES[*]} " != *" $name "* ]]; then
      say "unknown bench '$name'; the benches: ${ALL_BENCHES[*]}"
      exit 2
    fi
    BENCHES+=("$name")
  done
  ((${#BENCHES[@]} > 0)) || { say "--only names no bench; the benches: ${ALL_BENCHES[*]}"; exit 2; }
fi
if [[ -z "$out" ]]; then
  out="$ROOT/bench/results"
  if ((kafka == 1)); then out="$ROOT/bench/results/kafka"; fi
fi
mkdir -p "$out"
OUT="$(cd "$out" && pwd)"

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

# ---- signals -------------------------------------------------------------------
# Ctrl-C or a kill stops the bench running and exits, which runs the EXIT
# trap (with --kafka, it stops the broker). Each bench runs in the
# background and is waited for, so that a signal is handled at once rather
# than when the bench ends.
bench_pid=""
on_signal() {
  if [[ -n "$bench_pid" ]]; then
    kill -TERM "$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
  fi
  exit "$1"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# ---- the broker ----------------------------------------------------------------
# The benches read RETRYD_TEST_BROKER and RETRYD_TEST_KAFKA through
# tests/support/test_cluster.h. Without --kafka it is the embedded broker,
# whatever the environment says, so bench/results/ holds only its figures.
if ((kafka == 0)); then
  export RETRYD_TEST_BROKER=mock
elif [[ -n "${RETRYD_TEST_KAFKA:-}" ]]; then
  export RETRYD_TEST_BROKER=kafka RETRYD_TEST_KAFKA
  say "on the Kafka cluster at $RETRYD_TEST_KAFKA (RETRYD_TEST_KAFKA)"
else
  # shellcheck source=scripts/local_kafka.sh
  source "$ROOT/scripts/local_kafka.sh"
  dir="$(mktemp -d)"
  trap 'stop_local_kafka; rm -rf "$dir"' EXIT
  start_local_kafka "$dir" || exit 1
  RETRYD_TEST_KAFKA="$LOCAL_KAFKA_BOOTSTRAP"
  export RETRYD_TEST_BROKER=kafka RETRYD_TEST_KAFKA
  say "Kafka 4.1 at $RETRYD_TEST_KAFKA, one node (stopped when the benches end)"
fi

# ---- run -----------------------------------------------------------------------
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
  say "running $bench ${common[*]} ${own[*]} ${extra[*]}"
  start=$SECONDS
  (cd "$ROOT" && exec "$binary" --out="$OUT" "${common[@]}" "${own[@]}" "${extra[@]}") &
  bench_pid=$!
  status=0
  wait "$bench_pid" || status=$?
  bench_pid=""
  if ((status == 0)); then
    say "$bench done in $((SECONDS - start)) s"
  else
    say "$bench FAILED (exit $status) after $((SECONDS - start)) s"
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
