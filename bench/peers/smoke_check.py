#!/usr/bin/python3
"""Topics, input and verdict for bench/peers/smoke.sh (Debian's kafka-python).

  smoke_check.py setup BOOTSTRAP IN OUT DLQ N
      creates IN, OUT and DLQ (16 partitions each) and produces N records each
      with keys ok-i, flaky-i and perm-i (value v-<key>)
  smoke_check.py wait BOOTSTRAP OUT DLQ N --pid PID --timeout S [--processed-by NAME]
      reads OUT and DLQ from the start until every ok- and flaky- key is in
      OUT and every perm- key in DLQ, the app PID has exited, or S seconds
      have passed; prints the counts; exit 0 only if all outcomes are in and
      none is in the wrong place, and every value is as expected: the input's,
      or with --processed-by, upper-cased in OUT and with one header,
      processed-by: NAME (the example downstream's answer; the input has none)
"""
import argparse
import collections
import os
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

CLIENT = {"api_version_auto_timeout_ms": 30000}
KINDS = ("ok", "flaky", "perm")


def keys(n, kind):
    return [f"{kind}-{i}".encode() for i in range(n)]


def setup(a):
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, client_id="smoke-admin", **CLIENT)
    # The DLQ has as many partitions as the input: Spring Kafka's dead-letter
    # publisher writes to the partition the failed record came from.
    for name, parts in ((a.input, 16), (a.output, 16), (a.dlq, 16)):
        try:
            admin.create_topics([NewTopic(name, num_partitions=parts, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass
    admin.close()
    # Retries: a partition of a topic just created may have no leader yet.
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, acks="all", retries=10,
                             retry_backoff_ms=200, **CLIENT)
    sends = []
    for i in range(a.n):  # Interleaved, so every kind is spread over the run.
        for kind in KINDS:
            key = f"{kind}-{i}".encode()
            sends.append(producer.send(a.input, key=key, value=b"v-" + key))
    producer.flush(timeout=60)
    for send in sends:
        send.get(timeout=60)  # Raises if the record was not written.
    producer.close()
    print(f"smoke: produced {len(sends)} records to {a.input}")
    return 0


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by the script) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def wait(a):
    deadline = time.monotonic() + a.timeout
    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, enable_auto_commit=False,
                             group_id=None, client_id="smoke-checker", **CLIENT)
    tps = []
    for topic in (a.output, a.dlq):
        while True:  # Metadata of a topic the setup created: bounded.
            parts = consumer.partitions_for_topic(topic)
            if parts:
                break
            if time.monotonic() > deadline:
                print(f"smoke: no metadata for {topic}", file=sys.stderr)
                return 2
            consumer.poll(timeout_ms=200)
        tps += [TopicPartition(topic, p) for p in sorted(parts)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)

    want_out = set(keys(a.n, "ok") + keys(a.n, "flaky"))
    want_dlq = set(keys(a.n, "perm"))
    seen = {a.output: collections.Counter(), a.dlq: collections.Counter()}
    bad_values = 0
    answered = a.processed_by is not None
    processed = [("processed-by", (a.processed_by or "").encode())]
    why = "timed out"
    while True:
        for tp, records in consumer.poll(timeout_ms=250).items():
            for r in records:
                seen[tp.topic][r.key] += 1
                value = b"v-" + (r.key or b"")
                if answered and tp.topic == a.output:
                    if r.value != value.upper() or list(r.headers) != processed:
                        bad_values += 1
                elif r.value != value:
                    bad_values += 1
        if want_out <= seen[a.output].keys() and want_dlq <= seen[a.dlq].keys():
            why = "all outcomes in"
            break
        if not alive(a.pid):
            why = "the app exited"
            break
        if time.monotonic() > deadline:
            break
    consumer.close()

    out, dlq = seen[a.output], seen[a.dlq]
    ok = True
    print(f"smoke: {a.label}: {why}")
    for kind in KINDS:
        ks = keys(a.n, kind)
        where, other = (out, dlq) if kind != "perm" else (dlq, out)
        present = sum(1 for k in ks if where[k])
        copies = sum(where[k] for k in ks)
        strays = sum(other[k] for k in ks)
        print(f"  {kind}-: {present}/{a.n} keys in {'output' if kind != 'perm' else 'dlq'}, "
              f"{copies} records ({copies - present} duplicates), {strays} in the wrong topic")
        ok = ok and present == a.n and strays == 0
    if bad_values:
        print(f"  {bad_values} records whose value or headers are not as expected")
        ok = False
    print(f"smoke: {a.label}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("bootstrap"); s.add_argument("input"); s.add_argument("output")
    s.add_argument("dlq"); s.add_argument("n", type=int)
    w = sub.add_parser("wait")
    w.add_argument("bootstrap"); w.add_argument("output"); w.add_argument("dlq")
    w.add_argument("n", type=int)
    w.add_argument("--pid", type=int, required=True)
    w.add_argument("--timeout", type=float, default=180)
    w.add_argument("--label", default="app")
    w.add_argument("--processed-by", help="expect the example downstream's answers in OUT")
    a = p.parse_args()
    return setup(a) if a.cmd == "setup" else wait(a)


if __name__ == "__main__":
    sys.exit(main())
