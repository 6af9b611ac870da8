#!/usr/bin/python3
"""Independent checker of a soak run: reads the topics with kafka-python only.

It knows nothing of retryd's code. It is given a manifest of the records that
were produced, one per line:

    KEY<TAB>WHERE<TAB>VALUE      WHERE is "output" or "dlq"

reads the output and dead-letter topics in full, and checks that

  * every key of the manifest is in the topic it belongs in, with its value
    byte for byte (a key missing there is LOST);
  * no key is in the other topic, and no unknown key is anywhere;
  * no partition of any topic named by --topic has a log start offset above
    0: librdkafka's mock cluster keeps a bounded log per partition and drops
    the oldest records silently, which would hide a loss.

Copies beyond the first of a key are duplicates: allowed (delivery is
at-least-once) but counted and reported. Prints a summary table; exits 0 if
every check passes, 1 if any fails, 2 if the topics cannot be read.
"""

import argparse
import collections
import sys
import time

from kafka import KafkaConsumer, TopicPartition

# The mock's bound on one partition's log (rdkafka_mock.c: max_size).
MOCK_PARTITION_BYTES = 5 * 1024 * 1024
# Shown per kind of failure before "... and N more".
SHOW = 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    p.add_argument("--manifest", required=True, help="file of KEY<TAB>output|dlq<TAB>VALUE lines")
    p.add_argument("--output", required=True, help="output topic")
    p.add_argument("--dlq", required=True, help="dead-letter topic")
    p.add_argument("--topic", action="append", default=[],
                   help="a further topic whose log start offsets must be 0 (repeatable)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds allowed for reading the topics (default 120)")
    p.add_argument("--kills", default="-", help="kills made by the driver, for the summary")
    p.add_argument("--elapsed", default="-", help="the run's seconds so far, for the summary")
    return p.parse_args()


def read_manifest(path):
    expected = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            fields = line.rstrip(b"\n").split(b"\t")
            if len(fields) != 3 or fields[1] not in (b"output", b"dlq"):
                raise SystemExit(f"check: {path}:{n}: expected KEY<TAB>output|dlq<TAB>VALUE")
            if fields[0] in expected:
                raise SystemExit(f"check: {path}:{n}: key {fields[0]!r} appears twice")
            expected[fields[0]] = (fields[1].decode(), fields[2])
    return expected


def partitions_of(consumer, topic, deadline):
    while True:
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return [TopicPartition(topic, p) for p in sorted(parts)]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no metadata for topic {topic}")
        consumer.poll(timeout_ms=200)  # Lets the client fetch metadata.


def read_topic(consumer, tps, deadline):
    """Every record of `tps` up to their current end offsets, and per
    partition the approximate bytes the log holds."""
    end = consumer.end_offsets(tps)
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    records = []
    log_bytes = collections.Counter()
    remaining = {tp for tp in tps if end[tp] > 0}
    while remaining:
        if time.monotonic() > deadline:
            left = {f"{tp.topic}/{tp.partition}": end[tp] - consumer.position(tp)
                    for tp in remaining}
            raise TimeoutError(f"reading stopped short of the end: {left}")
        for tp, batch in consumer.poll(timeout_ms=500, max_records=10000).items():
            for r in batch:
                if r.offset < end[tp]:
                    records.append(r)
                    # Key, value, headers and a record's framing: close to
                    # what the mock counts against its bound.
                    log_bytes[tp] += (len(r.key or b"") + len(r.value or b"") + 20 +
                                      sum(len(k) + len(v or b"") + 2 for k, v in r.headers))
        for tp in list(remaining):
            if consumer.position(tp) >= end[tp]:
                remaining.discard(tp)
    return records, log_bytes


def first(items):
    items = sorted(items)
    text = ", ".join(x.decode(errors="replace") if isinstance(x, bytes) else str(x)
                     for x in items[:SHOW])
    return text + (f" ... and {len(items) - SHOW} more" if len(items) > SHOW else "")


def main():
    args = parse_args()
    expected = read_manifest(args.manifest)
    deadline = time.monotonic() + args.timeout
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, enable_auto_commit=False,
                             group_id=None, client_id="soak-checker",
                             # Its version probe's 2 s default is short on busy cores.
                             api_version_auto_timeout_ms=30000)
    try:
        topics = list(dict.fromkeys([args.output, args.dlq] + args.topic))
        tps = {t: partitions_of(consumer, t, deadline) for t in topics}
        every_tp = [tp for t in topics for tp in tps[t]]
        start = consumer.beginning_offsets(every_tp)
        ends = consumer.end_offsets(every_tp)
        copies = {}  # "output"/"dlq" -> Counter of keys
        bad_value = set()
        all_bytes = collections.Counter()
        for topic in topics:
            records, log_bytes = read_topic(consumer, tps[topic], deadline)
            all_bytes.update(log_bytes)
            where = {args.output: "output", args.dlq: "dlq"}.get(topic)
            if where is None:
                continue  # Read only for the size of its log.
            copies[where] = collections.Counter(r.key for r in records)
            for r in records:
                want = expected.get(r.key)
                if want is not None and r.value != want[1]:
                    bad_value.add(r.key)
    except Exception as e:  # The topics could not be read: no verdict.
        print(f"check: cannot read the topics: {e}", file=sys.stderr)
        return 2
    finally:
        consumer.close()

    lost, misplaced = set(), set()
    for key, (where, _) in expected.items():
        if copies[where][key] == 0:
            lost.add(key)
        other = "dlq" if where == "output" else "output"
        if copies[other][key] > 0:
            misplaced.add(key)
    unknown = (set(copies["output"]) | set(copies["dlq"])) - set(expected)
    per_key = copies["output"] + copies["dlq"]
    dup_keys = sum(1 for k in expected if per_key[k] > 1)
    extra_copies = sum(per_key[k] - 1 for k in expected if per_key[k] > 1)
    most_copied = max(expected, key=lambda k: per_key[k], default=None)
    moved = {tp: off for tp, off in start.items() if off > 0}
    fullest = max(all_bytes.items(), key=lambda kv: kv[1], default=None)

    want_out = sum(1 for w, _ in expected.values() if w == "output")
    rows = [
        ("produced",
         f"{len(expected)} ({want_out} for output, {len(expected) - want_out} for dlq)"),
        ("output records", f"{sum(copies['output'].values())} ({len(copies['output'])} keys)"),
        ("dlq records", f"{sum(copies['dlq'].values())} ({len(copies['dlq'])} keys)"),
        ("lost", len(lost)),
        ("misplaced", len(misplaced)),
        ("unknown keys", len(unknown)),
        ("changed values", len(bad_value)),
        ("duplicate keys", f"{dup_keys} ({extra_copies} extra copies)"),
        ("max copies", "-" if most_copied is None else
         f"{per_key[most_copied]} ({most_copied.decode(errors='replace')})"),
        ("log start > 0", len(moved)),
        ("fullest log", "-" if fullest is None else
         f"{fullest[0].topic}/{fullest[0].partition} ~{fullest[1] / 2**20:.1f} MiB of "
         f"{MOCK_PARTITION_BYTES / 2**20:.0f}"),
        ("kills", args.kills),
        ("elapsed", f"{args.elapsed} s" if args.elapsed != "-" else "-"),
    ]
    print("soak summary")
    for name, value in rows:
        print(f"  {name:<16} {value}")

    failures = []
    if lost:
        failures.append(f"LOST {len(lost)} keys (not in the topic they belong in): {first(lost)}")
    if misplaced:
        failures.append(f"MISPLACED {len(misplaced)} keys (in the wrong topic): {first(misplaced)}")
    if unknown:
        failures.append(f"UNKNOWN {len(unknown)} keys (never produced): {first(unknown)}")
    if bad_value:
        failures.append(f"CHANGED VALUE for {len(bad_value)} keys: {first(bad_value)}")
    if moved:
        failures.append("LOG START moved (the mock dropped records; make the run fit its "
                        "5 MiB per partition): " +
                        ", ".join(f"{tp.topic}/{tp.partition} starts at {off} of {ends[tp]}"
                                  for tp, off in sorted(moved.items())))
    for f in failures:
        print(f"check: FAIL: {f}")
    print("check: PASS" if not failures else "check: FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
