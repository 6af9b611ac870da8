#!/usr/bin/python3
"""Two retryd instances sharing their groups on a real Kafka, judged from
outside with kafka-python.

--mode kill: instances A and B run side by side over one input (each with
  retry threads) while records flow; A is SIGKILLed. B, the survivor, must
  take over A's partitions and finish everything: 0 records lost. What the
  kill made B process again is reported and bounded, as in kill_soak.py.

--mode rebalance: no crash, no fault, at least 3 rebalances while records
  flow: A starts and stops retry threads over the control API (the built
  retryctl), B joins both groups and leaves them with a graceful stop, then
  A starts a retry thread again. Every record must have exactly one
  outcome: 0 lost and 0 duplicates (an input record twice in the output,
  or in both the output and the DLQ).

--ordering picks retryd's ordering mode (UNORDERED or KEY). Records have
unique keys, 10 % flaky (fail twice, then succeed) and 1 % poison (fail for
good, or until their attempts run out). Exit status 0 passed, 1 failed, 77
skipped (no cluster).
"""

import argparse
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
    p.add_argument("--retryctl", help="the retryctl binary (--mode rebalance)")
    p.add_argument("--mode", choices=["kill", "rebalance"], required=True)
    p.add_argument("--ordering", choices=["UNORDERED", "KEY"], default="UNORDERED")
    p.add_argument("--records", type=int, default=4000, help="records to produce (4000)")
    p.add_argument("--produce-seconds", type=float, default=16.0,
                   help="spread producing over this long (16 s)")
    p.add_argument("--commit-interval-ms", type=int, default=1000, help="retryd's (1000)")
    p.add_argument("--max-in-flight", type=int, default=500, help="retryd's, per thread (500)")
    p.add_argument("--finish-timeout", type=float, default=120.0,
                   help="seconds allowed for both groups to commit everything (120)")
    return p


def run(args, work, say):
    if args.mode == "rebalance" and not args.retryctl:
        raise Failure("--mode rebalance needs --retryctl")
    cluster = real_kafka.Cluster()
    rng = random.Random(args.seed)
    retry_threads = 1
    say(f"cluster {cluster.bootstrap} ({cluster.source}); mode {args.mode}, ordering "
        f"{args.ordering}, {args.records} records over {args.produce_seconds:.0f} s, "
        f"{PARTITIONS} partitions, commit_interval_ms {args.commit_interval_ms}, max_in_flight "
        f"{args.max_in_flight}")
    names = real_kafka.TestNames(cluster, f"shared-{args.mode}", ["input", "retry", "output", "dlq"],
                                 PARTITIONS, groups=["g"])
    with names:
        records = real_kafka.make_records(args.records, rng)
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
ordering: ORDERING_{args.ordering}
commit_interval_ms: {args.commit_interval_ms}
max_in_flight: {args.max_in_flight}
""" + real_kafka.simulate_body(names, args.seed, retry_threads, 4, 500, max_threads=4))
        a = real_kafka.Retryd(args.retryd, config, work, "a")
        b = real_kafka.Retryd(args.retryd, config, work, "b")
        groups = real_kafka.Groups(cluster, [
            (names.group["g"], names.topic["input"], PARTITIONS),
            (names.group["g"] + ".retry", names.topic["retry"], PARTITIONS)])
        sampler = real_kafka.EndSampler(cluster, [(names.topic["output"], PARTITIONS),
                                                  (names.topic["dlq"], PARTITIONS)])
        producer = real_kafka.PacedProducer(cluster, names.topic["input"], records,
                                            args.produce_seconds)
        began = time.monotonic()
        live = [a]

        def check():
            for r in live:
                r.check()
            sampler.sample()

        def pause(seconds, what):
            real_kafka.pause(seconds, what, check)

        boundary = None
        span = None
        events = []
        try:
            a.start()
            producer.start()
            a.wait_assigned(check=check)
            if args.mode == "kill":
                pause(2.0, "records flowing through A")
                b.start()
                live.append(b)
                b.wait_assigned(check=check)
                pause(rng.uniform(1.0, 3.0), "records flowing through A and B")
                a.kill()
                live.remove(a)
                boundary = sampler.sample()
                span = (a.started_at, time.monotonic())
                say(f"SIGKILLed A {span[1] - span[0]:.1f} s into its run; "
                    f"{groups.describe()}")
                events = ["B joined", "A killed"]
            else:
                address = a.address()
                ctl = lambda *argv: real_kafka.retryctl(args.retryctl, address, *argv)  # noqa: E731
                pause(2.0, "records flowing through A")
                ctl("threads", "start", "1")
                events.append("A: retry thread started")
                pause(2.0, "records flowing after a start")
                ctl("threads", "stop", "1")
                events.append("A: retry thread stopped")
                pause(2.0, "records flowing after a stop")
                b.start()
                live.append(b)
                b.wait_assigned(check=check)
                events.append("B joined")
                pause(3.0, "records flowing through A and B")
                live.remove(b)
                b.stop_gracefully()
                events.append("B left")
                pause(1.0, "records flowing after B left")
                ctl("threads", "start", "1")
                events.append("A: retry thread started")
            say("events: " + "; ".join(events))
            producer.finish(args.produce_seconds + 120)
            survivor = live[-1]
            groups.wait_done(args.finish_timeout, check=survivor.check)
            say(f"both groups done {time.monotonic() - began:.1f} s in: {groups.describe()}")
            survivor.stop_gracefully()
        finally:
            producer.stopping.set()
            a.cleanup()
            b.cleanup()
            groups.close()
            sampler.close()

        verdict = real_kafka.Verdict(cluster, names, records)
        failures = verdict.failures
        # Every run of both instances: a revocation is one thread's share of a rebalance.
        revokes = sum(r.all_logs().count(b": revoked ") for r in (a, b))
        line = (f"summary: {len(verdict.inputs)} records; lost {len(verdict.lost)}; duplicates "
                f"{verdict.duplicates} ({verdict.extra} extra copies); {revokes} revocations in "
                f"the logs")
        if args.mode == "rebalance":
            if verdict.duplicates:
                repeated = sorted(c for c, cs in verdict.copies.items() if len(cs) > 1)
                failures.append(f"{verdict.duplicates} DUPLICATES with no crash and no fault, "
                                f"e.g. {verdict.describe(repeated[:10])}")
        else:
            replays = verdict.replays([boundary])[1]
            rate = sampler.peak_rate(*span)
            bound = real_kafka.replay_bound(rate, args.commit_interval_ms, args.max_in_flight,
                                            1 + retry_threads)
            line += (f"; replayed after the kill {replays} (peak rate {rate:.0f}/s, bound "
                     f"{bound:.0f})")
            if replays > bound:
                failures.append(f"{replays} records processed again after the kill, more than "
                                f"{bound:.0f}")
            # B's primary and retry threads each end up with every partition.
            took_over = b.log_text().count(f" partitions, now {PARTITIONS}\n".encode())
            if took_over < 2:
                failures.append("B's threads were never assigned all partitions")
        say(line + f"; {time.monotonic() - began:.1f} s")
        status = real_kafka.verdict_status(say, failures)
    cluster.close()
    return status


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-shared", parse_args(), run))
