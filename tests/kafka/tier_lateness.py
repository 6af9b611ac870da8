#!/usr/bin/python3
"""A fixed-delay retry tier's lateness and drain rate on a real Kafka, judged
from the downstream: a gRPC RecordProcessor of the test's own (grpcio, the
message classes from protoc's descriptor set of processor.proto) that notes
when each attempt of each record arrives.

Every record fails its first attempt (ABORTED, retriable, answered at once)
and succeeds at its second, which takes --latency-ms. retryd runs one primary
and one retry thread over 2 partitions, max_concurrent_calls 8, and a tier
of --delay-ms. An attempt is due the tier's delay after the downstream
answered the one before; its lateness is when it arrived minus that. Checked:

  * light load (--light, 60, records at 9/s): median lateness under --light-ms
    (50), p95 under --light-p95-ms (250): no record waits for the fetch of a
    partition resumed (librdkafka 2.0.2 takes up to a second to fetch again
    from a broker all of whose partitions were paused);
  * a burst of 100 records: p99 lateness at most delay + --burst-slack-ms
    (500);
  * a backlog of 200 records drains through the tier (second attempts per
    second, first to last) at least --min-ratio (0.8) of the rate a retryd
    with a single retry topic (backoff at most 1 ms) reaches on the same
    downstream and threads, measured in this run: each retryd starts with no
    retry thread, and once its retry topic holds all 200 first failures
    `retryctl threads start 1` starts the one that drains them (the faster
    of two such rounds on each side);
  * every record reached the output (at least once); nothing dead-lettered.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import argparse
import concurrent.futures
import contextlib
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402

import grpc  # noqa: E402
from google.protobuf import descriptor_pb2, message_factory  # noqa: E402

PARTITIONS = 2
CALLS = 8
LIGHT_RATE = 9.0
BURST, PROBE, ROUNDS = 100, 200, 2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--retryctl", required=True, help="the retryctl binary")
    p.add_argument("--proto-dir", required=True, help="the project's proto/ directory")
    p.add_argument("--light", type=int, default=60, help="records at light load (60)")
    p.add_argument("--delay-ms", type=int, default=300, help="the tier's delay (300)")
    p.add_argument("--latency-ms", type=int, default=25, help="a second attempt's latency (25)")
    p.add_argument("--light-ms", type=float, default=50, help="light load's median bound (50)")
    p.add_argument("--light-p95-ms", type=float, default=250,
                   help="light load's 95th percentile bound (250)")
    p.add_argument("--burst-slack-ms", type=float, default=500,
                   help="a burst's p99 bound past the delay (500)")
    p.add_argument("--min-ratio", type=float, default=0.8,
                   help="the tier's drain rate over the single topic's, at least (0.8)")
    return p


def message_classes(proto_dir, work):
    out = os.path.join(work, "processor.pb")
    subprocess.run(["protoc", f"-I{proto_dir}", "--include_imports", f"--descriptor_set_out={out}",
                    "retryd/v1/processor.proto"], check=True)
    files = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        files.ParseFromString(f.read())
    return message_factory.GetMessages(list(files.file))


class Downstream:
    """retryd.v1.RecordProcessor on 127.0.0.1: fails every first attempt at
    once, answers every later one OK after `latency_s`; notes each call."""

    def __init__(self, messages, latency_s):
        self.latency_s = latency_s
        self.response = messages["retryd.v1.ProcessResponse"]
        request = messages["retryd.v1.ProcessRequest"]
        self.cond = threading.Condition()
        self.arrived = {}  # (key, attempt) -> wall-clock seconds, the first time.
        self.answered = {}  # (key, attempt) -> when its answer went out.
        handler = grpc.method_handlers_generic_handler("retryd.v1.RecordProcessor", {
            "Process": grpc.unary_unary_rpc_method_handler(
                self.process, request_deserializer=request.FromString,
                response_serializer=self.response.SerializeToString)})
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4 * CALLS))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def process(self, request, context):
        now = time.time()
        call = (request.record.key.decode(), request.attempt)
        with self.cond:
            self.arrived.setdefault(call, now)
        if request.attempt > 1:
            # The downstream's work, not a wait for a condition.
            time.sleep(self.latency_s)
        with self.cond:
            self.answered.setdefault(call, time.time())
            self.cond.notify_all()
        if request.attempt == 1:
            context.abort(grpc.StatusCode.ABORTED, "try again")
        return self.response()

    def wait_first_attempts(self, keys, timeout):
        """Until every key in `keys` had its first attempt answered."""
        self.wait_attempts(keys, 1, timeout)

    def wait_second_attempts(self, keys, timeout):
        self.wait_attempts(keys, 2, timeout)

    def wait_attempts(self, keys, attempt, timeout):
        with self.cond:
            if not self.cond.wait_for(
                    lambda: all((k, attempt) in self.answered for k in keys), timeout):
                missing = [k for k in keys if (k, attempt) not in self.answered]
                raise Failure(f"{len(missing)} of {len(keys)} records had no attempt {attempt} "
                              f"answered after {timeout} s, e.g. {missing[:3]}")

    def lateness_ms(self, keys, delay_ms):
        """Each key's second attempt: arrival minus (first answered + delay)."""
        with self.cond:
            return [(self.arrived[(k, 2)] - self.answered[(k, 1)]) * 1000 - delay_ms
                    for k in keys]

    def rate(self, keys):
        """Second attempts per second, from the first one's arrival to the last's."""
        with self.cond:
            times = sorted(self.arrived[(k, 2)] for k in keys)
        return (len(times) - 1) / max(1e-3, times[-1] - times[0])

    def stop(self):
        self.server.stop(grace=None)


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))]


def produce(cluster, topic, keys):
    producer = cluster.producer(linger_ms=5)
    futures = [producer.send(topic, key=k.encode(), value=b"v") for k in keys]
    producer.flush(timeout=60)
    producer.close(timeout=10)
    failed = [f for f in futures if not f.succeeded()]
    if failed:
        raise Failure(f"{len(failed)} records not acknowledged, e.g. {failed[0].exception!r}")


def run(args, work, say):
    cluster = real_kafka.Cluster()
    downstream = Downstream(message_classes(args.proto_dir, work), args.latency_ms / 1000)
    processor = f"""processor {{
  grpc {{ target: "127.0.0.1:{downstream.port}" max_concurrent_calls: {CALLS} }}
}}"""
    # Each retryd has topics and a group of its own: a new group reads its
    # input from the beginning.
    topics = ["input", "retry", "output", "dlq"]
    try:
        with real_kafka.TestNames(cluster, "tier-late", topics, PARTITIONS, groups=["g"]) as late, \
                real_kafka.TestNames(cluster, "tier-drain", topics, PARTITIONS,
                                     groups=["g"]) as tier, \
                real_kafka.TestNames(cluster, "single-drain", topics, PARTITIONS,
                                     groups=["g"]) as single:
            return scenarios(args, work, say, cluster, (late, tier, single), downstream, processor)
    finally:
        downstream.stop()


@contextlib.contextmanager
def running(args, work, cluster, names, name, body):
    """A retryd of `names` with `body`, started and assigned; stopped
    gracefully at the end of the block."""
    config = os.path.join(work, f"{name}.textproto")
    real_kafka.retryd_config(config, cluster, names, work, body)
    retryd = real_kafka.Retryd(args.retryd, config, work, name=name)
    try:
        retryd.start()
        retryd.wait_assigned()
        yield retryd
        retryd.stop_gracefully()
    finally:
        retryd.cleanup()


def scenarios(args, work, say, cluster, names, downstream, processor):
    late_names, tier_names, single_names = names
    delay = args.delay_ms
    light = [f"light-{i:03d}" for i in range(args.light)]
    burst = [f"burst-{i:03d}" for i in range(BURST)]
    # The faster of two rounds each: the machine's load varies.
    tier_rounds = [[f"tier{r}-{i:03d}" for i in range(PROBE)] for r in range(ROUNDS)]
    single_rounds = [[f"single{r}-{i:03d}" for i in range(PROBE)] for r in range(ROUNDS)]
    timeout = 120

    def tier_body(names, threads):
        return f"""retry {{
  threads: {threads}
  tiers {{ topic: "{names.topic['retry']}" delay_ms: {delay} max_attempts: 1 }}
}}
{processor}"""

    with running(args, work, cluster, late_names, "tiered", tier_body(late_names, 1)) as retryd:
        # Both threads assigned: the primary's group and the retry group.
        real_kafka.wait_until(
            lambda: len(real_kafka.ASSIGNED.findall(retryd.log_text())) >= 2, 60,
            "the primary and the retry thread assigned", check=retryd.check)
        paced = real_kafka.PacedProducer(cluster, late_names.topic["input"],
                                         [(k, "output", "v") for k in light],
                                         len(light) / LIGHT_RATE)
        paced.start()
        paced.finish(60)
        downstream.wait_second_attempts(light, timeout)
        produce(cluster, late_names.topic["input"], burst)
        downstream.wait_second_attempts(burst, timeout)

    def drain(retryd, names, keys, held, reader):
        # No retry thread until every first attempt has failed and the retry
        # topic holds them all (`held` with the rounds before); then one
        # starts, drains them, and stops.
        produce(cluster, names.topic["input"], keys)
        downstream.wait_first_attempts(keys, timeout)
        real_kafka.wait_until(
            lambda: sum(real_kafka.end_offsets(reader, names.topic["retry"],
                                               PARTITIONS).values()) >= held,
            60, f"{held} records in the retry topic", check=retryd.check)
        ctl = [args.retryctl, retryd.address(), "threads"]
        real_kafka.retryctl(*ctl, "start", "1")
        downstream.wait_second_attempts(keys, timeout)
        real_kafka.retryctl(*ctl, "set", "0")

    single_body = f"""retry {{
  topic: "{single_names.topic['retry']}"
  threads: 0
  max_attempts: 2
  backoff {{ initial_ms: 1 max_ms: 1 }}
}}
{processor}"""
    reader = cluster.consumer()
    try:
        with running(args, work, cluster, tier_names, "tier-drain",
                     tier_body(tier_names, 0)) as tiered, \
                running(args, work, cluster, single_names, "single-drain", single_body) as single:
            # In turns, so that neither side gets the quieter moments.
            for r in range(ROUNDS):
                held = (r + 1) * PROBE
                drain(tiered, tier_names, tier_rounds[r], held, reader)
                drain(single, single_names, single_rounds[r], held, reader)
    finally:
        reader.close()

    failures = []
    late = downstream.lateness_ms(light, delay)
    p95 = percentile(late, 0.95)
    say(f"light load, {len(light)} records at {LIGHT_RATE:g}/s: lateness median "
        f"{real_kafka.median(late):.0f} ms, p95 {p95:.0f} ms, max {max(late):.0f} ms")
    if real_kafka.median(late) >= args.light_ms:
        failures.append(f"light load: median lateness {real_kafka.median(late):.0f} ms, "
                        f"want under {args.light_ms:g} ms")
    if p95 >= args.light_p95_ms:
        failures.append(f"light load: p95 lateness {p95:.0f} ms, want under "
                        f"{args.light_p95_ms:g} ms")
    late = downstream.lateness_ms(burst, delay)
    p99 = percentile(late, 0.99)
    say(f"a burst of {BURST}: lateness median {real_kafka.median(late):.0f} ms, p99 {p99:.0f} ms")
    if p99 > delay + args.burst_slack_ms:
        failures.append(f"a burst of {BURST}: p99 lateness {p99:.0f} ms, want at most "
                        f"{delay} + {args.burst_slack_ms:g} ms")
    tier_rate = max(downstream.rate(keys) for keys in tier_rounds)
    single_rate = max(downstream.rate(keys) for keys in single_rounds)
    ratio = tier_rate / single_rate
    say(f"a backlog of {PROBE} drained (the faster of {ROUNDS} rounds) at {tier_rate:.0f}/s "
        f"through the tier, {single_rate:.0f}/s through a single retry topic: ratio {ratio:.2f}")
    if ratio < args.min_ratio:
        failures.append(f"the tier drained at {ratio:.2f} x the single topic's rate, want at "
                        f"least {args.min_ratio:g}")

    reader = cluster.consumer()
    try:
        for names, keys in [(late_names, light + burst), (tier_names, sum(tier_rounds, [])),
                            (single_names, sum(single_rounds, []))]:
            read = {t: real_kafka.read_topic(reader, names.topic[t], PARTITIONS, 60)
                    for t in ["output", "dlq"]}
            out = {r.key.decode() for r in read["output"]}
            missing = [k for k in keys if k not in out]
            if missing:
                failures.append(f"{len(missing)} records never reached the output, e.g. "
                                f"{missing[:3]}")
            if read["dlq"]:
                failures.append(f"{len(read['dlq'])} records dead-lettered, none should be")
    finally:
        reader.close()
    return real_kafka.verdict_status(say, failures)


def main():
    return real_kafka.scenario_main("tier_lateness", parse_args(), run)


if __name__ == "__main__":
    sys.exit(main())
