#!/usr/bin/python3
"""Broker faults on a three-node Kafka: nothing lost, every partition
committed, health that tells the truth, and a clean stop.

Starts its own cluster (scripts/kafka.sh prepare, then one `kafka.sh node`
per node, each the child of this test so that it dies with it): three
combined broker+controller nodes on loopback, every topic with replication
factor 3 and min.insync.replicas=2. retryd runs on it with 2 retry threads
and the simulate processor over make_records' kinds (10 % flaky, 1 %
poison), and each round does to the cluster, while records flow:

  1. leader kill: the leader of an input partition is SIGKILLed while a
     batch is produced, then started again on the same data;
  2. stopped broker: the coordinator of retryd's group is SIGSTOPped for
     longer than both the consumer session (2 s) and the broker's own
     session with the controller (broker.session.timeout.ms, 9 s), so its
     group members and its partitions move, then SIGCONTinued. Through
     both, retryd's standard health service (grpc.health.v1, service "")
     must answer SERVING every time it is asked: two nodes of three serve;
  3. all nodes down: once a batch is acknowledged (retryd still working
     through its retries), every node is SIGKILLed; the health service
     must answer NOT_SERVING within --health-timeout seconds; the nodes start again and it must
     answer SERVING.

After each round a batch goes to every partition and both of retryd's
groups (input and retry topic) must commit every partition to its end:
none is left paused or uncommitted. Then SIGTERM must end retryd with exit
status 0, and every input record must have its outcome (the output, or the
DLQ for poison keys) by its retryd-original-partition/-offset headers: 0
lost. Duplicates are allowed (at-least-once) and reported. The producer
here retries through the faults, so a record may be written to the input
twice; each copy is then judged on its own.

RETRYD_FAULT_ROUNDS sets the default of --rounds (1, about 90 s on 2 busy
cores; each more round about 65 s). Exit status 0 passed, 1 failed.
"""

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import grpc
from kafka import KafkaProducer
from kafka.errors import KafkaError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KAFKA_SH = os.path.join(ROOT, "scripts", "kafka.sh")
STARTED = b"Kafka Server started"
NODE_LINE = re.compile(r"^node (\d+) port (\d+)$")

# The broker's own session with the controller (broker.session.timeout.ms,
# Kafka's default): a node silent for longer is fenced and its leaderships
# move.
BROKER_SESSION_S = 9.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--rounds", type=int,
                   default=int(os.environ.get("RETRYD_FAULT_ROUNDS", "1")),
                   help="rounds of the three faults (RETRYD_FAULT_ROUNDS, else 1)")
    p.add_argument("--batch", type=int, default=1500, help="records per batch (1500)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of every topic (6)")
    p.add_argument("--health-timeout", type=float, default=30.0,
                   help="seconds for the health service to follow Kafka (30)")
    p.add_argument("--settle-timeout", type=float, default=120.0,
                   help="seconds for the groups to commit everything after a fault (120)")
    return p


# ---- The cluster ---------------------------------------------------------------


class Node:
    """One Kafka node, a child of this test: started, killed, stopped and
    continued at will, always on the same data and port."""

    def __init__(self, directory, node_id, port):
        self.dir, self.id, self.port = directory, node_id, port
        self.log = os.path.join(directory, f"node-{node_id}", "server.log")
        self.out = os.path.join(directory, f"node-{node_id}", "stdout.log")
        self.proc = None
        self.log_from = 0  # server.log's size when this run started

    def start(self):
        try:
            self.log_from = os.path.getsize(self.log)
        except OSError:
            self.log_from = 0
        self.proc = real_kafka.start(
            ["bash", KAFKA_SH, "node", "--dir", self.dir, "--id", str(self.id)], self.out)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def started(self):
        """True once this run logged that it serves; Failure if it died."""
        if not self.alive():
            raise Failure(f"node {self.id} exited during start-up:\n"
                          f"{real_kafka.tail(self.log)}\n{real_kafka.tail(self.out, 10)}")
        with open(self.log, "rb") as f:
            f.seek(self.log_from)
            return STARTED in f.read()

    def bind_failed(self):
        for path in (self.log, self.out):
            try:
                with open(path, "rb") as f:
                    if re.search(rb"BindException|Address already in use", f.read()):
                        return True
            except OSError:
                pass
        return False

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def cleanup(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGCONT)
            real_kafka.stop(self.proc, signal.SIGKILL, 10)


class ThreeNodes:
    """The test's own three-node cluster under `directory`."""

    def __init__(self, directory, say):
        self.dir, self.say = directory, say
        self.nodes = {}
        self.bootstrap = None

    def prepare_and_start(self, timeout=180):
        for attempt in range(1, 4):
            done = subprocess.run(["bash", KAFKA_SH, "prepare", "--nodes", "3", "--dir", self.dir],
                                  capture_output=True, timeout=300)
            if done.returncode != 0:
                raise Failure(f"kafka.sh prepare: status {done.returncode}: "
                              f"{done.stderr.decode(errors='replace')[-2000:]}")
            self.nodes = {}
            for line in done.stdout.decode().splitlines():
                if line.startswith("bootstrap: "):
                    self.bootstrap = line[len("bootstrap: "):]
                elif m := NODE_LINE.match(line):
                    self.nodes[int(m.group(1))] = Node(self.dir, int(m.group(1)), int(m.group(2)))
            if len(self.nodes) != 3 or not self.bootstrap:
                raise Failure(f"kafka.sh prepare printed no cluster:\n{done.stdout.decode()}")
            for node in self.nodes.values():
                node.start()
            try:
                self.wait_started(self.nodes.values(), timeout)
                return
            except Failure:
                if not any(n.bind_failed() for n in self.nodes.values()):
                    raise
                self.say(f"a port was taken before a node bound it; prepare again "
                         f"(attempt {attempt + 1} of 3)")
                self.cleanup()
        raise Failure("no free ports for three nodes after 3 attempts")

    def wait_started(self, nodes, timeout):
        nodes = list(nodes)
        real_kafka.wait_until(lambda: all(n.started() for n in nodes), timeout,
                              "node(s) " + ", ".join(str(n.id) for n in nodes) + " serving")

    def restart(self, nodes, timeout=180):
        for node in nodes:
            node.start()
        self.wait_started(nodes, timeout)

    def check(self):
        """Failure if a node that should run died on its own."""
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is not None and node.proc.returncode > 0:
                raise Failure(f"node {node.id} exited on its own, status {node.proc.returncode}:"
                              f"\n{real_kafka.tail(node.log)}")

    def cleanup(self):
        for node in self.nodes.values():
            node.cleanup()


class FaultCluster(real_kafka.Cluster):
    """real_kafka.Cluster on the test's own nodes, whose producer retries
    through a leader's loss (about BROKER_SESSION_S) and a stopped node: a
    batch waiting for a leader expires only after request_timeout_ms."""

    def producer(self, **kw):
        return KafkaProducer(acks="all", retries=1000, retry_backoff_ms=250,
                             request_timeout_ms=30000, max_block_ms=120000,
                             client_id="retryd-test-producer", **self.client, **kw)


# ---- retryd's health, as a prober sees it ---------------------------------------


def health(address):
    """grpc.health.v1.Health/Check for the service "": SERVING, NOT_SERVING,
    UNKNOWN, or the RPC's error code. A raw call: the request is empty and
    the answer is field 1, the status enum."""
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            answer = check(b"", timeout=5)
        except grpc.RpcError as e:
            return e.code().name
    return {b"\x08\x01": "SERVING", b"\x08\x02": "NOT_SERVING"}.get(answer, "UNKNOWN")


class HealthWatcher(threading.Thread):
    """Asks retryd's health every half second while `watching` is set, and
    keeps each answer that was not SERVING with its time."""

    def __init__(self, address):
        super().__init__(name="health", daemon=True)
        self.address = address
        self.watching = threading.Event()
        self.done = threading.Event()
        self.asked = 0
        self.bad = []  # (monotonic time, answer)

    def run(self):
        while not self.done.is_set():
            if self.watching.is_set():
                answer = health(self.address)
                self.asked += 1
                if answer != "SERVING":
                    self.bad.append((time.monotonic(), answer))
            self.done.wait(0.5)  # The probe's pace, not a wait for a state.

    def stop(self):
        self.done.set()
        self.join(10)


def wait_health(address, want, timeout, check):
    began = time.monotonic()
    real_kafka.wait_until(lambda: health(address) == want, timeout, f"health {want}",
                          poll=0.5, check=check)
    return time.monotonic() - began


def produce(cluster, topic, records, seconds, resend=False):
    """Starts producing `records` to `topic` over `seconds` (PacedProducer)."""
    producer = real_kafka.PacedProducer(cluster, topic, records, seconds, resend=resend)
    producer.start()
    return producer


# ---- The scenario ---------------------------------------------------------------


def on_three_nodes(args, work, say, run_on):
    """Starts the three nodes, points real_kafka at them, calls
    run_on(args, work, say, nodes, figures) and says its figures; the nodes
    end with it."""
    nodes = ThreeNodes(os.path.join(work, "kafka"), say)
    began = time.monotonic()
    figures = []
    try:
        nodes.prepare_and_start()
        say(f"three nodes serving at {nodes.bootstrap} after {time.monotonic() - began:.1f} s")
        os.environ["RETRYD_TEST_KAFKA"] = nodes.bootstrap
        os.environ["RETRYD_TEST_KAFKA_OWNED"] = "1"
        os.environ.pop("RETRYD_TEST_KAFKA_PROPERTIES", None)
        status = run_on(args, work, say, nodes, figures)
    finally:
        nodes.cleanup()
    for line in figures:
        say("  " + line)
    return status


class Scenario:
    """retryd on the three nodes, as every fault test runs it: its topics
    and group (input, retry, output, dlq; --partitions each), 2 retry
    threads and the simulate processor over make_records' kinds, the
    records produced so far, and the checks made of them. Use as a context
    manager (the topics and groups are deleted at its end). `configs_of`
    gives topics configs of their own (real_kafka.TestNames); `session_ms`
    the consumer session, if not real_kafka.session_timeout_ms's."""

    def __init__(self, args, work, say, nodes, cluster, test, retryd_args=(), configs_of=None,
                 session_ms=None, max_in_flight=500):
        if cluster.brokers != 3:
            raise Failure(f"the cluster has {cluster.brokers} brokers, not 3")
        self.args, self.work, self.say, self.nodes, self.cluster = args, work, say, nodes, cluster
        self.rng = random.Random(args.seed)
        n = args.partitions
        self.names = real_kafka.TestNames(cluster, test, ["input", "retry", "output", "dlq"], n,
                                          groups=["g"], configs_of=configs_of)
        self.session_ms = session_ms
        self.max_in_flight = max_in_flight
        group = self.names.group["g"]
        self.pairs = [(group, self.names.topic["input"], n),
                      (group + ".retry", self.names.topic["retry"], n)]
        self.retryd_args = list(retryd_args)
        self.retryd = None
        self.records = []  # (key, where, value) of every record produced
        self._serial = 0

    def __enter__(self):
        self.names.__enter__()
        config = os.path.join(self.work, "retryd.textproto")
        real_kafka.retryd_config(config, self.cluster, self.names, self.work, """
commit_interval_ms: 500
max_in_flight: %d
""" % self.max_in_flight + real_kafka.simulate_body(self.names, self.args.seed, 2, 4, 500), session_ms=self.session_ms)
        self.retryd = real_kafka.Retryd(self.args.retryd, config, self.work,
                                        args=self.retryd_args)
        return self

    def __exit__(self, *exc):
        return self.names.__exit__(*exc)

    def batch(self):
        """--batch records of make_records' kinds, kept for the verdict."""
        records = real_kafka.make_records(self.args.batch, self.rng)
        # Keys unique over the whole run, not only within a batch.
        records = [(f"{key}-b{self._serial}", where, value) for key, where, value in records]
        self._serial += 1
        self.records.extend(records)
        return records

    def check(self):
        self.retryd.check()
        self.nodes.check()

    def settle(self, what):
        """Until both groups committed every partition to its end."""
        # A reader of its own each time: one made before all nodes went
        # down could wait out its request timeout on a dead connection.
        t0 = time.monotonic()
        groups = real_kafka.Groups(self.cluster, self.pairs)
        try:
            groups.wait_done(self.args.settle_timeout, self.check)
        finally:
            groups.close()
        took = time.monotonic() - t0
        self.say(f"{what}: every partition of both groups committed to its end ({took:.1f} s)")
        return took

    def stop(self):
        """SIGTERM: retryd must exit 0."""
        status = self.retryd.stop(60)
        if status != 0:
            raise Failure(f"SIGTERM ended retryd with status {status}:\n"
                          f"{real_kafka.tail(self.retryd.log())}")
        self.say("SIGTERM: retryd exited 0")

    def verdict(self, figures):
        """Every input record has its outcome (the output, or the DLQ for
        poison keys) by its retryd-original-partition/-offset headers: the
        exit status, 0 when none is lost."""
        inputs, copies, unknown = real_kafka.read_outcomes(self.cluster, self.names)
        destination = {k.encode(): where for k, where, _ in self.records}
        failures = []
        strangers = [c for c, rec in inputs.items() if rec.key not in destination]
        if strangers:
            failures.append(f"{len(strangers)} input records not produced by the test")
        produced = {rec.key for rec in inputs.values()}
        missing = [k for k in destination if k not in produced]
        if missing:
            failures.append(f"{len(missing)} acknowledged records missing from the input, "
                            f"e.g. {missing[:5]}")
        gone = real_kafka.lost(inputs, copies, lambda rec: destination.get(rec.key, "output"))
        if gone:
            failures.append(f"LOST {len(gone)} records, e.g. {gone[:10]}")
        if unknown:
            failures.append(f"{unknown} outcome records name no input record")
        dups, extra = real_kafka.duplicates(copies)
        errors = self.retryd.error_lines()
        figures.append(f"{len(self.records)} records produced, {len(inputs)} in the input; "
                       f"lost {len(gone)}; duplicates {dups} ({extra} extra copies); "
                       f"{len(errors)} ERROR lines in retryd's log")
        return real_kafka.verdict_status(self.say, failures, self.retryd.log())


def run(args, work, say):
    return on_three_nodes(args, work, say, run_on)


def run_on(args, work, say, nodes, figures):
    cluster = FaultCluster()
    n = args.partitions
    with Scenario(args, work, say, nodes, cluster, "faults") as scenario:
        names, retryd = scenario.names, scenario.retryd
        batch, check, settle = scenario.batch, scenario.check, scenario.settle

        def leader_of(topic, partition):
            for t in cluster.admin.describe_topics([topic]):
                for p in t["partitions"]:
                    if p["partition"] == partition:
                        return p["leader"]
            raise Failure(f"no leader for {topic}-{partition}")

        def coordinator_of(group):
            try:
                return cluster.admin._find_coordinator_ids([group])[group]
            except (KafkaError, AttributeError, KeyError) as e:
                say(f"coordinator of {group} unknown ({e!r}): the input's leader instead")
                return leader_of(names.topic["input"], 0)

        watcher = None
        try:
            retryd.start()
            address = retryd.address()
            retryd.wait_assigned(check=check)
            wait_health(address, "SERVING", args.health_timeout, check)
            first = produce(cluster, names.topic["input"], batch(), 4)
            first.finish(120)
            settle("warm-up")

            watcher = HealthWatcher(address)
            watcher.start()
            for r in range(1, args.rounds + 1):
                # 1. A partition leader SIGKILLed under load, then restarted.
                # Two nodes of three serve throughout: health stays SERVING.
                watcher.watching.set()
                victim = nodes.nodes[leader_of(names.topic["input"], r % n)]
                load = produce(cluster, names.topic["input"], batch(), 8)
                real_kafka.pause(2, "records flowing before the kill", check)
                victim.kill()
                t_kill = time.monotonic()
                say(f"round {r}: SIGKILLed node {victim.id}, leader of input-{r % n}")
                real_kafka.pause(BROKER_SESSION_S + 3, "the cluster without the node", check)
                nodes.restart([victim])
                t_back = time.monotonic()
                say(f"round {r}: node {victim.id} back after {t_back - t_kill:.1f} s")
                load.finish(180)
                settle(f"round {r}, leader kill")
                figures.append(f"round {r} leader kill: every partition committed "
                               f"{time.monotonic() - t_kill:.1f} s after the kill, "
                               f"{time.monotonic() - t_back:.1f} s after the node was back")

                # 2. The group's coordinator SIGSTOPped for longer than every
                # session, then resumed.
                victim = nodes.nodes[coordinator_of(names.group["g"])]
                load = produce(cluster, names.topic["input"], batch(), 8)
                real_kafka.pause(2, "records flowing before the stop", check)
                victim.signal(signal.SIGSTOP)
                t_stop = time.monotonic()
                say(f"round {r}: SIGSTOPped node {victim.id}, the group's coordinator")
                real_kafka.pause(BROKER_SESSION_S + 3, "the cluster with a stopped node", check)
                victim.signal(signal.SIGCONT)
                t_cont = time.monotonic()
                say(f"round {r}: SIGCONT node {victim.id}")
                load.finish(180)
                settle(f"round {r}, stopped node")
                watcher.watching.clear()
                if watcher.bad:
                    raise Failure(f"round {r}: health not SERVING while two of three nodes "
                                  f"served: {len(watcher.bad)} of {watcher.asked} answers, e.g. "
                                  f"{watcher.bad[0][1]}")
                say(f"round {r}: health SERVING through both faults ({watcher.asked} answers)")
                figures.append(f"round {r} stopped node ({t_cont - t_stop:.1f} s): every partition "
                               f"committed {time.monotonic() - t_cont:.1f} s after SIGCONT")

                # 3. Every node down while retryd still has work, then up.
                load = produce(cluster, names.topic["input"], batch(), 3)
                load.finish(120)
                for node in nodes.nodes.values():
                    node.kill()
                say(f"round {r}: SIGKILLed all three nodes")
                down = wait_health(address, "NOT_SERVING", args.health_timeout, retryd.check)
                say(f"round {r}: health NOT_SERVING {down:.1f} s after the nodes went")
                if not retryd.alive():
                    raise Failure("retryd exited while Kafka was down")
                t_up = time.monotonic()
                nodes.restart(list(nodes.nodes.values()))
                started = time.monotonic() - t_up
                up = wait_health(address, "SERVING", args.settle_timeout, check)
                say(f"round {r}: nodes serving after {started:.1f} s, health SERVING "
                    f"{up:.1f} s later")
                # A batch after the outage, so that every partition must move.
                load = produce(cluster, names.topic["input"], batch(), 3)
                load.finish(180)
                settle(f"round {r}, all nodes down")
                figures.append(f"round {r} all down: NOT_SERVING after {down:.1f} s; nodes serving "
                               f"{started:.1f} s after their start, SERVING {up:.1f} s later; "
                               f"every partition committed {time.monotonic() - t_up - started:.1f} "
                               f"s after the nodes served")

            scenario.stop()
        finally:
            if watcher is not None:
                watcher.stop()
            retryd.cleanup()

        status = scenario.verdict(figures)
    cluster.close()
    return status


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-broker-faults", parse_args(), run))
