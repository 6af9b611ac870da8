#!/usr/bin/env bash
# Builds retryd (scripts/setup.sh) and runs it in demo mode: a synthetic load
# of ok-, flaky- and perm- keys through deploy/examples/demo.textproto (or
# another config), on the embedded broker unless told otherwise.
#
#   scripts/demo.sh [--config FILE] [--kafka] [--rate N] [-- RETRYD_FLAG...]
#
#   --config FILE  the config to run, e.g. deploy/examples/grpc-demo.textproto
#                  (with the example downstream of scripts/example.sh)
#   --kafka        on a local real Apache Kafka instead of the embedded broker:
#                  one KRaft node on loopback (scripts/kafka.sh, fetched on
#                  first use), the config's topics created on it, stopped when
#                  the demo ends
#   --rate N       demo records per second (default: retryd's, 200)
#   -h, --help     this text
#   --             everything after it goes to retryd as it is
#
# Ctrl-C stops retryd (it prints its last summary) and, with --kafka, the
# broker. Environment: BUILD_DIR (default: <repo>/build), as for setup.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR

say() { printf 'demo.sh: %s\n' "$*" >&2; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit "${1:-2}"; }

config="$ROOT/deploy/examples/demo.textproto"
kafka=0
retryd_args=()
while (($# > 0)); do
  case "$1" in
    --config)
      (($# >= 2)) || { say "--config needs a file"; usage; }
      config="$2"
      shift 2
      ;;
    --config=*) config="${1#--config=}"; shift ;;
    --kafka) kafka=1; shift ;;
    --rate)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || { say "--rate needs a number of records per second"; usage; }
      retryd_args+=(--demo_rate "$2")
      shift 2
      ;;
    -h | --help) usage 0 ;;
    --) shift; retryd_args+=("$@"); break ;;
    *) say "unknown argument '$1' (retryd's own flags go after --)"; usage ;;
  esac
done
[[ -r "$config" ]] || { say "cannot read the config '$config'"; exit 2; }

bash "$ROOT/scripts/setup.sh"

if ((kafka == 0)); then
  exec "$BUILD_DIR/retryd" --config "$config" --demo "${retryd_args[@]}"
fi

# ---- on a real broker ------------------------------------------------------------
# shellcheck source=scripts/local_kafka.sh
source "$ROOT/scripts/local_kafka.sh"
dir="$(mktemp -d)"
trap 'stop_local_kafka; rm -rf "$dir"' EXIT
start_local_kafka "$dir" || exit 1
bootstrap="$LOCAL_KAFKA_BOOTSTRAP"
say "Kafka 4.1 at $bootstrap (stopped when the demo ends)"

# The topics the config names, three partitions each (the embedded broker's
# default), with Debian's kafka-python.
/usr/bin/python3 - "$bootstrap" "$config" <<'EOF'
import re
import sys

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

bootstrap, config = sys.argv[1], sys.argv[2]
text = re.sub(r"#[^\n]*", "", open(config).read())
names = re.findall(r'\b(?:input_topics|output_topic|topic|dead_letter_topic)\s*:\s*"([^"]+)"', text)
admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=(2, 5, 0))
for name in dict.fromkeys(names):
    try:
        admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])
        print(f"demo.sh: created topic {name}", file=sys.stderr)
    except TopicAlreadyExistsError:
        pass
admin.close()
EOF

"$BUILD_DIR/retryd" --config "$config" --bootstrap_servers "$bootstrap" --demo \
  "${retryd_args[@]}" || say "retryd exited with status $?"
