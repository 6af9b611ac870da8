#!/usr/bin/python3
"""A finished producer on a three-node Kafka: retryd recovers without a
restart, nothing lost.

Starts its own cluster as broker_faults.py does (three combined nodes on
loopback, replication factor 3, min.insync.replicas=2) and runs retryd on it
with 2 retry threads and the simulate processor over make_records' kinds
(10 % flaky, 1 % poison), with the test-only flag
--testonly_producer_fatal_error_on_sigusr1. While records flow, SIGUSR1
raises a fatal error on retryd's live producer (librdkafka's
rd_kafka_test_fatal_error), --rounds times. Each time every thread must
rewind to its last commit and go on through one new producer ("rewound ...
partitions" once per thread, one more "replacement N"), retryd must keep
running, health must be SERVING again, and both groups must commit every
partition to its end. Then SIGTERM must end retryd with status 0, and every
input record must have its outcome (0 lost; duplicates reported). About
60 s on 2 busy cores. Exit status 0 passed, 1 failed.
"""

import argparse
import os
import random
import signal
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_faults  # noqa: E402
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--batch", type=int, default=1500, help="records per batch (1500)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of every topic (6)")
    p.add_argument("--rounds", type=int, default=2,
                   help="fatal errors raised, one after the other (2)")
    p.add_argument("--settle-timeout", type=float, default=120.0,
                   help="seconds for the groups to commit everything after a fault (120)")
    return p


def run(args, work, say):
    nodes = broker_faults.ThreeNodes(os.path.join(work, "kafka"), say)
    figures = []
    try:
        nodes.prepare_and_start()
        say(f"three nodes serving at {nodes.bootstrap}")
        os.environ["RETRYD_TEST_KAFKA"] = nodes.bootstrap
        os.environ["RETRYD_TEST_KAFKA_OWNED"] = "1"
        os.environ.pop("RETRYD_TEST_KAFKA_PROPERTIES", None)
        status = run_on(args, work, say, nodes, figures)
    finally:
        nodes.cleanup()
    for line in figures:
        say("  " + line)
    return status


def run_on(args, work, say, nodes, figures):
    rng = random.Random(args.seed)
    cluster = broker_faults.FaultCluster()
    if cluster.brokers != 3:
        raise Failure(f"the cluster has {cluster.brokers} brokers, not 3")
    n = args.partitions
    names = real_kafka.TestNames(cluster, "pfaults", ["input", "retry", "output", "dlq"], n,
                                 groups=["g"])
    all_records = []
    with names:
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, """
commit_interval_ms: 500
max_in_flight: 500
""" + real_kafka.simulate_body(names, args.seed, 2, 4, 500))
        retryd = real_kafka.Retryd(args.retryd, config, work,
                                   args=["--testonly_producer_fatal_error_on_sigusr1"])
        group = names.group["g"]
        pairs = [(group, names.topic["input"], n), (group + ".retry", names.topic["retry"], n)]
        threads = 1 + 2
        serial = [0]

        def batch():
            records = real_kafka.make_records(args.batch, rng)
            records = [(f"{key}-b{serial[0]}", where, value) for key, where, value in records]
            serial[0] += 1
            all_records.extend(records)
            return records

        def check():
            retryd.check()
            nodes.check()

        def settle(what):
            t0 = time.monotonic()
            groups = real_kafka.Groups(cluster, pairs)
            try:
                groups.wait_done(args.settle_timeout, check)
            finally:
                groups.close()
            say(f"{what}: every partition of both groups committed to its end "
                f"({time.monotonic() - t0:.1f} s)")

        try:
            retryd.start()
            address = retryd.address()
            retryd.wait_assigned(check=check)
            broker_faults.wait_health(address, "SERVING", 60, check)
            broker_faults.produce(cluster, names.topic["input"], batch(), 4).finish(120)
            settle("warm-up")

            for r in range(1, args.rounds + 1):
                load = broker_faults.produce(cluster, names.topic["input"], batch(), 8)
                real_kafka.pause(2, "records flowing before the fatal error", check)
                retryd.proc.send_signal(signal.SIGUSR1)
                t_fatal = time.monotonic()

                def all_rewound():
                    done = retryd.log_text().count(b"partitions to their last commit; handing")
                    return done >= threads * r

                real_kafka.wait_until(all_rewound, 60, f"round {r}: all {threads} threads rewound",
                                      check=check)
                took = time.monotonic() - t_fatal
                up = broker_faults.wait_health(address, "SERVING", 60, check)
                log = retryd.log_text()
                if log.count(b"raising a fatal producer error for a test: raised") != r:
                    raise Failure(f"round {r}: SIGUSR1 raised no fatal producer error")
                if b"replaced it with a new one (replacement %d)" % r not in log or \
                        b"(replacement %d)" % (r + 1) in log:
                    raise Failure(f"round {r}: not exactly one more producer replacement:\n" +
                                  real_kafka.tail(retryd.log()))
                load.finish(180)
                settle(f"round {r}")
                say(f"round {r}: {threads} threads rewound within {took:.1f} s, health SERVING "
                    f"{up:.1f} s later")
                figures.append(f"round {r}: every thread rewound and on a new producer "
                               f"{took:.1f} s after SIGUSR1")

            status = retryd.stop(60)
            if status != 0:
                raise Failure(f"SIGTERM ended retryd with status {status}:\n"
                              f"{real_kafka.tail(retryd.log())}")
            say("SIGTERM: retryd exited 0")
        finally:
            retryd.cleanup()

        inputs, copies, unknown = real_kafka.read_outcomes(cluster, names)
        destination = {k.encode(): where for k, where, _ in all_records}
        failures = []
        produced = {rec.key for rec in inputs.values()}
        missing = [k for k in destination if k not in produced]
        if missing:
            failures.append(f"{len(missing)} acknowledged records missing from the input")
        gone = real_kafka.lost(inputs, copies, lambda rec: destination.get(rec.key, "output"))
        if gone:
            failures.append(f"LOST {len(gone)} records, e.g. {gone[:10]}")
        if unknown:
            failures.append(f"{unknown} outcome records name no input record")
        dups, extra = real_kafka.duplicates(copies)
        figures.append(f"{len(all_records)} records produced, {len(inputs)} in the input; "
                       f"lost {len(gone)}; duplicates {dups} ({extra} extra copies)")
        status = real_kafka.verdict_status(say, failures, retryd.log())
    cluster.close()
    return status


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-producer-faults", parse_args(), run))
