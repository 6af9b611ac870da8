#!/usr/bin/env bash
# A real Apache Kafka for tests: jars from Maven Central, KRaft on loopback.
#
#   scripts/kafka.sh fetch
#       Fills the cache ${XDG_CACHE_HOME:-~/.cache}/retryd/kafka-<version>/
#       with org.apache.kafka:kafka_2.13 and its runtime dependencies, plus
#       the log4j binding Kafka's own distribution ships. Maven verifies every
#       checksum (-C); once the cache is complete a second run asks no one and
#       returns at once. Prints the cache directory.
#
#   scripts/kafka.sh run --nodes N --dir D [--owner-pid PID]
#       Formats N KRaft log dirs under D (D/node-<id>/, wiped first) and starts
#       N combined broker+controller nodes on free 127.0.0.1 ports. Once every
#       node serves it prints, on stdout:
#           bootstrap: 127.0.0.1:PORT,...
#           node ID pid PID port PORT          (one line per node)
#       and stays in the foreground until SIGTERM or SIGINT, which stop the
#       nodes cleanly (exit 0). A node that dies on its own stops the others
#       (exit 1). If this script dies, the kernel kills its JVMs (setpriv
#       --pdeathsig KILL). With --owner-pid it also stops when PID exits (a
#       ctest fixture passes ctest's pid, so a killed ctest leaves no broker).
#       Logs: D/node-<id>/server.log; a failure prints the tail.
#
#   scripts/kafka.sh prepare --nodes N --dir D
#   scripts/kafka.sh node --dir D --id ID
#       The same cluster in pieces, for a test that stops and starts nodes
#       itself (tests/kafka/broker_faults.py). `prepare` picks the ports,
#       writes the configs and formats the log dirs as `run` does, starts
#       nothing, and prints `bootstrap: ...` and one `node ID port PORT` line
#       a node. `node` then replaces itself with node ID's JVM (the caller's
#       child, killed by the kernel when the caller dies), logging to
#       D/node-<ID>/server.log; it may be started again after it stopped, on
#       the same data. A port taken between `prepare` and the start makes
#       the node exit with a BindException: prepare again.
#
# Settings are a test cluster's: group.initial.rebalance.delay.ms=0, no topic
# auto-creation (tests create their topics), sessions down to 1 s allowed; one
# node has replication factor 1; three or more have RF 3,
# min.insync.replicas=2 and unclean.leader.election.enable=false. Why these
# versions: docs/kafka.md, "The version tested, and why".
#
# Needs Java 17 and Maven; as root it installs Debian's openjdk-17-jre-headless
# and maven when they are missing.
set -euo pipefail

# Kafka 4.1.x, not 4.0.0: 4.0.0 removed JoinGroup v0-v1, which librdkafka
# before 2.11 sends for SASL/GSSAPI (KAFKA-19444, fixed in 4.0.1 and 4.1).
KAFKA_VERSION=4.1.2
# The version kafka-server 4.1.2 itself depends on (log4j-api, log4j-core),
# so the same as Kafka 4.1.2's distribution. The binding is log4j-slf4j-impl,
# for the SLF4J 1.7.36 that Kafka 4.1 ships, as its distribution does.
LOG4J_VERSION=2.25.3
ARTIFACTS=(
  "org.apache.kafka:kafka_2.13:$KAFKA_VERSION"
  "org.apache.logging.log4j:log4j-core:$LOG4J_VERSION"
  "org.apache.logging.log4j:log4j-slf4j-impl:$LOG4J_VERSION"
)

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/retryd/kafka-$KAFKA_VERSION"
LIBS="$CACHE/libs"
STAMP="$CACHE/complete"

# Sized for a 2-core machine running several of these beside the tests:
# a small fixed heap, one GC thread, and the quick C1 compiler only.
JVM_FLAGS=(
  -Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k
  -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData -Djava.awt.headless=true
  -Djava.net.preferIPv4Stack=true
)

START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}  # seconds for all nodes to serve
STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-60}     # seconds for a clean stop, then SIGKILL
BIND_ATTEMPTS=5

say() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }

# ---- tools ---------------------------------------------------------------------
apt_updated=0
need_package() {  # need_package COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  if [[ "$(id -u)" -ne 0 ]]; then
    die "'$1' is missing: install it with  sudo apt-get install -y --no-install-recommends $2"
  fi
  say "installing $2"
  if ((apt_updated == 0)); then
    apt-get update >&2
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >&2
}

# ---- fetch ---------------------------------------------------------------------
fetch() {
  need_package java openjdk-17-jre-headless
  local want
  want="$(printf '%s\n' "${ARTIFACTS[@]}")"
  if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "$CACHE"
    return 0
  fi
  need_package mvn maven
  say "fetching Kafka $KAFKA_VERSION into $CACHE"
  mkdir -p "$CACHE"
  rm -rf "$LIBS" "$STAMP"
  local deps="" a g v
  for a in "${ARTIFACTS[@]}"; do
    IFS=: read -r g a v <<<"$a"
    deps+="    <dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"$'\n'
  done
  cat >"$CACHE/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by scripts/kafka.sh: the broker's class path, nothing to build. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>retryd.test</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
$deps  </dependencies>
</project>
EOF
  # -C: a checksum that does not match fails the fetch.
  mvn -B -q -C -Dstyle.color=never -f "$CACHE/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIBS" >&2 ||
    die "maven could not fetch Kafka $KAFKA_VERSION"
  [[ -f "$LIBS/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "maven left no kafka_2.13 jar in $LIBS"
  printf '%s\n' "$want" >"$STAMP"
  say "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars"
  echo "$CACHE"
}

# ---- run -----------------------------------------------------------------------
nodes=1
dir=""
owner_pid=""
cluster_id=""
declare -a node_pid=() broker_port=() controller_port=()

# Ports someone listens on now (IPv4 and IPv6), one a line.
listening_ports() {
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [[ -r "$f" ]] || continue
    while read -r _ local _ state _; do
      if [[ "$state" == 0A ]]; then echo $((16#${local##*:})); fi
    done < <(tail -n +2 "$f")
  done
  return 0
}

# Picks 2*N distinct ports that nothing listens on, below the ephemeral range
# (so an outgoing connection cannot take one before the node binds it). A
# port taken between this check and the bind is what the retry is for.
pick_ports() {
  local low _ taken p i
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  ((low > 20000 + 2000)) || low=32768
  taken=" $(listening_ports | tr '\n' ' ') "
  local -a picked=()
  for ((i = 0; i < 2 * nodes; )); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % (low - 20000)))
    [[ "$taken" == *" $p "* ]] && continue
    taken+="$p "
    picked+=("$p")
    i=$((i + 1))
  done
  for ((i = 0; i < nodes; i++)); do
    broker_port[i]=${picked[2 * i]}
    controller_port[i]=${picked[2 * i + 1]}
  done
}

node_dir() { echo "$dir/node-$(($1 + 1))"; }

write_configs() {
  local i id nd voters="" rf isr
  for ((i = 0; i < nodes; i++)); do
    voters+="${voters:+,}$((i + 1))@127.0.0.1:${controller_port[i]}"
  done
  if ((nodes >= 3)); then rf=3 isr=2; else rf=$nodes isr=1; fi
  for ((i = 0; i < nodes; i++)); do
    id=$((i + 1))
    nd="$(node_dir "$i")"
    mkdir -p "$nd"
    cat >"$nd/server.properties" <<EOF
# Generated by scripts/kafka.sh for a test cluster; rewritten on every run.
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${broker_port[i]},CONTROLLER://127.0.0.1:${controller_port[i]}
advertised.listeners=PLAINTEXT://127.0.0.1:${broker_port[i]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$nd/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
unclean.leader.election.enable=false
auto.create.topics.enable=false
# Tests join groups constantly: no wait for more members, and short sessions
# allowed so a killed member leaves its group in seconds.
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
# Fewer internal partitions: their creation and loading is most of a first
# group join on a small machine.
offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
log.cleaner.threads=1
EOF
  done
}

write_log4j() {
  cat >"$dir/log4j2.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by scripts/kafka.sh: each node logs to its own server.log. -->
<Configuration status="warn">
  <Appenders>
    <File name="file" fileName="${sys:kafka.logs.dir}/server.log">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="warn"/>
    <Logger name="state.change.logger" level="warn"/>
    <Root level="info"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
EOF
}

new_cluster_id() {
  # A Kafka Uuid: 16 random bytes, URL-safe base64 without padding; not
  # starting with '-', which a command line would take for a flag.
  local id
  for _ in 1 2 3 4 5 6 7 8; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" != -* ]] && { echo "$id"; return; }
  done
  die "could not make a cluster id"
}

format_nodes() {
  local i nd pids=() rc=0
  for ((i = 0; i < nodes; i++)); do
    nd="$(node_dir "$i")"
    rm -rf "$nd/data"
    java "${JVM_FLAGS[@]}" -Xms64m -cp "$LIBS/*" -Dlog4j2.configurationFile="$dir/log4j2.xml" \
      -Dkafka.logs.dir="$nd" kafka.tools.StorageTool format \
      --config "$nd/server.properties" --cluster-id "$cluster_id" >"$nd/format.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < nodes; i++)); do
    if ! wait "${pids[i]}"; then
      say "formatting node $((i + 1)) failed:"
      tail -n 20 "$(node_dir "$i")/format.log" >&2
      rc=1
    fi
  done
  return $rc
}

start_nodes() {
  local i nd
  for ((i = 0; i < nodes; i++)); do
    nd="$(node_dir "$i")"
    : >"$nd/server.log"
    # setpriv execs java in this background job: $! is the JVM's pid, and
    # the JVM gets SIGKILL when this script dies.
    setpriv --pdeathsig KILL -- java "${JVM_FLAGS[@]}" -cp "$LIBS/*" \
      -Dlog4j2.configurationFile="$dir/log4j2.xml" -Dkafka.logs.dir="$nd" \
      kafka.Kafka "$nd/server.properties" >"$nd/stdout.log" 2>&1 &
    node_pid[i]=$!
  done
}

alive() { kill -0 "$1" 2>/dev/null; }

# Stops every node: SIGTERM (a controlled shutdown), then SIGKILL after
# STOP_TIMEOUT seconds.
stop_nodes() {
  local i pid deadline=$((SECONDS + STOP_TIMEOUT)) left
  for pid in "${node_pid[@]}"; do alive "$pid" && kill -TERM "$pid" 2>/dev/null || true; done
  while ((SECONDS < deadline)); do
    left=0
    for pid in "${node_pid[@]}"; do alive "$pid" && left=1; done
    ((left == 0)) && break
    sleep 0.2
  done
  for ((i = 0; i < ${#node_pid[@]}; i++)); do
    if alive "${node_pid[i]}"; then
      say "node $((i + 1)) did not stop within ${STOP_TIMEOUT}s: SIGKILL"
      kill -KILL "${node_pid[i]}" 2>/dev/null || true
    fi
  done
  for pid in "${node_pid[@]}"; do wait "$pid" 2>/dev/null || true; done
  node_pid=()
}

show_log() {  # show_log INDEX
  local nd
  nd="$(node_dir "$1")"
  say "---- tail of $nd/server.log ----"
  tail -n 30 "$nd/server.log" >&2 || true
  tail -n 10 "$nd/stdout.log" >&2 || true
}

# Waits until every node logs that it serves. Returns 0 when all do, 2 when a
# node failed to bind a port (worth another try on other ports), 1 otherwise.
await_nodes() {
  local deadline=$((SECONDS + START_TIMEOUT)) i ready nd
  while ((SECONDS < deadline && stopping == 0)); do
    ready=0
    for ((i = 0; i < nodes; i++)); do
      nd="$(node_dir "$i")"
      if grep -q 'Kafka Server started' "$nd/server.log" 2>/dev/null; then
        ready=$((ready + 1))
      elif ! alive "${node_pid[i]}"; then
        if grep -q -E 'BindException|Address already in use' "$nd/server.log" "$nd/stdout.log" 2>/dev/null; then
          say "node $((i + 1)) could not bind its ports"
          return 2
        fi
        say "node $((i + 1)) exited during start-up"
        show_log "$i"
        return 1
      fi
    done
    ((ready == nodes)) && return 0
    sleep 0.2
  done
  ((stopping)) && return 1
  say "the nodes did not all start within ${START_TIMEOUT}s"
  for ((i = 0; i < nodes; i++)); do show_log "$i"; done
  return 1
}

stopping=0
watcher_pid=""
on_signal() { stopping=1; }
on_exit() {
  stop_nodes
  [[ -z "$watcher_pid" ]] || kill "$watcher_pid" 2>/dev/null || true
}

node_id=""
parse_args() {  # the options of run, prepare and node
  while (($# > 0)); do
    case "$1" in
      --nodes) nodes="${2:?--nodes needs a number}"; shift 2 ;;
      --dir) dir="${2:?--dir needs a directory}"; shift 2 ;;
      --owner-pid) owner_pid="${2:?--owner-pid needs a pid}"; shift 2 ;;
      --id) node_id="${2:?--id needs a node id}"; shift 2 ;;
      -h | --help) usage ;;
      *) say "unknown argument '$1'"; usage ;;
    esac
  done
  [[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "--nodes must be a number from 1 to 99"
  [[ -n "$dir" ]] || die "--dir is required"
  command -v setpriv >/dev/null 2>&1 || die "setpriv (util-linux) is missing"
  fetch >/dev/null
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
}

print_nodes() {
  local bootstrap="" i
  for ((i = 0; i < nodes; i++)); do bootstrap+="${bootstrap:+,}127.0.0.1:${broker_port[i]}"; done
  echo "bootstrap: $bootstrap"
  for ((i = 0; i < nodes; i++)); do
    echo "node $((i + 1))${node_pid[i]:+ pid ${node_pid[i]}} port ${broker_port[i]}"
  done
}

prepare() {
  parse_args "$@"
  write_log4j
  cluster_id="$(new_cluster_id)"
  pick_ports
  write_configs
  format_nodes || exit 1
  print_nodes
}

node() {
  parse_args "$@"
  [[ "$node_id" =~ ^[1-9][0-9]?$ ]] || die "--id must be a node id"
  local nd="$dir/node-$node_id"
  [[ -f "$nd/server.properties" && -d "$nd/data" ]] || die "no prepared node $node_id in $dir"
  # Replaces this shell: the caller's child is the JVM itself.
  exec setpriv --pdeathsig KILL -- java "${JVM_FLAGS[@]}" -cp "$LIBS/*" \
    -Dlog4j2.configurationFile="$dir/log4j2.xml" -Dkafka.logs.dir="$nd" \
    kafka.Kafka "$nd/server.properties"
}

run() {
  parse_args "$@"
  write_log4j
  cluster_id="$(new_cluster_id)"

  trap on_signal TERM INT
  trap on_exit EXIT

  local attempt rc=1 started=$SECONDS i
  for ((attempt = 1; attempt <= BIND_ATTEMPTS; attempt++)); do
    pick_ports
    write_configs
    format_nodes || exit 1
    start_nodes
    rc=0
    await_nodes || rc=$?
    ((rc == 0)) && break
    stop_nodes
    ((rc == 2)) || exit 1
    ((stopping)) && exit 1
    say "trying other ports (attempt $((attempt + 1)) of $BIND_ATTEMPTS)"
  done
  ((rc == 0)) || die "no free ports after $BIND_ATTEMPTS attempts"
  ((stopping)) && exit 0
  say "$nodes node(s) serving after $((SECONDS - started))s"

  print_nodes

  # The owner's end stops the nodes like a SIGTERM: tail --pid returns when
  # that process exits.
  local watch=()
  if [[ -n "$owner_pid" ]]; then
    tail --pid="$owner_pid" -f /dev/null </dev/null >/dev/null 2>&1 &
    watcher_pid=$!
    watch=("$watcher_pid")
  fi

  # Each wait returns when a node exits, the owner exits or a signal arrives.
  local pid
  while ((stopping == 0)); do
    wait -n "${node_pid[@]}" "${watch[@]}" 2>/dev/null || true
    ((stopping)) && break
    if [[ -n "$watcher_pid" ]] && ! alive "$watcher_pid"; then
      say "owner pid $owner_pid exited"
      break
    fi
    for ((i = 0; i < nodes; i++)); do
      pid=${node_pid[i]}
      if ! alive "$pid"; then
        say "node $((i + 1)) (pid $pid) exited on its own; stopping the others"
        show_log "$i"
        exit 1
      fi
    done
  done
  say "stopping"
  stop_nodes
  say "stopped"
  exit 0
}

case "${1:-}" in
  fetch) shift; (($# == 0)) || usage; fetch ;;
  run) shift; run "$@" ;;
  prepare) shift; prepare "$@" ;;
  node) shift; node "$@" ;;
  *) usage ;;
esac
