#!/usr/bin/python3
"""retryd against its peers on one real Kafka broker (scripts/bench.sh peers).

  run.py --bootstrap HOST:PORT [--broker-pid PID] [--build-dir DIR] [--out DIR]
         [--scale F] [--peer-scale F] [--sides S,...] [--workloads W,...]
         [--b6-partitions P,...] [--keep-logs]

scripts/bench.sh peers builds what this needs, starts the broker and runs
it; see docs/performance-peers.md, "Against the peers", for what it measures.

For each workload and each side, on topics of its own (16 partitions, or --partitions; the
output and dead-letter topics stamped by the broker, LogAppendTime). The JVM
peers get --peer-scale of the records the others get: at their rates the
full counts would take hours. Then B6: the bare relay and retryd (unordered)
again on the no-failure, 0 ms workload at each of --b6-partitions.

 1. peers_probe writes the input: warm-up records first in every partition,
    then the measured backlog (bench/judge/workload.h says which key does
    what);
 2. the side starts (and, for a 1 ms workload, a downstream of its own);
    its process's CPU time (user + system of all its threads,
    /proc/PID/stat) and the broker's are sampled every 50 ms;
 3. once the output and dead-letter topics hold every backlog record,
    peers_probe writes the paced records at a fixed rate and waits for them;
 4. peers_probe judges the three topics (bench/judge/judge.h): lost, wrong
    outcome, duplicates, keys out of order, the backlog's window in broker
    time, the paced records' latency;
 5. peak RSS (VmHWM) is read, the side and its downstream stopped, the
    topics deleted.

Every process started here dies with it (PR_SET_PDEATHSIG), and is stopped
on the way out, Ctrl-C and failures included; every wait is bounded.
Standard library only, for /usr/bin/python3.
"""

import argparse
import csv
import ctypes
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 16

# The retry policy every side gets: 4 attempts in all, the first included;
# delays 100 ms, x2, at most 1 s.
ATTEMPTS = 4
BACKOFF_INITIAL_MS = 100
BACKOFF_MULTIPLIER = 2.0
BACKOFF_MAX_MS = 1000
IN_FLIGHT = 16


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    flaky_percent: int
    poison_percent: int
    work_ms: int  # 0: in-process rule; 1: every side calls the downstream
    records: int  # measured records at --scale 1


WORKLOADS = [
    Workload("nofail-0ms", 0, 0, 0, 1_000_000),
    Workload("flaky10-0ms", 10, 0, 0, 200_000),
    Workload("poison1-0ms", 0, 1, 0, 200_000),
    Workload("nofail-1ms", 0, 0, 1, 1_000_000),
    Workload("flaky10-1ms", 10, 0, 1, 200_000),
    Workload("poison1-1ms", 0, 1, 1, 200_000),
]


@dataclasses.dataclass(frozen=True)
class Side:
    name: str
    kind: str  # bare, retryd, spring, pc
    ordering: str
    peer: bool


SIDES = [
    Side("bare", "bare", "-", False),
    Side("retryd-unordered", "retryd", "UNORDERED", False),
    Side("retryd-key", "retryd", "KEY", False),
    Side("spring", "spring", "-", True),
    Side("pc-key", "pc", "KEY", True),
    Side("pc-unordered", "pc", "UNORDERED", True),
]


def in_flight_note(side, work_ms):
    """How a side gets its 16 records in flight, for the table."""
    if side.kind == "bare":
        return "no processor; produce is asynchronous"
    if side.kind == "retryd":
        if work_ms:
            return "grpc max_concurrent_calls 16 per thread (1 primary, 1 retry)"
        return "simulate inline, one call at a time per thread (1 primary, 1 retry)"
    if side.kind == "spring":
        return "concurrency 16 per listener container (input; each retry topic; DLT)"
    return "maxConcurrency 16 (one pool, retries included)"


# ---- processes -------------------------------------------------------------------

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # The child gets SIGKILL when this process (its forking thread: always
    # the main one here) dies, however it dies.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Children:
    """Every long-running process this run started, stopped on the way out."""

    def __init__(self):
        self.procs = []

    def start(self, name, argv, log_path, env=None):
        log = open(log_path, "wb")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_die_with_parent, env=env)
        log.close()
        proc.name = name
        proc.log_path = log_path
        self.procs.append(proc)
        return proc

    def stop(self, proc, grace_s=30):
        """SIGTERM, then SIGKILL after grace_s seconds; returns the exit code."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                say(f"{proc.name} did not stop within {grace_s} s: SIGKILL")
                proc.kill()
                proc.wait(timeout=30)
        if proc in self.procs:
            self.procs.remove(proc)
        return proc.returncode

    def stop_all(self):
        for proc in list(self.procs):
            self.stop(proc, grace_s=10)


def say(text):
    print(f"peers: {text}", file=sys.stderr, flush=True)


def cpu_ticks(pid):
    """User + system clock ticks of every thread of `pid`, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def peak_rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


class Sampler(threading.Thread):
    """(wall time, side ticks, broker ticks) every `period` seconds."""

    def __init__(self, pid, broker_pid, period=0.05):
        super().__init__(daemon=True)
        self.pid, self.broker_pid, self.period = pid, broker_pid, period
        self.samples = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            now = time.time()
            side = cpu_ticks(self.pid)
            broker = cpu_ticks(self.broker_pid) if self.broker_pid else None
            if side is not None:
                self.samples.append((now, side, broker))
            self.done.wait(self.period)

    def stop(self):
        self.done.set()
        self.join(timeout=5)

    def between(self, start, end, index):
        """CPU seconds of column `index` (1 side, 2 broker) from start to end,
        interpolated between the samples around each; None if not covered."""
        points = [(s[0], s[index]) for s in self.samples if s[index] is not None]
        if len(points) < 2 or start < points[0][0] or end > points[-1][0]:
            return None

        def at(t):
            for (t0, v0), (t1, v1) in zip(points, points[1:]):
                if t0 <= t <= t1:
                    return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
            return None

        a, b = at(start), at(end)
        return None if a is None or b is None else (b - a) / CLK_TCK


# ---- the run -----------------------------------------------------------------------


class Run:
    def __init__(self, args):
        self.args = args
        self.partitions = args.partitions  # of the topics of the phase that runs
        self.scale = args.scale  # of its record counts
        self.children = Children()
        self.work = tempfile.mkdtemp(prefix="retryd-peers-")
        self.prefix = f"peers-{os.getpid()}-"
        build = args.build_dir
        self.probe = os.path.join(build, "bench", "peers_probe")
        self.bare = os.path.join(build, "bench", "bare_relay")
        self.retryd = os.path.join(build, "retryd")
        self.downstream = os.path.join(build, "client", "examples", "retryd-example-downstream")
        self.spring_jar = args.spring_jar
        self.pc_jar = args.pc_jar

    # -- scale --
    def scaled(self, n, floor, side=None):
        scale = self.scale
        if side is not None and side.peer:
            scale *= self.args.peer_scale
        return max(floor, int(round(n * scale)))

    # -- peers_probe --
    def probe_run(self, job, *flags, timeout):
        """Runs peers_probe JOB; an exit status it does not give for an answer
        (await: 1 timed out, 3 the side is gone; judge: 1 wrong outcomes)
        raises RuntimeError."""
        argv = [self.probe, job, f"--bootstrap={self.args.bootstrap}", *flags]
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=_die_with_parent)
        answers = {"await": (0, 1, 3), "judge": (0, 1)}.get(job, (0,))
        if proc.returncode not in answers:
            raise RuntimeError(f"peers_probe {job} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def mix_flags(self, w):
        return [f"--flaky_percent={w.flaky_percent}", f"--poison_percent={w.poison_percent}",
                f"--records_per_key={self.args.records_per_key}", "--value_bytes=100"]

    # -- sides --
    def start_downstream(self, tag):
        log = os.path.join(self.work, f"{tag}.downstream.log")
        proc = self.children.start(
            "downstream", [self.downstream, "--port", "0", "--work_ms", "1", "--flaky_attempts", "2",
                           "--perm_retriable"], log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(log) as f:
                for line in f:
                    if line.startswith("listening on "):
                        return proc, line.split()[-1]
            if proc.poll() is not None:
                break
            time.sleep(0.05)  # Another process's output: polled.
        self.children.stop(proc)
        raise RuntimeError(f"the downstream did not start: {tail(log)}")

    def retryd_config(self, tag, topics, side, target):
        if target:
            processor = f'  grpc {{ target: "{target}" max_concurrent_calls: {IN_FLIGHT} }}\n'
        else:
            processor = ("  simulate {\n"
                         f'    rule {{ key_prefix: "perm-" fail_attempts: {ATTEMPTS} }}\n'
                         '    rule { key_prefix: "flaky-" fail_attempts: 2 }\n'
                         "  }\n")
        extra = ""
        if self.args.retryd_max_in_flight:
            extra = f"max_in_flight: {self.args.retryd_max_in_flight}\n"
        text = (f'listen_address: "127.0.0.1:0"\n'
                f'kafka {{ bootstrap_servers: "{self.args.bootstrap}" }}\n'
                f'group_id: "{tag}"\n'
                f'input_topics: "{topics["in"]}"\n'
                f'output_topic: "{topics["out"]}"\n'
                f'dead_letter_topic: "{topics["dlq"]}"\n'
                f"ordering: ORDERING_{side.ordering}\n"
                f"primary_threads: 1\n"
                f"shutdown_timeout_ms: 10000\n"
                f"{extra}"
                f'retry {{\n  topic: "{topics["retry"]}"\n  threads: 1\n'
                f"  max_attempts: {ATTEMPTS}\n"
                f"  backoff {{ initial_ms: {BACKOFF_INITIAL_MS} multiplier: {BACKOFF_MULTIPLIER} "
                f"max_ms: {BACKOFF_MAX_MS} }}\n}}\n"
                f"processor {{\n{processor}}}\n")
        path = os.path.join(self.work, f"{tag}.textproto")
        with open(path, "w") as f:
            f.write(text)
        return path

    def peer_args(self, tag, topics, target):
        args = [f"--peer.bootstrap-servers={self.args.bootstrap}",
                f"--peer.input-topic={topics['in']}", f"--peer.output-topic={topics['out']}",
                f"--peer.dlq-topic={topics['dlq']}", f"--peer.group-id={tag}",
                f"--peer.attempts={ATTEMPTS}", f"--peer.backoff.initial-ms={BACKOFF_INITIAL_MS}",
                f"--peer.backoff.multiplier={BACKOFF_MULTIPLIER}",
                f"--peer.backoff.max-ms={BACKOFF_MAX_MS}", f"--peer.concurrency={IN_FLIGHT}",
                "--peer.processing-ms=0"]
        if target:
            args.append(f"--peer.downstream={target}")
        return args

    def start_side(self, side, tag, topics, target):
        log = os.path.join(self.work, f"{tag}.log")
        heap = self.args.heap
        jvm = ["java", f"-Xms{heap}", f"-Xmx{heap}", "-jar"]
        if side.kind == "bare":
            argv = [self.bare, f"--bootstrap={self.args.bootstrap}", f"--input={topics['in']}",
                    f"--output={topics['out']}", f"--group={tag}"]
        elif side.kind == "retryd":
            argv = [self.retryd, f"--config={self.retryd_config(tag, topics, side, target)}"]
        elif side.kind == "spring":
            argv = jvm + [self.spring_jar, *self.peer_args(tag, topics, target),
                          f"--peer.retry-topic-partitions={self.partitions}"]
        else:
            argv = jvm + [self.pc_jar, *self.peer_args(tag, topics, target),
                          f"--peer.ordering={side.ordering}", "--peer.backoff.jitter=full"]
        return self.children.start(side.name, argv, log)

    # -- one side on one workload --
    def run_side(self, w, side):
        a = self.args
        tag = f"{self.prefix}{w.name}-{side.name}"
        topics = {"in": f"{tag}.in", "out": f"{tag}.out", "dlq": f"{tag}.dlq",
                  "retry": f"{tag}.retry"}
        records = self.scaled(w.records, 1000, side)
        warmup = self.scaled(a.warmup, 1000)
        paced = self.scaled(a.paced, 500)
        row = {"workload": w.name, "side": side.name, "ordering": side.ordering,
               "in_flight": in_flight_note(side, w.work_ms), "records": records,
               "warmup": warmup, "paced": paced, "status": "failed"}
        started = time.monotonic()
        proc = downstream = sampler = None
        try:
            create = [topics["in"], topics["out"], topics["dlq"]]
            if side.kind == "retryd":
                create.append(topics["retry"])
            self.probe_run("topics", f"--create={','.join(create)}",
                           f"--log_append_time={topics['out']},{topics['dlq']}",
                           f"--partitions={self.partitions}", timeout=120)
            self.probe_run("produce", f"--topic={topics['in']}", f"--warmup={warmup}",
                           f"--records={records}", *self.mix_flags(w), timeout=600)
            target = None
            if w.work_ms:
                downstream, target = self.start_downstream(tag)
            proc = self.start_side(side, tag, topics, target)
            sampler = Sampler(proc.pid, a.broker_pid)
            sampler.start()
            say(f"{w.name} {side.name}: {warmup} warm-up + {records} records")
            backlog = warmup + records
            # Bounded by what the slowest side could need: 200 records/s.
            limit = 120 + backlog / 200
            done = self.probe_run("await", f"--topics={topics['out']},{topics['dlq']}",
                                  f"--count={backlog}", f"--timeout_s={limit}",
                                  f"--pid={proc.pid}", timeout=limit + 60)
            if done.returncode != 0:
                row["status"] = ("exited" if done.returncode == 3 else "timed out") + \
                    f" with {done.stdout.strip()} of {backlog} outcomes"
                raise StopSide()
            self.probe_run("pace", f"--topic={topics['in']}", f"--records={paced}",
                           f"--rate={a.rate}", *self.mix_flags(w), timeout=60 + paced / a.rate * 2)
            limit = 120
            done = self.probe_run("await", f"--topics={topics['out']},{topics['dlq']}",
                                  f"--count={backlog + paced}", f"--timeout_s={limit}",
                                  f"--pid={proc.pid}", timeout=limit + 60)
            judged = self.probe_run("judge", f"--input={topics['in']}",
                                    f"--output={topics['out']}", f"--dlq={topics['dlq']}",
                                    f"--await_s={a.straggler_s}", f"--pid={proc.pid}",
                                    timeout=900)
            verdict = json.loads(judged.stdout)
            with open(os.path.join(self.work, f"{tag}.verdict.json"), "w") as f:
                f.write(judged.stdout)
            row["peak_rss_mib"] = peak_rss_mib(proc.pid)
            self.fill(row, verdict, sampler)
            row["status"] = "ok" if verdict["ok"] else "WRONG OUTCOMES"
        except StopSide:
            pass
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            row["status"] = f"failed: {e}"
        finally:
            if sampler:
                sampler.stop()
            if proc:
                code = self.children.stop(proc)
                if row["status"] != "ok":
                    say(f"{side.name} exited {code}; its log ends:\n{tail(proc.log_path)}")
            if downstream:
                self.children.stop(downstream)
            try:
                self.probe_run("delete", f"--prefix={tag}", timeout=120)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                say(f"deleting {tag}*: {e}")
        row["seconds"] = round(time.monotonic() - started)
        say(f"{w.name} {side.name}: {row['status']} in {row['seconds']} s")
        return row

    def fill(self, row, v, sampler):
        for k in ("lost", "wrong_outcome", "duplicates", "strays", "keys", "keys_out_of_order"):
            row[k] = v[k]
        first, last, last_healthy = v["first_ms"] / 1000, v["last_ms"] / 1000, \
            v["last_healthy_ms"] / 1000
        if v["measured"] and last > first:
            row["window_s"] = last - first
            row["all_rps"] = v["done_in_window"] / (last - first)
            cpu = sampler.between(first, last, 1)
            broker = sampler.between(first, last, 2)
            if cpu is not None:
                row["cpu_s_per_m"] = cpu / v["done_in_window"] * 1e6
                row["side_cores"] = cpu / (last - first)
            if broker is not None:
                row["broker_cores"] = broker / (last - first)
        if v["measured_healthy"] and last_healthy > first:
            row["healthy_rps"] = v["healthy_done_in_window"] / (last_healthy - first)
        if v["paced_healthy"]:
            row["p50_ms"], row["p99_ms"] = v["latency_p50_ms"], v["latency_p99_ms"]

    # -- all of it --
    def missing_interfaces(self, workloads, sides):
        """What the 1 ms workloads need and this build lacks, by side kind:
        --peer.downstream in each jar, the downstream's --flaky_attempts
        and --perm_retriable (for every side)."""
        if not any(w.work_ms for w in workloads):
            return {}
        missing = {}
        helped = subprocess.run([self.downstream, "--helpfull"], capture_output=True, text=True,
                                timeout=30)
        flags = [f"--{flag}" for flag in ("flaky_attempts", "perm_retriable")
                 if f"-{flag}" not in helped.stdout + helped.stderr]
        if flags:
            for side in sides:
                missing[side.kind] = f"the example downstream has no {' or '.join(flags)}"
        for kind, jar in (("spring", self.spring_jar), ("pc", self.pc_jar)):
            if any(s.kind == kind for s in sides) and kind not in missing and \
                    not jar_mentions(jar, b"peer.downstream"):
                missing[kind] = f"{os.path.basename(jar)} has no --peer.downstream"
        return missing

    def warm_up_broker(self, records=200_000):
        """Writes and reads a topic before the first side, so that the first
        side does not meet a broker that has served nothing yet."""
        topic = f"{self.prefix}broker-warm-up"
        self.probe_run("topics", f"--create={topic}", f"--partitions={PARTITIONS}", timeout=120)
        try:
            self.probe_run("produce", f"--topic={topic}", f"--records={records}", timeout=600)
            self.probe_run("judge", f"--input={topic}", f"--output={topic}", f"--dlq={topic}",
                           timeout=600)
        finally:
            self.probe_run("delete", f"--prefix={topic}", timeout=120)

    def main(self, workloads, sides):
        missing = self.missing_interfaces(workloads, sides)
        for kind, why in missing.items():
            say(f"1 ms workloads skipped for {kind}: {why}")
        rows = []
        started = time.monotonic()
        self.warm_up_broker()
        for w in workloads:
            for side in sides:
                if side.kind == "bare" and (w.work_ms or w.flaky_percent or w.poison_percent):
                    continue  # The baseline of the no-failure, 0 ms case only.
                if w.work_ms and side.kind in missing:
                    rows.append({"workload": w.name, "side": side.name, "ordering": side.ordering,
                                 "in_flight": in_flight_note(side, w.work_ms),
                                 "status": f"skipped: {missing[side.kind]}"})
                    continue
                rows.append(self.run_side(w, side))
        say(f"all runs done in {round(time.monotonic() - started)} s")
        return rows

    def b6(self, partitions, sides):
        """B6: `sides` on the no-failure, 0 ms workload with every topic at
        each count of `partitions`, --b6-scale of its records."""
        w = next(w for w in WORKLOADS if w.name == "nofail-0ms")
        rows = {}
        self.scale = self.args.scale * self.args.b6_scale
        for n in partitions:
            self.partitions = n
            rows[n] = [self.run_side(w, side) for side in sides]
        self.partitions, self.scale = self.args.partitions, self.args.scale
        return rows


class StopSide(Exception):
    pass


def tail(path, lines=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def jar_mentions(jar, text):
    """Whether the peer's own classes or resources in `jar` hold `text`."""
    try:
        with zipfile.ZipFile(jar) as zf:
            return any(text in zf.read(name) for name in zf.namelist()
                       if "retryd/peers/" in name or name.endswith("application.properties"))
    except (OSError, zipfile.BadZipFile):
        return False


# ---- results -------------------------------------------------------------------------

COLUMNS = ["workload", "side", "ordering", "in_flight", "records", "warmup", "paced",
           "window_s", "healthy_rps", "all_rps", "p50_ms", "p99_ms", "cpu_s_per_m", "side_cores",
           "peak_rss_mib", "broker_cores", "lost", "wrong_outcome", "duplicates", "strays",
           "keys", "keys_out_of_order", "healthy_x_bare", "cpu_x_bare", "healthy_x_best_peer",
           "cpu_x_best_peer", "best_peer_healthy", "best_peer_cpu", "status", "seconds"]


def add_ratios(rows):
    sides = {s.name: s for s in SIDES}
    for workload in {r["workload"] for r in rows}:
        mine = [r for r in rows if r["workload"] == workload]
        bare = next((r for r in mine if r["side"] == "bare" and r["status"] == "ok"), None)
        peers = [r for r in mine if sides[r["side"]].peer and r["status"] == "ok"]
        fast = max(peers, key=lambda r: r.get("healthy_rps") or 0, default=None)
        lean = min(peers, key=lambda r: r.get("cpu_s_per_m") or float("inf"), default=None)
        for r in mine:
            if r["status"] != "ok":
                continue
            if bare:
                r["healthy_x_bare"] = ratio(r.get("healthy_rps"), bare.get("healthy_rps"))
                r["cpu_x_bare"] = ratio(r.get("cpu_s_per_m"), bare.get("cpu_s_per_m"))
            if fast:
                r["healthy_x_best_peer"] = ratio(r.get("healthy_rps"), fast.get("healthy_rps"))
                r["best_peer_healthy"] = fast["side"]
            if lean:
                r["cpu_x_best_peer"] = ratio(r.get("cpu_s_per_m"), lean.get("cpu_s_per_m"))
                r["best_peer_cpu"] = lean["side"]


B6_COLUMNS = ["partitions", "records", "bare_cpu_s_per_m", "retryd_cpu_s_per_m", "cpu_x_bare",
              "bare_healthy_rps", "retryd_healthy_rps", "healthy_x_bare", "bare_peak_rss_mib",
              "retryd_peak_rss_mib"]


def b6_summary(by_partitions):
    """One row per partition count: retryd (unordered) against the bare relay."""
    rows = []
    for n in sorted(by_partitions):
        mine = by_partitions[n]
        bare = next((r for r in mine if r["side"] == "bare" and r["status"] == "ok"), None)
        ours = next((r for r in mine if r["side"] == "retryd-unordered" and r["status"] == "ok"),
                    None)
        if bare is None or ours is None:
            continue
        rows.append({"partitions": n, "records": ours["records"],
                     "bare_cpu_s_per_m": bare.get("cpu_s_per_m"),
                     "retryd_cpu_s_per_m": ours.get("cpu_s_per_m"),
                     "cpu_x_bare": ratio(ours.get("cpu_s_per_m"), bare.get("cpu_s_per_m")),
                     "bare_healthy_rps": bare.get("healthy_rps"),
                     "retryd_healthy_rps": ours.get("healthy_rps"),
                     "healthy_x_bare": ratio(ours.get("healthy_rps"), bare.get("healthy_rps")),
                     "bare_peak_rss_mib": bare.get("peak_rss_mib"),
                     "retryd_peak_rss_mib": ours.get("peak_rss_mib")})
    return rows


def b6_markdown(rows):
    lines = ["## B6: partitions", "",
             "The no-failure, 0 ms workload with every topic at P partitions: retryd "
             "(unordered) against the bare relay in the same run. The target: retryd's CPU "
             "per record at most 1.1 x the bare relay's at every P.", "",
             "| partitions | records | CPU s per M: bare / retryd | CPU x bare "
             "| healthy rec/s: bare / retryd | rec/s x bare | peak RSS MiB: bare / retryd |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(
            f"| {r['partitions']} | {cell(r['records'], 0)} | {cell(r['bare_cpu_s_per_m'], 1)} / "
            f"{cell(r['retryd_cpu_s_per_m'], 1)} | {cell(r['cpu_x_bare'], 2)} "
            f"| {cell(r['bare_healthy_rps'], 0)} / {cell(r['retryd_healthy_rps'], 0)} "
            f"| {cell(r['healthy_x_bare'], 2)} | {cell(r['bare_peak_rss_mib'], 0)} / "
            f"{cell(r['retryd_peak_rss_mib'], 0)} |")
    lines.append("")
    return "\n".join(lines)


def write_plain_csv(rows, path, columns):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for r in rows:
            v = [r.get(c) for c in columns]
            writer.writerow(["-" if x is None else f"{x:.3f}" if isinstance(x, float) else x
                             for x in v])
    return path


def ratio(a, b):
    return a / b if a and b else None


def cell(value, digits):
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_csv(rows, out, workload, name_prefix="peers"):
    path = os.path.join(out, f"{name_prefix}_{workload}.csv")
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            out_row = []
            for c in COLUMNS:
                v = r.get(c)
                # No commas in a cell: gnuplot reads the file (bench/charts.sh).
                out_row.append("-" if v is None else
                               f"{v:.3f}" if isinstance(v, float) else str(v).replace(",", ";"))
            writer.writerow(out_row)
    return path


def markdown(rows, workloads, meta, rate):
    lines = ["# retryd against its peers", "", meta, ""]
    for w in workloads:
        mine = [r for r in rows if r["workload"] == w.name]
        if not mine:
            continue
        r0 = next((r for r in mine if "records" in r), None)
        if r0 is None:
            continue
        lines += [f"## {w.name}", "",
                  f"Measured records as the records column says (the JVM peers get "
                  f"--peer-scale of the others' count), after {r0['warmup']:,} warm-up ones; "
                  f"{r0['paced']:,} paced at {rate:g} records/s for latency.", "",
                  "| side | in flight | records | window s | healthy rec/s | all rec/s | p50 / p99 ms "
                  "| CPU s per M | peak RSS MiB | broker cores | lost / wrong / dup "
                  "| keys out of order | × bare: rec/s, CPU | × best peer: rec/s, CPU | status |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
                  "| --- | --- |"]
        for r in mine:
            lines.append(
                f"| {r['side']} | {r['in_flight']} | {cell(r.get('records'), 0)} "
                f"| {cell(r.get('window_s'), 1)} "
                f"| {cell(r.get('healthy_rps'), 0)} "
                f"| {cell(r.get('all_rps'), 0)} | {cell(r.get('p50_ms'), 0)} / "
                f"{cell(r.get('p99_ms'), 0)} | {cell(r.get('cpu_s_per_m'), 1)} "
                f"| {cell(r.get('peak_rss_mib'), 0)} | {cell(r.get('broker_cores'), 2)} "
                f"| {cell(r.get('lost'), 0)} / {cell(r.get('wrong_outcome'), 0)} / "
                f"{cell(r.get('duplicates'), 0)} | {cell(r.get('keys_out_of_order'), 0)} of "
                f"{cell(r.get('keys'), 0)} | {cell(r.get('healthy_x_bare'), 2)}, "
                f"{cell(r.get('cpu_x_bare'), 2)} | {cell(r.get('healthy_x_best_peer'), 2)}, "
                f"{cell(r.get('cpu_x_best_peer'), 2)} | {r['status']} |")
        if any(r.get("window_s") is not None and r["window_s"] < 2 for r in mine):
            lines += ["", "A window under 2 s (a small --scale) holds too few records and CPU "
                          "samples: its rates and CPU per record are rough."]
        best = next((r for r in mine if r.get("best_peer_healthy")), None)
        if best:
            lines += ["", f"Best peer: {best['best_peer_healthy']} by healthy records/s, "
                          f"{best['best_peer_cpu']} by CPU per record."]
        lines.append("")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True, help="the broker, host:port")
    p.add_argument("--broker-pid", type=int, default=0,
                   help="the broker's process, for its CPU share (0: not measured)")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "peers"))
    p.add_argument("--scale", type=float, default=1.0,
                   help="fraction of every record count (e.g. 0.05 for a quick run)")
    p.add_argument("--peer-scale", type=float, default=0.1,
                   help="fraction of the others' measured records the JVM peers get (1: as many)")
    p.add_argument("--b6-partitions", default="256,1024",
                   help="partition counts B6 runs the bare relay and retryd at, after the "
                        "workloads (empty: none)")
    p.add_argument("--b6-scale", type=float, default=0.3,
                   help="fraction of the no-failure workload's records B6 runs at each count")
    p.add_argument("--sides", default=",".join(s.name for s in SIDES))
    p.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS))
    p.add_argument("--warmup", type=int, default=20_000,
                   help="warm-up records before the measured ones (scaled, at least 1,000)")
    p.add_argument("--paced", type=int, default=2_000,
                   help="paced records for latency (scaled, at least 500)")
    p.add_argument("--rate", type=float, default=200,
                   help="paced records per second: below every side's rate with flaky keys")
    p.add_argument("--records-per-key", type=int, default=10)
    p.add_argument("--partitions", type=int, default=PARTITIONS,
                   help="partitions of every topic a side reads and writes (B6: 16, 256, 1024); "
                        "other than 16, the files are named peers_p<N>...")
    p.add_argument("--heap", default="1g", help="the JVM peers' heap, -Xms and -Xmx alike")
    p.add_argument("--spring-jar",
                   default=os.path.join(HERE, "spring-retry-topic", "target", "spring-retry-topic.jar"))
    p.add_argument("--pc-jar",
                   default=os.path.join(HERE, "parallel-consumer", "target", "parallel-consumer.jar"))
    p.add_argument("--retryd-max-in-flight", type=int, default=0,
                   help="retryd's max_in_flight (0: its default)")
    p.add_argument("--straggler-s", type=float, default=30,
                   help="how long the judge waits for records still missing")
    p.add_argument("--keep-logs", action="store_true", help="keep every process's log")
    args = p.parse_args()

    def pick(names, known, what):
        by_name = {k.name: k for k in known}
        chosen = []
        for n in filter(None, names.split(",")):
            if n not in by_name:
                raise SystemExit(f"peers: unknown {what} '{n}'; known: {', '.join(by_name)}")
            chosen.append(by_name[n])
        return chosen

    sides = pick(args.sides, SIDES, "side")
    workloads = pick(args.workloads, WORKLOADS, "workload")
    try:
        b6_partitions = [int(n) for n in filter(None, args.b6_partitions.split(","))]
    except ValueError:
        raise SystemExit(f"peers: --b6-partitions takes counts, e.g. 256,1024; "
                         f"got '{args.b6_partitions}'")
    if any(n < 1 for n in b6_partitions) or not 0 < args.peer_scale <= 1 or \
            not 0 < args.b6_scale <= 1 or args.scale <= 0:
        raise SystemExit("peers: partitions must be at least 1; --scale above 0; "
                         "--peer-scale and --b6-scale in (0, 1]")
    os.makedirs(args.out, exist_ok=True)

    run = Run(args)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    status = 0
    b6_sides = [s for s in SIDES if s.name in ("bare", "retryd-unordered")]
    b6_rows = {}
    try:
        rows = run.main(workloads, sides)
        if b6_partitions:
            b6_rows = run.b6(b6_partitions, b6_sides)
    except KeyboardInterrupt:
        say("interrupted: stopping what runs")
        rows, status = None, 130
    finally:
        run.children.stop_all()
        if args.keep_logs:
            say(f"logs in {run.work}")
        else:
            shutil.rmtree(run.work, ignore_errors=True)
    if rows is None:
        return status

    add_ratios(rows)
    name_prefix = "peers" if args.partitions == PARTITIONS else f"peers_p{args.partitions}"
    meta = (f"Apache Kafka at {args.bootstrap}; {args.partitions} partitions a topic; "
            f"scale {args.scale}, the JVM peers x{args.peer_scale:g}; {ATTEMPTS} attempts, backoff "
            f"{BACKOFF_INITIAL_MS} ms x{BACKOFF_MULTIPLIER:g} up to {BACKOFF_MAX_MS} ms; "
            f"{args.records_per_key} records per key; paced at {args.rate:g} records/s; "
            f"JVM heap {args.heap}.")
    for w in workloads:
        mine = [r for r in rows if r["workload"] == w.name]
        if mine:
            say(f"wrote {write_csv(mine, args.out, w.name, name_prefix)}")
    text = markdown(rows, workloads, meta, args.rate)
    if b6_rows:
        for n, mine in b6_rows.items():
            add_ratios(mine)
            say(f"wrote {write_csv(mine, args.out, 'nofail-0ms', f'peers_p{n}')}")
        # The workloads' own run at their partition count, beside B6's.
        here = [r for r in rows if r["workload"] == "nofail-0ms"]
        if here and args.partitions not in b6_rows:
            b6_rows[args.partitions] = here
        summary = b6_summary(b6_rows)
        say(f"wrote {write_plain_csv(summary, os.path.join(args.out, 'b6_partitions.csv'), B6_COLUMNS)}")
        text += "\n" + b6_markdown(summary)
        rows = rows + [r for n, mine in b6_rows.items() if n != args.partitions for r in mine]
    with open(os.path.join(args.out, f"{name_prefix}.md"), "w") as f:
        f.write(text)
    print(text)
    return 0 if all(r["status"] == "ok" or r["status"].startswith("skipped") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
