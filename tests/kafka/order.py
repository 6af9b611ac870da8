#!/usr/bin/python3
"""Key order and partition order on a real Kafka, through a rebalance and a
kill, judged from outside with kafka-python.

Records share a few dozen keys (some keys flaky: each of their records fails
twice, then succeeds) and carry a sequence number per key. Instance A runs
in --ordering KEY (one retry thread) or IN_ORDER (none); while records flow,
B joins both groups (a rebalance), then A is SIGKILLed (a kill); B finishes.
The output topic has one partition, so its log is the order in which
outcomes were written. Judged on the first occurrence of each input record
(by retryd-original-partition/-offset), since a kill repeats some:

  * KEY: per key, first occurrences in input offset order;
  * IN_ORDER: per input partition, first occurrences in offset order;
  * every record in the output: 0 lost.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import argparse
import collections
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402

PARTITIONS = 4


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--ordering", choices=["KEY", "IN_ORDER"], required=True)
    p.add_argument("--records", type=int, default=3000, help="records to produce (3000)")
    p.add_argument("--keys", type=int, default=40, help="keys they share (40)")
    p.add_argument("--produce-seconds", type=float, default=12.0,
                   help="spread producing over this long (12 s)")
    p.add_argument("--finish-timeout", type=float, default=120.0,
                   help="seconds allowed for the groups to commit everything (120)")
    return p


def out_of_order(sequence):
    """Indexes i where sequence[i] is below sequence[i - 1]."""
    return [i for i in range(1, len(sequence)) if sequence[i] < sequence[i - 1]]


def run(args, work, say):
    cluster = real_kafka.Cluster()
    rng = random.Random(args.seed)
    key_order = args.ordering == "KEY"
    say(f"cluster {cluster.bootstrap} ({cluster.source}); ordering {args.ordering}, "
        f"{args.records} records over {args.keys} keys, {PARTITIONS} input partitions")
    names = real_kafka.TestNames(cluster, f"order-{args.ordering.lower()}",
                                 ["input", "retry", "output", "dlq"], PARTITIONS, groups=["g"],
                                 partitions_of={"output": 1})
    with names:
        # A few flaky keys: in order, each of their records holds its
        # partition for two backoffs.
        records = real_kafka.make_records(args.records, rng, flaky=0.08, keys=args.keys)
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work,
                                 f"ordering: ORDERING_{args.ordering}\n" +
                                 real_kafka.simulate_body(names, args.seed, 1 if key_order else 0,
                                                          5, 100))
        a = real_kafka.Retryd(args.retryd, config, work, "a")
        b = real_kafka.Retryd(args.retryd, config, work, "b")
        pairs = [(names.group["g"], names.topic["input"], PARTITIONS)]
        if key_order:
            pairs.append((names.group["g"] + ".retry", names.topic["retry"], PARTITIONS))
        groups = real_kafka.Groups(cluster, pairs)
        producer = real_kafka.PacedProducer(cluster, names.topic["input"], records,
                                            args.produce_seconds)
        began = time.monotonic()
        live = [a]

        def check():
            for r in live:
                r.check()

        def pause(seconds, what):
            real_kafka.pause(seconds, what, check)

        try:
            a.start()
            producer.start()
            a.wait_assigned(check=check)
            pause(2.0, "records flowing through A")
            b.start()
            live.append(b)
            b.wait_assigned(check=check)
            pause(rng.uniform(1.0, 3.0), "records flowing through A and B")
            a.kill()
            live.remove(a)
            say(f"B joined, then A was SIGKILLed {time.monotonic() - a.started_at:.1f} s into "
                f"its run; {groups.describe()}")
            producer.finish(args.produce_seconds + 120)
            groups.wait_done(args.finish_timeout, check=b.check)
            say(f"groups done {time.monotonic() - began:.1f} s in: {groups.describe()}")
            b.stop_gracefully()
        finally:
            producer.stopping.set()
            a.cleanup()
            b.cleanup()
            groups.close()

        verdict = real_kafka.Verdict(cluster, names, records)
        failures = verdict.failures
        # First occurrences in the output's log order (one partition).
        first = []
        seen = set()
        output = sorted((c for cs in verdict.copies.values() for c in cs if c.where == "output"),
                        key=lambda c: c.offset)
        for c in output:
            coord = (int(dict(c.record.headers)["retryd-original-partition"]),
                     int(dict(c.record.headers)["retryd-original-offset"]))
            if coord not in seen:
                seen.add(coord)
                first.append(coord)
        by = collections.defaultdict(list)
        for coord in first:
            group = verdict.inputs[coord].key if key_order else coord[0]
            by[group].append(coord[1])
        broken = {g: out_of_order(offsets) for g, offsets in by.items()}
        broken = {g: idx for g, idx in broken.items() if idx}
        if broken:
            g, idx = next(iter(broken.items()))
            failures.append(f"ORDER broken for {len(broken)} {'keys' if key_order else 'partitions'}"
                            f", e.g. {g!r}: offset {by[g][idx[0]]} after {by[g][idx[0] - 1]}")
        say(f"summary: {len(verdict.inputs)} records; lost {len(verdict.lost)}; duplicates "
            f"{verdict.duplicates} ({verdict.extra} extra copies, after the kill); "
            f"{len(by)} {'keys' if key_order else 'partitions'} checked, {len(broken)} out of "
            f"order; {time.monotonic() - began:.1f} s")
        status = real_kafka.verdict_status(say, failures)
    cluster.close()
    return status


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-order", parse_args(), run))
