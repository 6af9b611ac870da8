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
    return broker_faults.on_three_nodes(args, work, say, run_on)


def run_on(args, work, say, nodes, figures):
    cluster = broker_faults.FaultCluster()
    threads = 1 + 2
    with broker_faults.Scenario(args, work, say, nodes, cluster, "pfaults",
                                retryd_args=["--testonly_producer_fatal_error_on_sigusr1"]) \
            as scenario:
        retryd, check, settle = scenario.retryd, scenario.check, scenario.settle
        input_topic = scenario.names.topic["input"]
        try:
            retryd.start()
            address = retryd.address()
            retryd.wait_assigned(check=check)
            broker_faults.wait_health(address, "SERVING", 60, check)
            broker_faults.produce(cluster, input_topic, scenario.batch(), 4).finish(120)
            settle("warm-up")

            for r in range(1, args.rounds + 1):
                load = broker_faults.produce(cluster, input_topic, scenario.batch(), 8)
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

            scenario.stop()
        finally:
            retryd.cleanup()

        status = scenario.verdict(figures)
    cluster.close()
    return status


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-producer-faults", parse_args(), run))
