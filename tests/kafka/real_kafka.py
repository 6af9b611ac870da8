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

Every test makes topics and groups of its own (TestNames), with replication
factor min(3, brokers), and deletes them at the end, so that runs on a shared
cluster neither meet nor leave anything behind. Clients use api_version
(2, 5, 0): kafka-python then skips its version probe, which has 2 s to answer
by default, too little on a loaded machine; Kafka 4.x serves every request
that version uses.
"""

import os
import secrets
import sys
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

    def __init__(self, cluster, test, topics, partitions, groups=()):
        self.cluster = cluster
        prefix = f"retryd-test-{test}-{os.getpid()}-{secrets.token_hex(3)}"
        self.topic = {name: f"{prefix}-{name}" for name in topics}
        self.group = {name: f"{prefix}-{name}" for name in groups}
        self.partitions = partitions

    def __enter__(self):
        rf = self.cluster.replication_factor()
        self.cluster.admin.create_topics(
            [NewTopic(t, self.partitions, rf) for t in self.topic.values()], timeout_ms=30000)
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
                ready = all(t["error_code"] == 0 and len(t["partitions"]) == self.partitions
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
