#!/usr/bin/python3
"""Elastic retry threads on a real Kafka, up and back down, judged from outside
with retryctl and kafka-python.

retryd runs with no retry thread and `autoscale { backlog_per_thread: 100
idle_exit_ms: 4000 }`, min_threads 0, max_threads 4, over 4 partitions.
1,000 records that each fail twice, 2 s apart, fill the retry topic; a few
more (`slow-` keys, all in retry partition 0) fail --slow-attempts times, so that
the thread holding that partition is still busy when the others go idle and
stop: it has to come through the rebalances their leaving causes. Checked:

  * the retry threads go from 0 to 4 (the time it took is printed);
  * once GetStatus shows the retry backlog at 0, they are back to
    min_threads (0) within idle_exit_ms + N x 10 s, N = 4 the threads to
    stop;
  * they stopped in more than one step (the busy thread stayed through at
    least one rebalance), and no log line says a retry thread was not
    through a rebalance, or did not commit before one, in time;
  * every record reached the output, none the DLQ; SIGTERM exits 0.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import argparse
import json
import os
import re
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402

PARTITIONS = 4
MAX_THREADS = 4
IDLE_EXIT_MS = 4000
BACKLOG_PER_THREAD = 100
# What the engine logs when a control operation gave up waiting for the
# other retry threads to come through a rebalance (server/engine/engine.cc).
LATE = re.compile(rb"was not through the rebalance in time|did not commit before the rebalance")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--retryctl", required=True, help="the retryctl binary")
    p.add_argument("--records", type=int, default=1000, help="records failing twice (1000)")
    p.add_argument("--slow", type=int, default=20, help="slow- records (20)")
    p.add_argument("--slow-attempts", type=int, default=6,
                   help="failed attempts of each slow- record (6, 2 s apart)")
    return p


def slow_keys(n):
    """n keys that librdkafka's default partitioner (consistent_random: CRC-32
    of the key, modulo the partitions) puts in retry partition 0."""
    keys, i = [], 0
    while len(keys) < n:
        key = f"slow-{i:05d}"
        if zlib.crc32(key.encode()) % PARTITIONS == 0:
            keys.append(key)
        i += 1
    return keys


class Status:
    """retryd's GetStatus through retryctl --json, looked at again and again."""

    def __init__(self, retryctl, address):
        self.retryctl, self.address = retryctl, address

    def get(self):
        out = real_kafka.retryctl(self.retryctl, self.address, "--json", "status", timeout=10)
        return json.loads(out)

    @staticmethod
    def retry_threads(status):
        return sum(1 for t in status.get("threads", [])
                   if t.get("role") == "THREAD_ROLE_RETRY"
                   and t.get("state") not in ("THREAD_STATE_STOPPED", "THREAD_STATE_FAILED"))

    @staticmethod
    def backlog(status):
        return int(status.get("retry_backlog", "0"))


def run(args, work, say):
    cluster = real_kafka.Cluster()
    names = real_kafka.TestNames(cluster, "autoscale", ["input", "retry", "output", "dlq"],
                                 PARTITIONS, groups=["g"])
    with names:
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
retry {{
  topic: "{names.topic['retry']}"
  threads: 0
  min_threads: 0
  max_threads: {MAX_THREADS}
  autoscale {{ backlog_per_thread: {BACKLOG_PER_THREAD} idle_exit_ms: {IDLE_EXIT_MS} }}
  max_attempts: {args.slow_attempts + 2}
  backoff {{ initial_ms: 2000 multiplier: 1.0 max_ms: 2000 }}
}}
processor {{
  simulate {{
    seed: {args.seed}
    rule {{ key_prefix: "twice-" fail_attempts: 2 }}
    rule {{ key_prefix: "slow-" fail_attempts: {args.slow_attempts} }}
  }}
}}""")
        retryd = real_kafka.Retryd(args.retryd, config, work)
        records = [(f"twice-{i:05d}", "output", f"v{i}") for i in range(args.records)]
        records += [(k, "output", f"s{i}") for i, k in enumerate(slow_keys(args.slow))]
        try:
            retryd.start()
            status = Status(args.retryctl, retryd.address())
            retryd.wait_assigned()
            if Status.retry_threads(status.get()) != 0:
                raise Failure("retry threads run before there is a backlog")
            producer = real_kafka.PacedProducer(cluster, names.topic["input"], records, 0.5)
            producer.start()
            producer.finish(60)
            produced = time.monotonic()
            say(f"produced {len(records)} records ({args.slow} slow- ones in retry partition 0)")

            real_kafka.wait_until(lambda: Status.retry_threads(status.get()) == MAX_THREADS, 60,
                                  f"{MAX_THREADS} retry threads", check=retryd.check)
            up = time.monotonic() - produced
            say(f"0 -> {MAX_THREADS} retry threads {up:.1f} s after the backlog was produced")

            real_kafka.wait_until(lambda: Status.backlog(status.get()) == 0, 120,
                                  "the retry backlog at 0", check=retryd.check)
            empty = time.monotonic()
            bound = IDLE_EXIT_MS / 1000 + MAX_THREADS * 10

            def back_down():
                s = status.get()
                events = s.get("scaling_events", [])
                stopped = [e for e in events if not e.get("started")]
                started = [e for e in events if e.get("started")]
                if Status.retry_threads(s) == 0 and len(stopped) == len(started):
                    return s, stopped
                return None

            left, stopped = real_kafka.wait_until(
                back_down, bound,
                f"the retry threads back to min_threads (0) once the backlog was 0 (bound "
                f"idle_exit_ms + {MAX_THREADS} x 10 s = {bound:.0f} s)", check=retryd.check)
            down = time.monotonic() - empty
            # One StopRetryThreads per step: its stops share their time.
            steps = sorted({int(e["time_unix_ms"]) for e in stopped})
            say(f"{MAX_THREADS} -> 0 retry threads {down:.1f} s after the backlog was 0, in "
                f"{len(steps)} steps: " + "; ".join(
                    ", ".join(str(e["thread_id"]) for e in stopped
                              if int(e["time_unix_ms"]) == t) for t in steps))
            if Status.backlog(left) != 0:
                raise Failure(f"the backlog is {Status.backlog(left)} again")
            groups = real_kafka.Groups(cluster, [
                (names.group["g"], names.topic["input"], PARTITIONS),
                (names.group["g"] + ".retry", names.topic["retry"], PARTITIONS)])
            try:
                groups.wait_done(60, check=retryd.check)
            finally:
                groups.close()
            retryd.stop_gracefully()
        finally:
            retryd.cleanup()

        failures = real_kafka.Verdict(cluster, names, records).failures
        if len(steps) < 2:
            failures.append(f"the threads stopped in {len(steps)} step(s): no thread stayed "
                            f"through another's leaving, so the rebalance path was not tried")
        late = [l for l in retryd.all_logs().splitlines() if LATE.search(l)]
        if late:
            failures.append(f"{len(late)} log lines say a retry thread was late through a "
                            f"rebalance, e.g. {late[0].decode(errors='replace')}")
        say(f"up {up:.1f} s, down {down:.1f} s (bound {bound:.0f} s), {len(steps)} stop steps, "
            f"{len(late)} late rebalances")
        status_code = real_kafka.verdict_status(say, failures, log_of=retryd.log())
    cluster.close()
    return status_code


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-autoscale", parse_args(), run))
