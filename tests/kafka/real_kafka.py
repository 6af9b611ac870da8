"""What every test of the `kafka` label shares: which cluster, and names of its own.

The cluster is, in this order:

  * RETRYD_TEST_KAFKA=host:port[,host:port...], an existing cluster (the
    user's, or the one broker scripts/test.sh starts for the whole run);
  * the broker the ctest fixture `kafka_broker_start` started for this ctest
    run, whose bootstrap it wrote to the file RETRYD_TEST_KAFKA_FILE names
    (tests/kafka/CMakeLists.txt sets it).

RETRYD_TEST_KAFKA_PROPERTIES=FILE adds librdkafka properties (key=value lines,
'#' comments), e.g. for SASL or SSL. retryd gets them through its config:
secrets (sasl.password and the like) through properties_from_file, never in
the config's properties. Debian's kafka-python, which judges the tests, gets
those it has an equivalent for.

A test that kills brokers or nodes runs only on a cluster the project
started itself: Cluster.require_owned() skips it (exit status 77, with a
message) anywhere else. The cluster is the project's when
RETRYD_TEST_KAFKA_OWNED=1 (scripts/test.sh exports it beside the
RETRYD_TEST_KAFKA of its own broker), or when the ctest fixture started the
broker (it writes the file `owned` beside the bootstrap file). Killing
retryd is fine on any cluster.

Every test makes topics and groups of its own (TestNames), with replication
factor min(3, brokers), and deletes them at the end, so that runs on a shared
cluster neither meet nor leave anything behind. Clients use api_version
(2, 5, 0): kafka-python then skips its version probe, which has 2 s to answer
by default, too little on a loaded machine; Kafka 4.x serves every request
that version uses.
"""

import collections
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, UnknownTopicOrPartitionError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from child_process import start, stop, tail  # noqa: E402,F401  (re-exported for the tests)

API_VERSION = (2, 5, 0)

# librdkafka properties that hold secrets: retryd refuses them in its config's
# properties (proto/retryd/v1/config.proto), so they go through files.
SECRET_PROPERTIES = {
    "sasl.password", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
    "ssl.key.password", "ssl.key.pem", "ssl.keystore.password",
}

# librdkafka property -> kafka-python client argument.
PYTHON_EQUIVALENT = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}


def quote(text):
    """`text` as a protobuf text-format string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Unavailable(Exception):
    """No cluster to run against, or it does not answer."""


def read_properties(path):
    props = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise Unavailable(f"{path}:{n}: expected key=value")
            props[key.strip()] = value.strip()
    return props


class Cluster:
    """The cluster under test and how to reach it."""

    def __init__(self):
        bootstrap = os.environ.get("RETRYD_TEST_KAFKA", "").strip()
        self.source = "RETRYD_TEST_KAFKA"
        if not bootstrap:
            path = os.environ.get("RETRYD_TEST_KAFKA_FILE", "")
            self.source = f"the ctest fixture's broker ({path})"
            try:
                with open(path) as f:
                    bootstrap = f.read().strip()
            except OSError:
                raise Unavailable(
                    "no Kafka: set RETRYD_TEST_KAFKA=host:port, or run the test through "
                    "ctest (-L kafka), whose fixture kafka_broker_start starts a broker")
        if not bootstrap:
            raise Unavailable(f"empty bootstrap from {self.source}")
        self.bootstrap = bootstrap
        # RETRYD_TEST_KAFKA wins over the fixture's file, so the marker file
        # counts only where the file named the cluster.
        self.owned = os.environ.get("RETRYD_TEST_KAFKA_OWNED", "") == "1" or (
            self.source != "RETRYD_TEST_KAFKA"
            and os.path.exists(os.path.join(os.path.dirname(path), "owned")))
        path = os.environ.get("RETRYD_TEST_KAFKA_PROPERTIES", "")
        self.properties = read_properties(path) if path else {}
        self.client = {"bootstrap_servers": bootstrap, "api_version": API_VERSION}
        for key, value in self.properties.items():
            if key in PYTHON_EQUIVALENT:
                self.client[PYTHON_EQUIVALENT[key]] = value
            elif key == "ssl.endpoint.identification.algorithm" and value == "none":
                self.client["ssl_check_hostname"] = False
        try:
            self.admin = KafkaAdminClient(client_id="retryd-test-admin", **self.client)
            self.brokers = len(self.admin.describe_cluster()["brokers"])
        except KafkaError as e:
            raise Unavailable(f"Kafka at {bootstrap} ({self.source}) does not answer: {e!r}")

    def require_owned(self, what):
        """Raises Unavailable (the test is skipped) unless this cluster is the
        project's own: `what` (e.g. "kills a broker") is never done to a
        user's cluster."""
        if not self.owned:
            raise Unavailable(
                f"this test {what}, which is done only to a cluster the project started "
                f"(scripts/test.sh or the ctest fixture); {self.bootstrap} came from "
                f"{self.source} without RETRYD_TEST_KAFKA_OWNED=1")

    def replication_factor(self):
        return min(3, self.brokers)

    def retryd_kafka_block(self, work_dir):
        """The `kafka { ... }` block of a retryd config for this cluster. Secret
        properties are written to files in `work_dir`, readable by the owner
        only, and named with properties_from_file."""
        lines = [f"  bootstrap_servers: {quote(self.bootstrap)}"]
        for key, value in sorted(self.properties.items()):
            if key in SECRET_PROPERTIES:
                path = os.path.join(work_dir, "secret-" + key.replace(".", "-"))
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(value)
                lines.append(f"  properties_from_file {{ key: {quote(key)} value: {quote(path)} }}")
            else:
                lines.append(f"  properties {{ key: {quote(key)} value: {quote(value)} }}")
        return "kafka {\n" + "\n".join(lines) + "\n"

    def producer(self, **kw):
        # retries: a partition's new leader may answer NOT_LEADER for a moment
        # after its topic is created; kafka-python does not retry by default.
        return KafkaProducer(acks="all", retries=10, retry_backoff_ms=100,
                             client_id="retryd-test-producer", **self.client, **kw)

    def consumer(self, **kw):
        return KafkaConsumer(client_id="retryd-test-reader", enable_auto_commit=False,
                             **self.client, **kw)

    def close(self):
        self.admin.close()


class TestNames:
    """Topics and groups of one test, unique on a shared cluster: created with
    partitions and the cluster's replication factor, deleted (with the groups)
    by delete(). Use as a context manager."""

    def __init__(self, cluster, test, topics, partitions, groups=(), partitions_of=None,
                 configs_of=None):
        """`partitions` for every topic, but those `partitions_of` names
        ({topic: count}); `configs_of` gives topics configs of their own from
        their creation on ({topic: {config: value}})."""
        self.cluster = cluster
        prefix = f"retryd-test-{test}-{os.getpid()}-{secrets.token_hex(3)}"
        self.topic = {name: f"{prefix}-{name}" for name in topics}
        self.group = {name: f"{prefix}-{name}" for name in groups}
        self.partitions = partitions
        self.count = {self.topic[name]: (partitions_of or {}).get(name, partitions)
                      for name in topics}
        self.configs = {self.topic[name]: (configs_of or {}).get(name, {}) for name in topics}

    def partitions_of(self, name):
        """The partition count of the topic named `name` in `topics`."""
        return self.count[self.topic[name]]

    def __enter__(self):
        rf = self.cluster.replication_factor()
        self.cluster.admin.create_topics(
            [NewTopic(t, n, rf, topic_configs=self.configs[t]) for t, n in self.count.items()],
            timeout_ms=30000)
        self.wait_for_leaders(30)
        return self

    def __exit__(self, *exc):
        self.delete()
        return False

    def wait_for_leaders(self, timeout):
        """Until every partition of every topic has a leader in the metadata."""
        deadline = time.monotonic() + timeout
        names = list(self.topic.values())
        while True:
            try:
                described = self.cluster.admin.describe_topics(names)
                ready = all(t["error_code"] == 0 and len(t["partitions"]) == self.count[t["topic"]]
                            and all(p["leader"] >= 0 for p in t["partitions"])
                            for t in described)
            except KafkaError:
                ready = False
            if ready:
                return
            if time.monotonic() > deadline:
                raise Unavailable(f"topics without leaders after {timeout} s: {names}")
            time.sleep(0.1)  # The broker's metadata: polled, nothing to wait on.

    def delete(self):
        groups = [g for sub in self.group.values() for g in (sub, sub + ".retry")]
        try:
            existing = {g for g, _ in self.cluster.admin.list_consumer_groups()}
            if existing & set(groups):
                self.cluster.admin.delete_consumer_groups(sorted(existing & set(groups)))
        except KafkaError as e:
            print(f"note: could not delete groups {groups}: {e!r}", flush=True)
        try:
            self.cluster.admin.delete_topics(list(self.topic.values()), timeout_ms=30000)
        except UnknownTopicOrPartitionError:
            pass
        except KafkaError as e:
            print(f"note: could not delete topics {list(self.topic.values())}: {e!r}", flush=True)


def end_offsets(consumer, topic, partitions):
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    return consumer.end_offsets(tps)


def read_topic(consumer, topic, partitions, timeout):
    """Every record of `topic` up to its end offsets now, in partition order."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    records = {tp: [] for tp in tps}
    deadline = time.monotonic() + timeout
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {topic}: not at its end offsets after {timeout} s")
        for tp, batch in consumer.poll(timeout_ms=500).items():
            records[tp].extend(r for r in batch if r.offset < ends[tp])
    consumer.unsubscribe()
    return [r for tp in tps for r in records[tp]]


# ---- Waiting ------------------------------------------------------------------


class Failure(Exception):
    """A scenario failed for a reason other than its final verdict: a hang,
    a process that died, a step that could not be taken."""


def wait_until(condition, timeout, what, poll=0.2, check=None):
    """Calls `condition` every `poll` seconds until it returns a true value,
    which it returns; raises Failure naming `what` after `timeout` seconds.
    `check`, if given, runs before each try (e.g. to fail at once when a
    child process died)."""
    deadline = time.monotonic() + timeout
    while True:
        if check is not None:
            check()
        try:
            value = condition()
        except KafkaError as e:  # A passing broker error: try again.
            value = None
            error = e
        else:
            error = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failure(f"{what}: not after {timeout:.0f} s" + (f" ({error!r})" if error else ""))
        time.sleep(poll)  # Another process's state: polled, nothing to wait on.


def pause(seconds, what, check):
    """Lets records flow for `seconds` (a scenario's pacing, not a wait for a
    state), failing at once if `check` raises (an instance died)."""
    until = time.monotonic() + seconds
    wait_until(lambda: time.monotonic() >= until, seconds + 5, what, check=check)


def verdict_status(say, failures, log_of=None):
    """Prints `failures` (and the tail of the log `log_of` names, if any):
    the scenario's exit status, 0 when there are none."""
    for f in failures:
        say("  " + f)
    if not failures:
        return 0
    if log_of:
        say(f"the last log, {log_of}:\n{tail(log_of)}")
    return 1


def free_port():
    """A loopback port free now (for a child that must be restarted on the
    same one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- retryd as a child process ------------------------------------------------

# retryd logs this when a thread's group assigns it partitions.
ASSIGNED = re.compile(rb"thread \d+: assigned [1-9]\d* partitions")
LISTENING = re.compile(rb"control API listening on (\S+)")


class Retryd:
    """One retryd instance of a test, started again after each kill: run N
    logs to WORK/NAME-N.log. Every run dies with the test (child_process)."""

    def __init__(self, binary, config, work, name="retryd", args=()):
        self.binary, self.config, self.work, self.name = binary, config, work, name
        self.args = list(args)  # More command-line flags, for every run.
        self.proc = None
        self.runs = 0
        self.started_at = None

    def log(self, run=None):
        return os.path.join(self.work, f"{self.name}-{run or self.runs}.log")

    def log_text(self):
        try:
            with open(self.log(), "rb") as f:
                return f.read()
        except OSError:
            return b""

    def all_logs(self):
        """Every run's log, one after the other."""
        text = b""
        for run in range(1, self.runs + 1):
            try:
                with open(self.log(run), "rb") as f:
                    text += f.read()
            except OSError:
                pass
        return text

    def start(self):
        self.runs += 1
        self.proc = start([self.binary, "--config", self.config, "--summary_interval_s", "0"] +
                          self.args, self.log())
        self.started_at = time.monotonic()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check(self):
        """Raises Failure if this run exited on its own."""
        if self.proc is not None and self.proc.poll() is not None:
            raise Failure(f"{self.name} (run {self.runs}) exited on its own, status "
                          f"{self.proc.returncode}:\n{tail(self.log())}")

    def address(self, timeout=60):
        """The control API's address of this run, once it listens."""
        m = wait_until(lambda: LISTENING.search(self.log_text()), timeout,
                       f"{self.name}'s control API listening", check=self.check)
        return m.group(1).decode()

    def wait_assigned(self, timeout=60, check=None):
        """Until this run's log shows a group assigning it partitions; `check`
        (default: this run is alive) runs before each look."""
        wait_until(lambda: ASSIGNED.search(self.log_text()), timeout,
                   f"{self.name} (run {self.runs}) assigned partitions", check=check or self.check)

    def kill(self):
        """SIGKILL, reaped."""
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout=60):
        """SIGTERM, a graceful stop; its exit status."""
        return stop(self.proc, signal.SIGTERM, timeout)

    def stop_gracefully(self, timeout=60):
        """SIGTERM; raises Failure unless it exits 0."""
        status = stop(self.proc, signal.SIGTERM, timeout)
        if status != 0:
            raise Failure(f"{self.name}'s graceful stop ended with status {status}:\n"
                          f"{tail(self.log())}")

    def cleanup(self):
        if self.proc is not None:
            stop(self.proc, signal.SIGKILL, 10)

    def error_lines(self):
        """ERROR lines of every run's log."""
        lines = []
        for run in range(1, self.runs + 1):
            try:
                with open(self.log(run), "rb") as f:
                    lines += [l.decode(errors="replace").rstrip() for l in f if b" ERROR " in l]
            except OSError:
                pass
        return lines


def retryctl(binary, address, *args, timeout=60):
    """Runs the built retryctl against `address`; its stdout. Raises Failure
    if the call fails."""
    argv = [binary, "--addr", address, "--timeout", f"{int(timeout)}s"] + list(args)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        raise Failure(f"retryctl {' '.join(args)}: no answer in {timeout + 10} s")
    if done.returncode != 0:
        raise Failure(f"retryctl {' '.join(args)}: status {done.returncode}: "
                      f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode(errors="replace")


# ---- Records in, outcomes out -----------------------------------------------


def make_records(n, rng, flaky=0.1, poison=0.01, keys=None):
    """(key, destination, value) for n records. flaky- keys fail twice then
    succeed; poison-perm- keys fail for good and poison-exh- ones until
    their attempts run out, both ending in the DLQ. With `keys`, records
    share that many keys (`<kind>-k<NNN>`; a key's kind is fixed) and their
    values carry a sequence number per key; otherwise every key is unique."""
    out = []
    if keys is None:
        kinds = ["ok"] * n
        picks = rng.sample(range(n), int(n * flaky) + int(n * poison))
        for i in picks[:int(n * flaky)]:
            kinds[i] = "flaky"
        for j, i in enumerate(picks[int(n * flaky):]):
            kinds[i] = "poison-perm" if j % 2 == 0 else "poison-exh"
        for i, kind in enumerate(kinds):
            where = "dlq" if kind.startswith("poison") else "output"
            out.append((f"{kind}-{i:07d}", where, f"v{i}.{rng.randrange(10**6)}"))
        return out
    kind_of = ["flaky" if rng.random() < flaky else "ok" for _ in range(keys)]
    seq = [0] * keys
    for _ in range(n):
        k = rng.randrange(keys)
        seq[k] += 1
        out.append((f"{kind_of[k]}-k{k:03d}", "output", f"s{seq[k]:06d}.{rng.randrange(10**6)}"))
    return out


class PacedProducer(threading.Thread):
    """Produces `records` ((key, destination, value), see make_records) to
    `topic` at an even pace over `seconds`, so that records flow whenever
    something happens to retryd. Every record must be acknowledged
    (`error` says otherwise); with `resend`, a record the producer gave up
    on (its request timed out) is sent again after the pace, up to 20
    times."""

    def __init__(self, cluster, topic, records, seconds, resend=False):
        super().__init__(name="producer", daemon=True)
        self.cluster, self.topic, self.records, self.seconds = cluster, topic, records, seconds
        self.resend = resend
        self.sent = 0
        self.error = None
        self.stopping = threading.Event()

    def run(self):
        try:
            producer = self.cluster.producer(linger_ms=5)
            futures = []  # (record, future)

            def send(record):
                key, _, value = record
                futures.append((record, producer.send(self.topic, key=key.encode(),
                                                      value=value.encode())))

            begin = time.monotonic()
            step = max(1, len(self.records) // max(1, int(self.seconds * 10)))
            for i in range(0, len(self.records), step):
                if self.stopping.is_set():
                    break
                # Pacing, not waiting for a condition: chunk i is due then.
                due = begin + self.seconds * i / len(self.records)
                self.stopping.wait(max(0.0, due - time.monotonic()))
                for record in self.records[i:i + step]:
                    send(record)
                self.sent = min(len(self.records), i + step)
            for _ in range(20 if self.resend else 1):
                producer.flush(timeout=60)
                failed = [(r, f) for r, f in futures if not f.succeeded()]
                if not failed or not self.resend:
                    break
                futures.clear()
                for record, _ in failed:
                    send(record)
            if failed:
                self.error = (f"{len(failed)} records not acknowledged by the broker, e.g. "
                              f"{failed[0][1].exception!r}")
            producer.close(timeout=10)
        except Exception as e:  # Reported by the test's thread.
            self.error = f"producer: {e!r}"

    def finish(self, timeout):
        """Waits for every record to be acknowledged; raises Failure if not."""
        self.join(timeout)
        if self.is_alive():
            self.stopping.set()
            raise Failure(f"the producer had not finished after {timeout:.0f} s")
        if self.error:
            raise Failure(self.error)


class Groups:
    """Whether retryd's groups have committed everything: each (group, topic,
    partitions) up to the topic's end offsets."""

    def __init__(self, cluster, pairs):
        self.cluster = cluster
        self.pairs = [(g, [TopicPartition(t, p) for p in range(n)]) for g, t, n in pairs]
        self.reader = cluster.consumer()

    def state(self):
        """[(group, committed, end)], offsets summed over partitions; committed
        offsets are read before end offsets, so committed == end means the
        group had finished everything written by then."""
        committed = []
        for group, tps in self.pairs:
            offsets = self.cluster.admin.list_consumer_group_offsets(group, partitions=tps)
            committed.append(sum(max(0, offsets[tp].offset) if tp in offsets else 0
                                 for tp in tps))
        return [(group, c, sum(self.reader.end_offsets(tps).values()))
                for (group, tps), c in zip(self.pairs, committed)]

    def behind(self):
        """[(group, partition, committed, end)] for every partition its group
        has not committed to the end (committed -1: nothing, which is behind
        only when the partition holds records); committed offsets are read
        before end offsets."""
        out = []
        for group, tps in self.pairs:
            offsets = self.cluster.admin.list_consumer_group_offsets(group, partitions=tps)
            ends = self.reader.end_offsets(tps)
            for tp in tps:
                c = offsets[tp].offset if tp in offsets else -1
                # No commit on an empty partition is not behind: there is
                # nothing to commit.
                if max(c, 0) < ends[tp]:
                    out.append((group, tp.partition, c, ends[tp]))
        return out

    def done(self):
        """Every partition committed to its end (so none is left paused)."""
        return not self.behind()

    def state_or_none(self):
        """state(), or None when the offsets cannot be read."""
        try:
            return self.state()
        except KafkaError:
            return None

    def describe(self, state=None):
        """`state` (read now when None) for a log line."""
        try:
            return ", ".join(f"{g} committed {c}/{e}"
                             for g, c, e in (state if state is not None else self.state()))
        except KafkaError as e:
            return f"offsets unknown ({e!r})"

    def wait_done(self, timeout, check=None):
        """Until every group is at its ends twice in a row, half a second
        apart (a retry thread may still write what it will then read)."""
        deadline = time.monotonic() + timeout
        before = False
        while True:
            if check is not None:
                check()
            try:
                now = self.done()
            except KafkaError:
                now = False
            if now and before:
                return
            before = now
            if time.monotonic() > deadline:
                try:
                    behind = self.behind()
                except KafkaError as e:
                    behind = repr(e)
                raise Failure(f"HANG: the groups had not committed everything after "
                              f"{timeout:.0f} s: {self.describe()}; behind (group, partition, "
                              f"committed, end): {behind}")
            time.sleep(0.5)  # Offsets in the broker: polled, nothing to wait on.

    def close(self):
        self.reader.close()


class EndSampler:
    """Samples the summed end offsets of some topics (e.g. the output and the
    DLQ) from outside, so that a run's rate of outcomes can be measured."""

    def __init__(self, cluster, topics):
        self.reader = cluster.consumer()
        self.tps = [TopicPartition(t, p) for t, n in topics for p in range(n)]
        self.samples = []  # (monotonic time, {tp: end offset})

    def sample(self):
        ends = self.reader.end_offsets(self.tps)
        self.samples.append((time.monotonic(), ends))
        return ends

    def peak_rate(self, begin, end, window=1.0):
        """The most outcomes per second over any `window` seconds between the
        monotonic times `begin` and `end`, from the samples taken then."""
        points = [(t, sum(e.values())) for t, e in self.samples if begin <= t <= end]
        best = 0.0
        j = 0
        for i, (t, n) in enumerate(points):
            while j + 1 < i and points[j + 1][0] <= t - window:
                j += 1
            if j < i and t - points[j][0] >= window * 0.5:
                best = max(best, (n - points[j][1]) / (t - points[j][0]))
        return best

    def close(self):
        self.reader.close()


Copy = collections.namedtuple("Copy", "where partition offset record")


def read_outcomes(cluster, names, input_name="input", outputs=("output", "dlq"), timeout=60):
    """The input records by (partition, offset), and every copy of each in
    the outcome topics, by the retryd-original-partition/-offset headers:
    (inputs, {(partition, offset): [Copy, ...] in each topic's log order},
    unknown) where unknown counts copies naming no input record."""
    reader = cluster.consumer()
    try:
        inputs = {(r.partition, r.offset): r for r in read_topic(
            reader, names.topic[input_name], names.partitions_of(input_name), timeout)}
        copies = collections.defaultdict(list)
        unknown = 0
        for where in outputs:
            for r in read_topic(reader, names.topic[where], names.partitions_of(where), timeout):
                h = dict(r.headers)
                try:
                    coord = (int(h["retryd-original-partition"]), int(h["retryd-original-offset"]))
                except (KeyError, ValueError):
                    coord = None
                if coord not in inputs or h.get("retryd-original-topic") != \
                        names.topic[input_name].encode():
                    unknown += 1
                    continue
                copies[coord].append(Copy(where, r.partition, r.offset, r))
    finally:
        reader.close()
    return inputs, copies, unknown


def duplicates(copies):
    """Originals that are duplicates: twice or more in the output, or in both
    the output and the DLQ. (count, extra copies of them)."""
    count = extra = 0
    for cs in copies.values():
        n_out = sum(1 for c in cs if c.where == "output")
        n_dlq = len(cs) - n_out
        if n_out >= 2 or (n_out >= 1 and n_dlq >= 1):
            count += 1
            extra += len(cs) - 1
    return count, extra


def lost(inputs, copies, destination):
    """Input coordinates with no copy where they belong: destination(record)
    is "output" or "dlq"."""
    return sorted(c for c, r in inputs.items()
                  if not any(x.where == destination(r) for x in copies.get(c, [])))


def simulate_body(names, seed, threads, max_attempts, backoff_max_ms, max_threads=None):
    """The retry and processor blocks of a config whose simulate processor
    does with make_records' kinds what their names say."""
    cap = f"\n  max_threads: {max_threads}" if max_threads else ""
    return f"""retry {{
  topic: "{names.topic['retry']}"
  threads: {threads}{cap}
  max_attempts: {max_attempts}
  seed: {seed}
  backoff {{ initial_ms: 50 multiplier: 2.0 max_ms: {backoff_max_ms} }}
}}
processor {{
  simulate {{
    seed: {seed}
    rule {{ key_prefix: "flaky-" fail_attempts: 2 }}
    rule {{ key_prefix: "poison-perm-" permanent: true }}
    rule {{ key_prefix: "poison-exh-" fail_attempts: 1000 }}
  }}
}}"""


class Verdict:
    """The outcomes of `records` (make_records) produced to the input topic of
    `names`, read from the output and DLQ topics: `failures` lists what
    breaks at-least-once (a record lost, or not produced, or an outcome
    naming no input record); `duplicates` and `extra` count as duplicates()
    does."""

    def __init__(self, cluster, names, records):
        self.names = names
        self.inputs, self.copies, unknown = read_outcomes(cluster, names)
        destination = {k.encode(): where for k, where, _ in records}
        self.lost = lost(self.inputs, self.copies, lambda r: destination[r.key])
        self.duplicates, self.extra = duplicates(self.copies)
        self.failures = []
        if len(self.inputs) != len(records):
            self.failures.append(f"the input topic holds {len(self.inputs)} records, "
                                 f"{len(records)} were produced")
        if self.lost:
            self.failures.append(f"LOST {len(self.lost)} records, e.g. {self.lost[:10]}")
        if unknown:
            self.failures.append(f"{unknown} outcome records name no input record")

    def replays(self, boundaries):
        """Copies of records that already had one, by the run that wrote
        them: 0 for the first, k for the one after the k-th of `boundaries`
        (the outcome topics' {TopicPartition: end offset} right after each
        kill)."""
        def run_of(copy):
            tp = TopicPartition(self.names.topic[copy.where], copy.partition)
            return sum(1 for b in boundaries if copy.offset >= b[tp])

        counts = collections.Counter()
        for cs in self.copies.values():
            for run in sorted(run_of(c) for c in cs)[1:]:
                counts[run] += 1
        return counts

    def describe(self, coords):
        """Each copy of the records at `coords`, for a failure message."""
        return "; ".join(
            f"{c} key {self.inputs[c].key.decode()}: " + ", ".join(
                f"{x.where} {x.partition}/{x.offset} attempt "
                f"{dict(x.record.headers).get('retryd-attempt', b'?').decode()}"
                for x in self.copies[c]) for c in coords)


def replay_bound(rate, commit_interval_ms, max_in_flight, threads):
    """The most records a kill may make retryd process again: what it
    completes in a commit interval at `rate`, plus what its threads hold."""
    return rate * commit_interval_ms / 1000 + max_in_flight * threads


def median(values):
    v = sorted(values)
    if not v:
        return 0
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


# ---- A scenario's frame --------------------------------------------------------


def session_timeout_ms(cluster):
    """The consumer session timeout for retryd: 2 s on the project's broker
    (group.min.session.timeout.ms=1000 there), so that a killed instance
    leaves its groups in seconds; Kafka's default minimum, 6 s, elsewhere."""
    return 2000 if cluster.owned else 6000


def retryd_config(path, cluster, names, work, body, group="g", session_ms=None):
    """Writes a retryd config for the topics input, output and dlq of
    `names` and its group `group`, with `body` (retry, processor, ordering,
    ...) appended; the consumer session is session_timeout_ms(cluster)
    unless `session_ms` says otherwise."""
    session = session_ms or session_timeout_ms(cluster)
    text = f"""# Written by a test of the kafka label.
listen_address: "127.0.0.1:0"
{cluster.retryd_kafka_block(work)}  properties {{ key: "session.timeout.ms" value: "{session}" }}
  properties {{ key: "heartbeat.interval.ms" value: "{session // 4}" }}
}}
group_id: "{names.group[group]}"
input_topics: "{names.topic['input']}"
output_topic: "{names.topic['output']}"
dead_letter_topic: "{names.topic['dlq']}"
shutdown_timeout_ms: 10000
{body}
"""
    with open(path, "w") as f:
        f.write(text)


def scenario_main(name, parser, run):
    """Runs `run(args, work, say)` in a work directory of its own and turns
    its end into an exit status: 0 passed, 1 failed (Failure, or run's
    own 1), 77 skipped (Unavailable). The work directory is kept on a
    failure or with --keep."""
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    parser.add_argument("--seed", type=int, default=None, help="seed (random, printed)")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = int.from_bytes(secrets.token_bytes(3), "big")

    def say(*parts):
        print(f"{name}:", *parts, flush=True)

    def on_signal(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    work = tempfile.mkdtemp(prefix=f"retryd-kafka-{name}-")
    began = time.monotonic()
    rc = 1
    try:
        rc = run(args, work, say)
    except Unavailable as e:
        say(f"SKIPPED: {e}")
        rc = 77
    except Failure as e:
        say(f"FAILED: {e}")
    except KeyboardInterrupt as e:
        say(f"interrupted ({e})")
    finally:
        if args.keep or rc not in (0, 77):
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    verdict = {0: "PASSED", 77: "SKIPPED"}.get(rc, "FAILED")
    say(f"seed {args.seed}: {verdict} in {time.monotonic() - began:.1f} s" +
        (f" (again: --seed {args.seed} --keep)" if verdict == "FAILED" else ""))
    return rc
