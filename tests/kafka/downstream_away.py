#!/usr/bin/python3
"""The gRPC processor's downstream away for 15 s on a real Kafka, judged from
outside with kafka-python.

Runs the example downstream (client/examples/cpp/downstream.cc) as a child
process on a port of its own, and retryd's grpc processor against it (one
retry thread). While healthy records flow, the downstream is SIGKILLed, left
away for --away seconds (15), and started again on the same port. Every
record must reach the output on its first attempt: 0 lost, none
dead-lettered, nothing on the retry topic (no attempt used), and the
downstream's work in every value (upper-cased).

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import argparse
import os
import random
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402

PARTITIONS = 4
LISTENING = re.compile(rb"listening on \S+:(\d+)")


class Downstream:
    """The example downstream, started again on the same port after a kill."""

    def __init__(self, binary, port, work):
        self.binary, self.port, self.work = binary, port, work
        self.proc = None
        self.runs = 0

    def log(self):
        return os.path.join(self.work, f"downstream-{self.runs}.log")

    def start(self, timeout=30):
        """Until it listens; the port may take a moment to be free again."""
        deadline = time.monotonic() + timeout
        while True:
            self.runs += 1
            self.proc = real_kafka.start([self.binary, "--port", str(self.port)], self.log())
            try:
                real_kafka.wait_until(lambda: self.listening() or self.proc.poll() is not None,
                                      timeout, "the downstream listening")
            except Failure:
                self.cleanup()
                raise
            if self.listening():
                return
            if time.monotonic() > deadline:
                raise Failure(f"the downstream could not listen on port {self.port}:\n"
                              f"{real_kafka.tail(self.log())}")

    def listening(self):
        with open(self.log(), "rb") as f:
            return LISTENING.search(f.read()) is not None

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def cleanup(self):
        if self.proc is not None:
            real_kafka.stop(self.proc, signal.SIGKILL, 10)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--downstream", required=True, help="the retryd-example-downstream binary")
    p.add_argument("--records", type=int, default=3000, help="records to produce (3000)")
    p.add_argument("--away", type=float, default=15.0, help="seconds the downstream is away (15)")
    p.add_argument("--finish-timeout", type=float, default=120.0,
                   help="seconds allowed for the groups to commit everything (120)")
    return p


def run(args, work, say):
    cluster = real_kafka.Cluster()
    rng = random.Random(args.seed)
    port = real_kafka.free_port()
    produce_seconds = args.away + 8
    say(f"cluster {cluster.bootstrap} ({cluster.source}); {args.records} healthy records over "
        f"{produce_seconds:.0f} s, the downstream on port {port} away for {args.away:.0f} s")
    names = real_kafka.TestNames(cluster, "downstream", ["input", "retry", "output", "dlq"],
                                 PARTITIONS, groups=["g"])
    with names:
        records = real_kafka.make_records(args.records, rng, flaky=0, poison=0)
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
retry {{
  topic: "{names.topic['retry']}"
  threads: 1
  max_attempts: 3
  backoff {{ initial_ms: 50 multiplier: 2.0 max_ms: 500 }}
}}
processor {{
  grpc {{
    target: "127.0.0.1:{port}"
    deadline_ms: 2000
    max_concurrent_calls: 8
    outage_after: 5
    probe_initial_ms: 50
    probe_max_ms: 1000
  }}
}}""")
        downstream = Downstream(args.downstream, port, work)
        retryd = real_kafka.Retryd(args.retryd, config, work)
        groups = real_kafka.Groups(cluster, [
            (names.group["g"], names.topic["input"], PARTITIONS),
            (names.group["g"] + ".retry", names.topic["retry"], PARTITIONS)])
        sampler = real_kafka.EndSampler(cluster, [(names.topic["output"], PARTITIONS)])
        producer = real_kafka.PacedProducer(cluster, names.topic["input"], records,
                                            produce_seconds)
        began = time.monotonic()
        try:
            downstream.start()
            retryd.start()
            producer.start()
            real_kafka.wait_until(lambda: sum(sampler.sample().values()) >= 200, 60,
                                  "200 records through the downstream", check=retryd.check)
            downstream.kill()
            away_since = time.monotonic()
            at_kill = sum(sampler.sample().values())
            # The outage's length is the scenario, not a wait for a state.
            real_kafka.wait_until(lambda: time.monotonic() - away_since >= args.away,
                                  args.away + 5, "the outage", check=retryd.check)
            during = sum(sampler.sample().values()) - at_kill
            downstream.start()
            say(f"downstream SIGKILLed after {at_kill} outputs, started again "
                f"{time.monotonic() - away_since:.1f} s later; {during} outputs meanwhile "
                f"(calls in flight at the kill)")
            producer.finish(produce_seconds + 120)
            groups.wait_done(args.finish_timeout, check=retryd.check)
            say(f"groups done {time.monotonic() - began:.1f} s in: {groups.describe()}")
            retryd.stop_gracefully()
        finally:
            producer.stopping.set()
            retryd.cleanup()
            downstream.cleanup()
            groups.close()
            sampler.close()

        verdict = real_kafka.Verdict(cluster, names, records)
        failures = verdict.failures
        reader = cluster.consumer()
        try:
            retried = real_kafka.read_topic(reader, names.topic["retry"], PARTITIONS, 60)
        finally:
            reader.close()
        dead = [c for cs in verdict.copies.values() for c in cs if c.where == "dlq"]
        outputs = [c for cs in verdict.copies.values() for c in cs if c.where == "output"]
        later = [c for c in outputs if dict(c.record.headers).get("retryd-attempt") != b"1"]
        unprocessed = [c for c in outputs
                       if c.record.value != verdict.inputs[(int(dict(c.record.headers)[
                           "retryd-original-partition"]), int(dict(c.record.headers)[
                               "retryd-original-offset"]))].value.upper()]
        if dead:
            failures.append(f"{len(dead)} healthy records DEAD-LETTERED, e.g. "
                            f"{dict(dead[0].record.headers).get('retryd-error')!r}")
        if retried:
            failures.append(f"{len(retried)} records sent to the retry topic (an attempt used), "
                            f"e.g. {dict(retried[0].headers).get('retryd-error')!r}")
        if later:
            failures.append(f"{len(later)} outputs past their first attempt")
        if unprocessed:
            failures.append(f"{len(unprocessed)} outputs not processed by the downstream")
        say(f"summary: {len(verdict.inputs)} records; lost {len(verdict.lost)}; dead-lettered "
            f"{len(dead)}; retried {len(retried)}; duplicates {verdict.duplicates}; "
            f"{time.monotonic() - began:.1f} s")
        status = real_kafka.verdict_status(say, failures, retryd.log())
    cluster.close()
    return status


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-downstream", parse_args(), run))
