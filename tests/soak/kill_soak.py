#!/usr/bin/python3
"""Kill soak: retryd killed with SIGKILL again and again while records flow.

Starts retryd-mock-broker (the mock cluster in its own process, so it
outlives every retryd), produces --records records with unique keys -- 10 %
flaky (fail twice, then succeed), 1 % poison (always fail: half permanently,
half until their attempts run out), the rest healthy -- and runs retryd with
2 retry threads over 4 input and 4 retry partitions. It kills retryd with
SIGKILL --kills times at random moments (seeded; the seed is printed) and
restarts it each time, then waits until both consumer groups have committed
everything (lag 0 on the input and retry topics), stops retryd gracefully,
and runs check_outcomes.py, an independent reader, over the output and
dead-letter topics.

Exit status: 0 if the run and the check pass; 1 otherwise (a loss, a hang,
retryd dying on its own, a graceful stop that fails); 2 for bad arguments.
Every wait is bounded; every child process is killed when this script ends,
however it ends, and the work directory (logs, config, the manifest of
produced records) is removed unless --keep is given. A failure prints the
tail of retryd's log.
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from child_process import start, stop, tail  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
INPUT, RETRY, OUTPUT, DLQ = "soak-input", "soak-retry", "soak-output", "soak-dlq"
GROUP = "soak"
RETRY_GROUP = GROUP + ".retry"  # retryd's retry threads: "<group_id>.retry".
# kafka-python probes the broker's version when it connects, within 2 s by
# default: too short on busy CI cores.
CLIENT = {"api_version_auto_timeout_ms": 30000}
# retryd logs this when a thread's group assigns it partitions.
ASSIGNED = re.compile(rb"thread \d+: assigned [1-9]\d* partitions")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--broker", required=True, help="the retryd-mock-broker binary")
    p.add_argument("--records", type=int, default=100000, help="records to produce (100000)")
    p.add_argument("--kills", type=int, default=5, help="SIGKILLs of retryd, at least 1 (5)")
    p.add_argument("--seed", type=int, default=None, help="seed of keys and kill moments (random)")
    p.add_argument("--partitions", type=int, default=4,
                   help="partitions of the input and retry topics (4)")
    p.add_argument("--output-partitions", type=int, default=8,
                   help="partitions of the output topic, which holds the largest records (8)")
    p.add_argument("--retry-threads", type=int, default=2, help="retryd's retry threads (2)")
    p.add_argument("--produce-seconds", type=float, default=None,
                   help="spread producing over this long (default: 8 s per kill)")
    p.add_argument("--kill-window", type=float, default=4.0,
                   help="a kill comes up to this many seconds after retryd's groups assign "
                        "it partitions (4)")
    p.add_argument("--finish-timeout", type=float, default=300.0,
                   help="seconds allowed for lag 0 once every record is produced and the "
                        "last restart made (300)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, config)")
    args = p.parse_args()
    if args.records < 100 or args.kills < 1 or args.partitions < 1 or args.retry_threads < 1:
        p.error("needs --records >= 100, --kills >= 1, --partitions >= 1, --retry-threads >= 1")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    if args.produce_seconds is None:
        args.produce_seconds = 8.0 * args.kills
    return args


class Failure(Exception):
    """The soak failed for a reason other than the checker's verdict."""


def say(*parts):
    print("soak:", *parts, flush=True)


def make_keys(n, rng):
    """(key, destination, value) for n records: 10 % flaky, 1 % poison."""
    kinds = ["ok"] * n
    picks = rng.sample(range(n), n // 10 + n // 100)
    for i in picks[: n // 10]:
        kinds[i] = "flaky"
    for j, i in enumerate(picks[n // 10:]):
        kinds[i] = "poison-perm" if j % 2 == 0 else "poison-exh"
    out = []
    for i, kind in enumerate(kinds):
        where = "dlq" if kind.startswith("poison") else "output"
        out.append((f"{kind}-{i:07d}", where, f"v{i}.{rng.randrange(10**6)}"))
    return out


def write_config(path, bootstrap, args):
    # flaky- keys succeed at their third attempt, within max_attempts 5;
    # poison-exh- keys fail retriably until their attempts run out.
    text = f"""# Written by kill_soak.py.
listen_address: "127.0.0.1:0"
kafka {{
  bootstrap_servers: "{bootstrap}"
  properties {{ key: "session.timeout.ms" value: "6000" }}
  properties {{ key: "heartbeat.interval.ms" value: "1000" }}
}}
group_id: "{GROUP}"
input_topics: "{INPUT}"
output_topic: "{OUTPUT}"
dead_letter_topic: "{DLQ}"
shutdown_timeout_ms: 10000
retry {{
  topic: "{RETRY}"
  threads: {args.retry_threads}
  max_attempts: 5
  seed: {args.seed}
  backoff {{ initial_ms: 50 multiplier: 2.0 max_ms: 1000 }}
}}
processor {{
  simulate {{
    seed: {args.seed}
    rule {{ key_prefix: "flaky-" fail_attempts: 2 }}
    rule {{ key_prefix: "poison-perm-" permanent: true }}
    rule {{ key_prefix: "poison-exh-" fail_attempts: 1000 }}
  }}
}}
"""
    with open(path, "w") as f:
        f.write(text)


class Producer(threading.Thread):
    """Produces the records at an even pace over `seconds`, so that records
    are flowing whenever a kill comes. Every record must be acknowledged."""

    def __init__(self, bootstrap, records, seconds):
        super().__init__(name="producer", daemon=True)
        self.bootstrap, self.records, self.seconds = bootstrap, records, seconds
        self.sent = 0
        self.error = None
        self.stopping = threading.Event()

    def run(self):
        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5,
                                     retries=5, client_id="soak-producer", **CLIENT)
            futures = []
            begin = time.monotonic()
            step = max(1, len(self.records) // max(1, int(self.seconds * 10)))
            for i in range(0, len(self.records), step):
                if self.stopping.is_set():
                    return
                # Pacing, not waiting for a condition: chunk i is due then.
                due = begin + self.seconds * i / len(self.records)
                self.stopping.wait(max(0.0, due - time.monotonic()))
                for key, _, value in self.records[i:i + step]:
                    futures.append(producer.send(INPUT, key=key.encode(), value=value.encode()))
                self.sent = min(len(self.records), i + step)
            producer.flush(timeout=60)
            failed = [f for f in futures if not f.succeeded()]
            if failed:
                self.error = f"{len(failed)} records not acknowledged by the broker"
            producer.close(timeout=10)
        except Exception as e:
            self.error = f"producer: {e!r}"


class Lag:
    """Consumer-group lag, read from the broker with kafka-python."""

    def __init__(self, bootstrap, args):
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="soak-lag", **CLIENT)
        self.offsets = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                     enable_auto_commit=False, client_id="soak-lag", **CLIENT)
        self.groups = {
            GROUP: [TopicPartition(INPUT, p) for p in range(args.partitions)],
            RETRY_GROUP: [TopicPartition(RETRY, p) for p in range(args.partitions)],
        }

    def read(self):
        """{group: (committed, end)} summed over its partitions. Committed
        offsets are read before end offsets, so committed == end means the
        group had finished everything written by then."""
        committed = {}
        for group, tps in self.groups.items():
            offsets = self.admin.list_consumer_group_offsets(group, partitions=tps)
            committed[group] = sum(max(0, offsets[tp].offset) if tp in offsets else 0 for tp in tps)
        result = {}
        for group, tps in self.groups.items():
            result[group] = (committed[group], sum(self.offsets.end_offsets(tps).values()))
        return result

    def describe(self):
        try:
            return ", ".join(f"{g} committed {c}/{e}" for g, (c, e) in self.read().items())
        except Exception as e:
            return f"lag unknown ({e!r})"

    def close(self):
        self.admin.close()
        self.offsets.close()


class Soak:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.rng = random.Random(args.seed)
        self.broker = self.retryd = None
        self.runs = 0
        self.kills = 0

    def retryd_log(self):
        return os.path.join(self.work, f"retryd-{self.runs}.log")

    def start_broker(self):
        address_file = os.path.join(self.work, "bootstrap")
        topics = [f"{INPUT}:{self.args.partitions}", f"{RETRY}:{self.args.partitions}",
                  f"{OUTPUT}:{self.args.output_partitions}", f"{DLQ}:{self.args.partitions}"]
        self.broker = start([self.args.broker, "--address_file", address_file] + topics,
                            os.path.join(self.work, "broker.log"))
        deadline = time.monotonic() + 30
        while not os.path.exists(address_file):
            if self.broker.poll() is not None or time.monotonic() > deadline:
                raise Failure("the broker did not start:\n" +
                              tail(os.path.join(self.work, "broker.log")))
            time.sleep(0.05)  # A file from another process: nothing to wait on.
        with open(address_file) as f:
            return f.read().strip()

    def start_retryd(self):
        self.runs += 1
        config = os.path.join(self.work, "retryd.textproto")
        self.retryd = start([self.args.retryd, "--config", config, "--summary_interval_s", "0"],
                            self.retryd_log())
        self.started_at = time.monotonic()

    def check_retryd_alive(self):
        if self.retryd.poll() is not None:
            raise Failure(f"retryd (run {self.runs}) exited on its own, status "
                          f"{self.retryd.returncode}:\n{tail(self.retryd_log())}")

    def wait_for_assignment(self, timeout):
        """Seconds until retryd's log shows a group assigning it partitions, or
        None if it did not within `timeout`."""
        deadline = self.started_at + timeout
        while time.monotonic() < deadline:
            self.check_retryd_alive()
            with open(self.retryd_log(), "rb") as f:
                if ASSIGNED.search(f.read()):
                    return time.monotonic() - self.started_at
            time.sleep(0.1)  # Another process's log: nothing to wait on.
        return None

    def kill_cycle(self, lag):
        # One kill in five comes while retryd is still starting (joining its
        # groups); the others while it runs, up to --kill-window seconds after
        # its first assignment.
        if self.rng.random() < 0.2:
            phase, delay = "starting", self.rng.uniform(0.2, 3.0)
            wake = self.started_at + delay
        else:
            phase, delay = "running", self.rng.uniform(0.0, self.args.kill_window)
            assigned = self.wait_for_assignment(60)
            if assigned is None:
                phase = "running (no assignment seen in 60 s)"
            wake = time.monotonic() + delay
        while time.monotonic() < wake:
            self.check_retryd_alive()
            time.sleep(min(0.1, max(0.0, wake - time.monotonic())))
        self.check_retryd_alive()
        at = time.monotonic() - self.started_at
        self.retryd.kill()
        self.retryd.wait()
        self.kills += 1
        say(f"kill {self.kills}/{self.args.kills}: SIGKILL at {at:.2f} s into run {self.runs} "
            f"({phase}, drawn {delay:.2f} s); {lag.describe()}")

    def wait_until_done(self, lag, producer):
        """Waits, bounded, for both groups to have committed everything, twice
        in a row (a second apart)."""
        deadline = time.monotonic() + self.args.finish_timeout
        done_once = False
        last_report = time.monotonic()
        while True:
            self.check_retryd_alive()
            if producer.error:
                raise Failure(producer.error)
            try:
                state = lag.read() if not producer.is_alive() else None
            except Exception as e:  # A passing broker error: read again.
                say(f"reading the lag: {e!r}")
                state = None
            done = state is not None and all(c == e for c, e in state.values())
            if done and done_once:
                return state
            done_once = done
            if time.monotonic() > deadline:
                raise Failure(f"HANG: lag not 0 after {self.args.finish_timeout:.0f} s of "
                              f"waiting: {lag.describe()}\n"
                              f"retryd's log:\n{tail(self.retryd_log())}")
            if time.monotonic() - last_report > 10:
                say(f"waiting for lag 0: produced {producer.sent}; {lag.describe()}")
                last_report = time.monotonic()
            time.sleep(1.0)  # Offsets in the broker: polled, nothing to wait on.

    def run(self):
        args = self.args
        began = time.monotonic()
        say(f"seed {args.seed}: {args.records} records, {args.kills} kills, "
            f"{args.partitions} input and retry partitions, {args.retry_threads} retry threads; "
            f"work directory {self.work}")
        records = make_keys(args.records, self.rng)
        manifest = os.path.join(self.work, "manifest.tsv")
        with open(manifest, "w") as f:
            for key, where, value in records:
                f.write(f"{key}\t{where}\t{value}\n")
        bootstrap = self.start_broker()
        say(f"broker at {bootstrap}")
        write_config(os.path.join(self.work, "retryd.textproto"), bootstrap, args)
        lag = Lag(bootstrap, args)
        producer = Producer(bootstrap, records, args.produce_seconds)
        try:
            self.start_retryd()
            producer.start()
            for _ in range(args.kills):
                self.kill_cycle(lag)
                self.start_retryd()
            producer.join(args.produce_seconds + 120)
            if producer.is_alive():
                raise Failure("the producer did not finish in time")
            if producer.error:
                raise Failure(producer.error)
            say(f"produced {len(records)}; last restart done, waiting for lag 0")
            state = self.wait_until_done(lag, producer)
            say("lag 0: " + ", ".join(f"{g} {c}/{e}" for g, (c, e) in state.items()))
        finally:
            producer.stopping.set()
            lag.close()
        status = stop(self.retryd, signal.SIGTERM, 60)
        if status != 0:
            raise Failure(f"retryd's graceful stop ended with status {status}:\n"
                          f"{tail(self.retryd_log())}")
        elapsed = time.monotonic() - began
        say(f"retryd stopped gracefully; {self.error_lines()}; running the checker")
        checker = subprocess.run(
            [sys.executable, os.path.join(HERE, "check_outcomes.py"), "--bootstrap", bootstrap,
             "--manifest", manifest, "--output", OUTPUT, "--dlq", DLQ, "--topic", INPUT,
             "--topic", RETRY, "--kills", str(self.kills), "--elapsed", f"{elapsed:.1f}"],
            timeout=300)
        return checker.returncode

    def error_lines(self):
        """What retryd logged at ERROR level over all runs: a kill must not
        make it fail a thread, though only a loss fails the soak."""
        lines = []
        for run in range(1, self.runs + 1):
            with open(os.path.join(self.work, f"retryd-{run}.log"), "rb") as f:
                lines += [l.decode(errors="replace") for l in f if b" ERROR " in l]
        if not lines:
            return "no ERROR lines in its logs"
        return f"{len(lines)} ERROR lines in its logs, the first:\n    " + "\n    ".join(lines[:5])

    def cleanup(self):
        for proc, sig in ((self.retryd, signal.SIGKILL), (self.broker, signal.SIGTERM)):
            if proc is not None:
                stop(proc, sig, 10)


def main():
    args = parse_args()
    work = tempfile.mkdtemp(prefix="retryd-soak-")
    soak = Soak(args, work)

    def on_signal(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rc = 1
    try:
        rc = soak.run()
    except Failure as e:
        say(f"FAILED: {e}")
    except KeyboardInterrupt as e:
        say(f"interrupted ({e})")
    finally:
        soak.cleanup()
        if args.keep:
            say(f"kept {work} (logs, config, manifest)")
        else:
            shutil.rmtree(work, ignore_errors=True)
    say(f"seed {args.seed}: {'PASSED' if rc == 0 else 'FAILED'}" +
        ("" if rc == 0 else f" (again, keeping the logs: --seed {args.seed} --keep)"))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
