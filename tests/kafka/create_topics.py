#!/usr/bin/python3
"""kafka.create_topics on a real Kafka: the built retryd creates its missing
topics at start through the Admin API, and records flow through them.

Four cases, each on topics and groups of its own, judged with kafka-python:

  * defaults: only the input topic exists (3 partitions). retryd starts with
    `create_topics { retention_ms: 3600000 }` and creates the retry, DLQ and
    output topics with the input's 3 partitions, replication factor
    min(3, brokers) and retention.ms 3600000 as a topic setting. Records of
    three kinds (healthy, flaky, permanent) reach the output and the DLQ
    through the retry topic. A second start, with every topic present and a
    spec that would differ (5 partitions), creates nothing, changes nothing,
    and carries a second batch of records through;
  * explicit: `create_topics { partitions: 4 replication_factor: 1 }` and no
    output topic: the retry and DLQ topics get 4 partitions and 1 replica,
    no retention.ms of their own (the broker's applies), and no output topic
    appears;
  * refused: a replication factor above the broker count: retryd exits 1
    with the cluster's refusal, naming kafka.create_topics, and no topic is
    left behind;
  * missing input: retryd never creates an input topic; it exits 1 naming
    the missing input topic, and creates nothing.

Exit status 0 if every check passes, 1 otherwise, 77 (ctest: skipped) when
there is no cluster to run against.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import KafkaError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402

RETENTION_MS = 3_600_000
# DescribeConfigs v1+ says where a value comes from; 1 is a topic's own.
CONFIG_SOURCE_TOPIC = 1
EXIT_TIMEOUT = 60


def say(*parts):
    print("create_topics:", *parts, flush=True)


class Failures(list):
    def expect(self, condition, message):
        if not condition:
            self.append(message)


def write_config(path, cluster, names, work, create_topics, output=True):
    output_line = f'output_topic: "{names.topic["output"]}"' if output else ""
    text = f"""# Written by tests/kafka/create_topics.py.
listen_address: "127.0.0.1:0"
{cluster.retryd_kafka_block(work)}  properties {{ key: "session.timeout.ms" value: "6000" }}
  properties {{ key: "heartbeat.interval.ms" value: "1000" }}
  {create_topics}
}}
group_id: "{names.group['g']}"
input_topics: "{names.topic['input']}"
{output_line}
dead_letter_topic: "{names.topic['dlq']}"
commit_interval_ms: 200
shutdown_timeout_ms: 10000
retry {{
  topic: "{names.topic['retry']}"
  threads: 1
  max_attempts: 3
  seed: 42
  backoff {{ initial_ms: 20 multiplier: 2.0 max_ms: 200 }}
}}
processor {{
  simulate {{
    rule {{ key_prefix: "flaky-" fail_attempts: 1 }}
    rule {{ key_prefix: "perm-" permanent: true }}
  }}
}}
"""
    with open(path, "w") as f:
        f.write(text)


def read_log(path):
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


def names_for(cluster, case, partitions):
    """The topics and group of one case; nothing created yet."""
    return real_kafka.TestNames(cluster, f"topics-{case}", ["input", "retry", "dlq", "output"],
                                partitions, groups=["g"])


def create_input(cluster, names, partitions):
    """Only the input topic, as an operator would create it."""
    cluster.admin.create_topics(
        [NewTopic(names.topic["input"], partitions, cluster.replication_factor())],
        timeout_ms=30000)
    wait_for_leaders(cluster, [names.topic["input"]], 30)


def wait_for_leaders(cluster, topics, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if all(t["error_code"] == 0 and t["partitions"] and
                   all(p["leader"] >= 0 for p in t["partitions"])
                   for t in cluster.admin.describe_topics(topics)):
                return
        except KafkaError:
            pass
        if time.monotonic() > deadline:
            raise real_kafka.Unavailable(f"topics without leaders after {timeout} s: {topics}")
        time.sleep(0.1)  # The broker's metadata: polled, nothing to wait on.


def existing(cluster, topics):
    present = set(cluster.admin.list_topics())
    return [t for t in topics if t in present]


def describe(cluster, topic):
    """(partitions, replica counts per partition, retention.ms if the topic
    has its own) of `topic`, or None if it does not exist."""
    described = cluster.admin.describe_topics([topic])
    if not described or described[0]["error_code"] != 0:
        return None
    partitions = described[0]["partitions"]
    replicas = sorted({len(p["replicas"]) for p in partitions})
    response = cluster.admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": None})])
    resource = response[0].to_object()["resources"][0]
    retention = None
    for entry in resource["config_entries"]:
        if entry["config_names"] == "retention.ms":
            source = entry.get("config_source")
            own = source == CONFIG_SOURCE_TOPIC if source is not None else not entry["is_default"]
            if own:
                retention = int(entry["config_value"])
    return len(partitions), replicas, retention


def produce(cluster, topic, batch, per_kind):
    """`per_kind` records of each kind; returns how many should reach the
    output (healthy and flaky) and the DLQ (permanent), and retry (flaky)."""
    producer = cluster.producer(linger_ms=5)
    futures = []
    for kind in ("ok", "flaky", "perm"):
        for i in range(per_kind):
            key = f"{kind}-{batch}-{i:03d}".encode()
            futures.append(producer.send(topic, key=key, value=b"v-" + key))
    producer.flush(timeout=60)
    failed = [f for f in futures if not f.succeeded()]
    producer.close(timeout=10)
    if failed:
        raise RuntimeError(f"{len(failed)} records not acknowledged: {failed[0].exception!r}")
    return {"output": 2 * per_kind, "dlq": per_kind, "retry": per_kind}


def partitions_of(cluster, topic):
    """`topic`'s partitions as the cluster has them now (whatever retryd
    created), so that a wrong count fails a check rather than the reading."""
    described = cluster.admin.describe_topics([topic])
    if not described or described[0]["error_code"] != 0:
        return []
    return [TopicPartition(topic, p["partition"]) for p in described[0]["partitions"]]


def totals(cluster, reader, topic):
    return sum(reader.end_offsets(partitions_of(cluster, topic)).values())


def committed_to_end(cluster, reader, group, topic):
    tps = partitions_of(cluster, topic)
    committed = cluster.admin.list_consumer_group_offsets(group, partitions=tps)
    ends = reader.end_offsets(tps)
    return all(ends[tp] == 0 or (tp in committed and committed[tp].offset == ends[tp])
               for tp in tps)


def run_until_done(args, cluster, names, config, log, want):
    """Runs retryd until both groups committed everything and the output and
    DLQ hold `want`; stops it with SIGTERM. A failure message, or None."""
    retryd = real_kafka.start([args.retryd, "--config", config, "--summary_interval_s", "0"], log)
    reader = cluster.consumer()
    try:
        deadline = time.monotonic() + args.timeout
        done_once = False
        while True:
            if retryd.poll() is not None:
                return f"retryd exited on its own, status {retryd.returncode}"
            try:
                group = names.group["g"]
                done = (committed_to_end(cluster, reader, group, names.topic["input"])
                        and committed_to_end(cluster, reader, group + ".retry",
                                             names.topic["retry"])
                        and totals(cluster, reader, names.topic["output"]) >= want["output"]
                        and totals(cluster, reader, names.topic["dlq"]) >= want["dlq"])
            except KafkaError as e:  # e.g. the group coordinator still loading
                say(f"reading the groups' offsets: {e!r}")
                done = False
            # Twice in a row, a poll apart: the retry group may still be
            # writing what it will then read.
            if done and done_once:
                break
            done_once = done
            if time.monotonic() > deadline:
                return f"HANG: not everything committed after {args.timeout:.0f} s"
            time.sleep(0.5)  # Offsets in the broker: polled, nothing to wait on.
    finally:
        reader.close()
        status = real_kafka.stop(retryd, signal.SIGTERM, EXIT_TIMEOUT)
    if status != 0:
        return f"retryd exited with status {status} on SIGTERM"
    return None


def run_to_exit(args, config, log):
    """Runs retryd, which is to exit on its own; its exit status (SIGKILL
    after EXIT_TIMEOUT) and its log."""
    retryd = real_kafka.start([args.retryd, "--config", config], log)
    try:
        status = retryd.wait(EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        status = real_kafka.stop(retryd, signal.SIGKILL, 10)
    return status, read_log(log)


def run_until_serving(args, config, log):
    """Starts retryd, waits until its control API listens (its topics are
    ready and its engine runs), stops it with SIGTERM; its exit status, or
    None if it never got that far."""
    retryd = real_kafka.start([args.retryd, "--config", config, "--summary_interval_s", "0"], log)
    deadline = time.monotonic() + args.timeout
    try:
        while "control API listening on" not in read_log(log):
            if retryd.poll() is not None or time.monotonic() > deadline:
                return None
            time.sleep(0.1)  # retryd's log: polled, nothing to wait on.
    finally:
        status = real_kafka.stop(retryd, signal.SIGTERM, EXIT_TIMEOUT)
    return status


def case_defaults(args, cluster, work, failures):
    partitions = 3
    names = names_for(cluster, "defaults", partitions)
    try:
        create_input(cluster, names, partitions)
        created = [names.topic[t] for t in ("retry", "dlq", "output")]
        failures.expect(existing(cluster, created) == [],
                        f"defaults: topics exist before retryd started: {existing(cluster, created)}")
        want = produce(cluster, names.topic["input"], 1, args.per_kind)
        config = os.path.join(work, "defaults.textproto")
        write_config(config, cluster, names, work, f"create_topics {{ retention_ms: {RETENTION_MS} }}")
        log = os.path.join(work, "defaults-1.log")
        problem = run_until_done(args, cluster, names, config, log, want)
        if problem:
            failures.append(f"defaults, first start: {problem}\n{real_kafka.tail(log)}")
            return
        text = read_log(log)
        failures.expect("kafka.create_topics: created" in text and
                        all(t in text for t in created),
                        f"defaults: retryd's log does not say it created {created}")
        rf = cluster.replication_factor()
        for topic in created:
            got = describe(cluster, topic)
            failures.expect(got == (partitions, [rf], RETENTION_MS),
                            f"defaults: {topic} is (partitions, replicas, retention.ms) {got}, "
                            f"expected {(partitions, [rf], RETENTION_MS)}")
        reader = cluster.consumer()
        try:
            counts = {t: totals(cluster, reader, names.topic[t]) for t in want}
        finally:
            reader.close()
        failures.expect(counts == want, f"defaults: records per topic {counts}, expected {want}")
        say(f"defaults: created {len(created)} topics ({partitions} partitions, RF {rf}, "
            f"retention.ms {RETENTION_MS}); records {counts}")

        # Second start: every topic there, a spec that would differ.
        more = produce(cluster, names.topic["input"], 2, args.per_kind)
        want2 = {t: want[t] + more[t] for t in want}
        write_config(config, cluster, names, work,
                     "create_topics { partitions: 5 retention_ms: 60000 }")
        log = os.path.join(work, "defaults-2.log")
        problem = run_until_done(args, cluster, names, config, log, want2)
        if problem:
            failures.append(f"defaults, second start: {problem}\n{real_kafka.tail(log)}")
            return
        failures.expect("every topic exists already; none created" in read_log(log),
                        "defaults: the second start does not say it created none")
        for topic in created:
            got = describe(cluster, topic)
            failures.expect(got == (partitions, [rf], RETENTION_MS),
                            f"defaults, second start: {topic} changed to {got}")
        reader = cluster.consumer()
        try:
            counts = {t: totals(cluster, reader, names.topic[t]) for t in want2}
        finally:
            reader.close()
        failures.expect(counts == want2,
                        f"defaults, second start: records per topic {counts}, expected {want2}")
        say(f"defaults: second start created none, changed none; records {counts}")
    finally:
        names.delete()


def case_explicit(args, cluster, work, failures):
    names = names_for(cluster, "explicit", 2)
    try:
        create_input(cluster, names, 2)
        config = os.path.join(work, "explicit.textproto")
        write_config(config, cluster, names, work,
                     "create_topics { partitions: 4 replication_factor: 1 }", output=False)
        log = os.path.join(work, "explicit.log")
        status = run_until_serving(args, config, log)
        if status != 0:
            failures.append(f"explicit: retryd did not serve and stop with 0 (status {status})\n"
                            f"{real_kafka.tail(log)}")
            return
        for role in ("retry", "dlq"):
            got = describe(cluster, names.topic[role])
            failures.expect(got == (4, [1], None),
                            f"explicit: {names.topic[role]} is (partitions, replicas, own "
                            f"retention.ms) {got}, expected (4, [1], None)")
        failures.expect(existing(cluster, [names.topic["output"]]) == [],
                        "explicit: an output topic was created though none is configured")
        say("explicit: retry and DLQ topics with 4 partitions, 1 replica, the broker's retention")
    finally:
        names.delete()


def case_refused(args, cluster, work, failures):
    names = names_for(cluster, "refused", 1)
    try:
        create_input(cluster, names, 1)
        config = os.path.join(work, "refused.textproto")
        too_many = cluster.brokers + 1
        write_config(config, cluster, names, work,
                     f"create_topics {{ replication_factor: {too_many} }}")
        log = os.path.join(work, "refused.log")
        status, text = run_to_exit(args, config, log)
        failures.expect(status == 1, f"refused: exit status {status}, expected 1\n"
                                     f"{real_kafka.tail(log)}")
        failures.expect("kafka.create_topics:" in text and "INVALID_REPLICATION_FACTOR" in text,
                        f"refused: retryd does not say the cluster refused the replication "
                        f"factor\n{real_kafka.tail(log)}")
        left = existing(cluster, [names.topic[t] for t in ("retry", "dlq", "output")])
        failures.expect(left == [], f"refused: topics left behind: {left}")
        say(f"refused: replication factor {too_many} on {cluster.brokers} broker(s): exit "
            f"{status}")
    finally:
        names.delete()


def case_missing_input(args, cluster, work, failures):
    names = names_for(cluster, "noinput", 1)
    try:
        config = os.path.join(work, "noinput.textproto")
        write_config(config, cluster, names, work, "create_topics {}")
        log = os.path.join(work, "noinput.log")
        status, text = run_to_exit(args, config, log)
        failures.expect(status == 1, f"missing input: exit status {status}, expected 1")
        failures.expect(f"topic {names.topic['input']} does not exist" in text,
                        f"missing input: retryd does not name the input topic\n"
                        f"{real_kafka.tail(log)}")
        left = existing(cluster, list(names.topic.values()))
        failures.expect(left == [], f"missing input: topics created: {left}")
        say(f"missing input: exit {status}, nothing created")
    finally:
        names.delete()


def run(args, work):
    try:
        cluster = real_kafka.Cluster()
    except real_kafka.Unavailable as e:
        say(f"SKIPPED: {e}")
        return 77
    say(f"cluster {cluster.bootstrap} ({cluster.source}), {cluster.brokers} broker(s)")
    began = time.monotonic()
    failures = Failures()
    try:
        for case in (case_missing_input, case_refused, case_explicit, case_defaults):
            case(args, cluster, work, failures)
    finally:
        cluster.close()
    for f in failures:
        say("  " + f)
    if failures:
        say(f"FAILED: {len(failures)} checks")
        return 1
    say(f"PASSED in {time.monotonic() - began:.1f} s")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--per-kind", type=int, default=20, help="records of each kind per batch (20)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds allowed for each run of retryd (120)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="retryd-kafka-topics-")
    rc = 1
    try:
        rc = run(args, work)
    finally:
        if args.keep or rc not in (0, 77):
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
