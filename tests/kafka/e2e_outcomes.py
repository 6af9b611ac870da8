#!/usr/bin/python3
"""The built retryd on a real Kafka, every outcome judged from outside.

Produces records of each kind to a fresh input topic -- healthy, flaky (fail
twice, then succeed), permanently failing, failing until their attempts run
out -- among them null keys, null values, empty values, binary values and
headers (some names twice), and runs retryd (one retry thread, 3 attempts)
over it until both of its groups have committed everything. Stops it with
SIGTERM, then reads the input, output, retry and dead-letter topics with
kafka-python (nothing of retryd's code) and checks, for every input record,
by its original (partition, offset):

  * it reached exactly one outcome, the one its kind calls for: no record
    lost, none in both the output and the DLQ, none twice (no rebalance and
    no fault here, so 0 duplicates);
  * key, value and original headers byte for byte, nulls kept as nulls;
  * retryd's headers: retryd-attempt (1 or 3 in the output, the attempts
    made in the DLQ), retryd-original-topic/-partition/-offset naming it,
    retryd-original-timestamp-ms its timestamp, retryd-error on every retry
    and DLQ record, and on the retry topic one record per retry with
    retryd-attempt 2, then 3, due no earlier than its first failure;
  * retryd exits 0 on SIGTERM, and both groups committed up to the ends.

Topics and groups are unique to the run and deleted at the end. Exit status 0
if every check passes, 1 otherwise; 77 (ctest: skipped) when there is no
cluster to run against.
"""

import argparse
import collections
import os
import random
import shutil
import signal
import sys
import tempfile
import time

from kafka import TopicPartition
from kafka.errors import KafkaError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402

PARTITIONS = 3
MAX_ATTEMPTS = 3
RETRYD_HEADER = "retryd-"


def say(*parts):
    print("e2e:", *parts, flush=True)


def make_records(rng, per_kind):
    """(key, value, headers, kind) for every record to produce. kind is what
    the simulate processor does with it (the config's rules go by key prefix;
    a null key matches none and succeeds)."""
    records = []
    for kind in ("ok", "flaky", "perm", "exh"):
        for i in range(per_kind):
            value = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            headers = [("trace", f"{kind}-{i}".encode())]
            if i % 5 == 0:
                headers += [("dup", b"first"), ("dup", b"\x00\xff second")]
            records.append((f"{kind}-{i:04d}".encode(), value, headers, kind))
        # Null and empty values of every kind, with and without headers.
        records.append((f"{kind}-nullvalue".encode(), None, [], kind))
        records.append((f"{kind}-emptyvalue".encode(), b"", [("h", b"")], kind))
        records.append((f"{kind}-nullvalue-h".encode(), None, [("only", b"header")], kind))
    for i in range(per_kind // 2):  # null keys: no rule matches, so they succeed
        records.append((None, f"null-key-{i}".encode(), [("k", b"none")], "ok"))
    rng.shuffle(records)
    return records


def write_config(path, cluster, names, work):
    real_kafka.retryd_config(path, cluster, names, work, f"""commit_interval_ms: 200
retry {{
  topic: "{names.topic['retry']}"
  threads: 1
  max_attempts: {MAX_ATTEMPTS}
  seed: 42
  backoff {{ initial_ms: 20 multiplier: 2.0 max_ms: 200 }}
}}
processor {{
  simulate {{
    seed: 7
    rule {{ key_prefix: "flaky-" fail_attempts: 2 }}
    rule {{ key_prefix: "perm-" permanent: true }}
    rule {{ key_prefix: "exh-" fail_attempts: 1000 }}
  }}
}}""")


def committed_to_end(cluster, reader, group, topic):
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    committed = cluster.admin.list_consumer_group_offsets(group, partitions=tps)
    ends = reader.end_offsets(tps)
    return all(ends[tp] == 0 or (tp in committed and committed[tp].offset == ends[tp])
               for tp in tps), committed, ends


def finished(cluster, reader, names, produced):
    """Whether both groups committed up to the ends of their topics and every
    record has an outcome."""
    group = names.group["g"]
    if not committed_to_end(cluster, reader, group, names.topic["input"])[0]:
        return False
    if not committed_to_end(cluster, reader, group + ".retry", names.topic["retry"])[0]:
        return False
    outcomes = sum(sum(reader.end_offsets([TopicPartition(names.topic[t], p)
                                           for p in range(PARTITIONS)]).values())
                   for t in ("output", "dlq"))
    return outcomes >= produced


def headers_of(record):
    original = [(k, v) for k, v in record.headers if not k.startswith(RETRYD_HEADER)]
    ours = collections.defaultdict(list)
    for k, v in record.headers:
        if k.startswith(RETRYD_HEADER):
            ours[k].append(v)
    return original, ours


class Checker:
    def __init__(self):
        self.failures = []

    def fail(self, message):
        self.failures.append(message)

    def expect(self, condition, message):
        if not condition:
            self.fail(message)

    def one(self, ours, name, where):
        values = ours.get(name, [])
        if len(values) != 1:
            self.fail(f"{where}: header {name} appears {len(values)} times")
            return None
        return values[0]


def check(cluster, names, produced, sent_kind):
    """All the checks; returns the list of failures and a summary line."""
    c = Checker()
    reader = cluster.consumer()
    try:
        topic = names.topic
        inputs = real_kafka.read_topic(reader, topic["input"], PARTITIONS, 60)
        output = real_kafka.read_topic(reader, topic["output"], PARTITIONS, 60)
        retry = real_kafka.read_topic(reader, topic["retry"], PARTITIONS, 60)
        dlq = real_kafka.read_topic(reader, topic["dlq"], PARTITIONS, 60)
    finally:
        reader.close()
    c.expect(len(inputs) == produced, f"input topic holds {len(inputs)} records, "
                                      f"{produced} were produced")
    by_coord = {(r.partition, r.offset): r for r in inputs}
    kind_of = {}
    for r in inputs:
        kind_of[(r.partition, r.offset)] = sent_kind[(r.key, r.value)]

    def origin(record, where):
        original, ours = headers_of(record)
        t = c.one(ours, "retryd-original-topic", where)
        p = c.one(ours, "retryd-original-partition", where)
        o = c.one(ours, "retryd-original-offset", where)
        if t is None or p is None or o is None:
            return None, original, ours
        c.expect(t == topic["input"].encode(), f"{where}: retryd-original-topic {t!r}")
        coord = (int(p), int(o))
        if coord not in by_coord:
            c.fail(f"{where}: names input {coord}, which does not exist")
            return None, original, ours
        src = by_coord[coord]
        c.expect(record.key == src.key, f"{where}: key {record.key!r}, input had {src.key!r}")
        c.expect(record.value == src.value,
                 f"{where}: value {record.value!r}, input had {src.value!r}")
        c.expect(original == list(src.headers),
                 f"{where}: original headers {original}, input had {src.headers}")
        return coord, original, ours

    outcomes = collections.defaultdict(list)  # coord -> ["output"/"dlq", ...]
    # The attempt each kind's record carries at its outcome.
    final_attempt = {"ok": b"1", "flaky": b"3", "perm": b"1", "exh": str(MAX_ATTEMPTS).encode()}

    def outcome(record, where_to):
        """The input coordinates of an output or DLQ record, checked so far."""
        where = f"{where_to} {record.partition}/{record.offset}"
        coord, _, ours = origin(record, where)
        if coord is None:
            return None, ours, where
        outcomes[coord].append(where_to)
        attempt = c.one(ours, "retryd-attempt", where)
        c.expect(attempt == final_attempt[kind_of[coord]],
                 f"{where}: a {kind_of[coord]} record with retryd-attempt {attempt!r}")
        return coord, ours, where

    for r in output:
        outcome(r, "output")
    for r in dlq:
        coord, ours, where = outcome(r, "dlq")
        if coord is None:
            continue
        error = c.one(ours, "retryd-error", where)
        c.expect(bool(error), f"{where}: empty retryd-error")
        ts = c.one(ours, "retryd-original-timestamp-ms", where)
        c.expect(ts == str(by_coord[coord].timestamp).encode(),
                 f"{where}: retryd-original-timestamp-ms {ts!r}, input's is "
                 f"{by_coord[coord].timestamp}")
        c.expect(c.one(ours, "retryd-first-failure-ms", where) is not None, where)
    retries = collections.defaultdict(list)  # coord -> attempts on the retry topic
    for r in retry:
        where = f"retry {r.partition}/{r.offset}"
        coord, _, ours = origin(r, where)
        if coord is None:
            continue
        attempt = c.one(ours, "retryd-attempt", where)
        due = c.one(ours, "retryd-due-ms", where)
        first = c.one(ours, "retryd-first-failure-ms", where)
        c.expect(bool(c.one(ours, "retryd-error", where)), f"{where}: empty retryd-error")
        if due is not None and first is not None:
            c.expect(int(due) >= int(first), f"{where}: due {due!r} before first failure {first!r}")
        if attempt is not None:
            retries[coord].append(int(attempt))

    want_outcome = {"ok": "output", "flaky": "output", "perm": "dlq", "exh": "dlq"}
    want_retries = {"ok": [], "flaky": [2, 3], "perm": [], "exh": list(range(2, MAX_ATTEMPTS + 1))}
    lost = duplicates = misplaced = 0
    for coord, kind in sorted(kind_of.items()):
        got = outcomes.get(coord, [])
        if not got:
            lost += 1
            c.fail(f"LOST: input {coord} ({kind}, key {by_coord[coord].key!r}) reached no outcome")
            continue
        if len(got) > 1:
            duplicates += len(got) - 1
            c.fail(f"DUPLICATE: input {coord} ({kind}) reached {got}")
        if any(o != want_outcome[kind] for o in got):
            misplaced += 1
            c.fail(f"input {coord} ({kind}) reached {got}, expected {want_outcome[kind]}")
        attempts = sorted(retries.get(coord, []))
        c.expect(attempts == want_retries[kind],
                 f"input {coord} ({kind}): retry records with attempts {attempts}, expected "
                 f"{want_retries[kind]}")
    kinds = collections.Counter(kind_of.values())
    summary = (f"{len(inputs)} input records ({dict(kinds)}): output {len(output)}, retry "
               f"{len(retry)}, dlq {len(dlq)}; lost {lost}, duplicates {duplicates}, "
               f"misplaced {misplaced}")
    return c.failures, summary


def run(args, work):
    try:
        cluster = real_kafka.Cluster()
    except real_kafka.Unavailable as e:
        say(f"SKIPPED: {e}")
        return 77
    say(f"cluster {cluster.bootstrap} ({cluster.source}), {cluster.brokers} broker(s), "
        f"replication factor {cluster.replication_factor()}")
    rng = random.Random(args.seed)
    began = time.monotonic()
    names = real_kafka.TestNames(cluster, "e2e", ["input", "retry", "dlq", "output"], PARTITIONS,
                                 groups=["g"])
    with names:
        records = make_records(rng, args.per_kind)
        producer = cluster.producer(linger_ms=5)
        futures = [producer.send(names.topic["input"], key=k, value=v, headers=h)
                   for k, v, h, _ in records]
        producer.flush(timeout=60)
        failed = [f for f in futures if not f.succeeded()]
        producer.close(timeout=10)
        if failed:
            say(f"FAILED: {len(failed)} records not acknowledged by the broker, e.g. "
                f"{failed[0].exception!r}")
            return 1
        sent_kind = {(k, v): kind for k, v, _, kind in records}
        assert len(sent_kind) == len(records), "make_records gives each record a unique (key, value)"
        say(f"produced {len(records)} records to {names.topic['input']}")

        config = os.path.join(work, "retryd.textproto")
        write_config(config, cluster, names, work)
        log = os.path.join(work, "retryd.log")
        retryd = real_kafka.start([args.retryd, "--config", config, "--summary_interval_s", "5"],
                                  log)
        reader = cluster.consumer()
        try:
            deadline = time.monotonic() + args.timeout
            done_once = False
            while True:
                if retryd.poll() is not None:
                    say(f"FAILED: retryd exited on its own, status {retryd.returncode}:\n"
                        f"{real_kafka.tail(log)}")
                    return 1
                # Both groups at the end twice in a row, a poll apart: the
                # retry group may still be writing what it will then read.
                try:
                    done = finished(cluster, reader, names, len(records))
                except KafkaError as e:  # e.g. the group coordinator still loading
                    say(f"reading the groups' offsets: {e!r}")
                    done = False
                if done and done_once:
                    break
                done_once = done
                if time.monotonic() > deadline:
                    say(f"FAILED: HANG: the groups had not committed everything after "
                        f"{args.timeout:.0f} s\n{real_kafka.tail(log)}")
                    return 1
                time.sleep(0.5)  # Offsets in the broker: polled, nothing to wait on.
            say(f"both groups committed everything after {time.monotonic() - began:.1f} s")
        finally:
            reader.close()
            status = real_kafka.stop(retryd, signal.SIGTERM, 60)
        if status != 0:
            say(f"FAILED: retryd exited with status {status} on SIGTERM:\n{real_kafka.tail(log)}")
            return 1

        failures, summary = check(cluster, names, len(records), sent_kind)
        say(summary)
        for f in failures[:40]:
            say("  " + f)
        if len(failures) > 40:
            say(f"  ... and {len(failures) - 40} more")
        if failures:
            say(f"FAILED: {len(failures)} checks; retryd's log:\n{real_kafka.tail(log)}")
            return 1
    cluster.close()
    say(f"PASSED in {time.monotonic() - began:.1f} s")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--per-kind", type=int, default=40, help="records of each kind (40)")
    p.add_argument("--seed", type=int, default=1, help="seed of values and order (1)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds allowed for retryd to finish everything (120)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="retryd-kafka-e2e-")
    rc = 1
    try:
        rc = run(args, work)
    finally:
        if args.keep or rc not in (0, 77):
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
