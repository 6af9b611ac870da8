#!/usr/bin/python3
"""Other tools' dead-letter headers (dialects) on a real Kafka, judged from
outside with kafka-python and a client written from the protos alone
(control_api.py's).

Checked:

  * reading Spring's: 20 dead letters written into retryd's dead-letter
    topic exactly as Spring Kafka's DeadLetterPublishingRecoverer writes
    them (the original headers, then kafka_dlt-exception-*, then
    kafka_dlt-original-* with partition, offset and timestamp as big-endian
    binary integers) are listed by ListDeadLetters with dialect "spring",
    their original topic, partition, offset and timestamp and the
    exception's message, none of Spring's headers among their own; a
    filter on the original partition selects exactly its records;
  * redriving them: StartRedrive to their origin (without reset_attempts,
    which a foreign dead letter implies) sends each to its original topic
    and partition, as read back from that topic: key, value and original
    headers kept, Spring's headers gone, retryd-redriven-from and
    retryd-redrive-count 1 added;
  * writing: a retryd configured with dead_letter_dialects [SPRING,
    STREAMS] dead-letters a poison record with retryd's headers, then
    Spring's, then Streams', each compared byte for byte with what the
    record's coordinates, its error and the group give.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import os
import struct
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402
from control_api import Control, message_classes, parse_args  # noqa: E402

PARTITIONS = 4
SPRING = 20
SUCCEEDED = 2  # OperationState.
SPRING_GROUP = b"spring-app"
BASE_MS = 1_700_000_000_000


def spring_headers(i, topic):
    """Spring Kafka 4.1.1's DeadLetterRecordManager, default settings: the
    record's own headers, the exception's (replaced), the original's
    (appended), binary where Spring puts a ByteBuffer."""
    return [
        ("trace", f"t-{i}".encode()),
        ("kafka_dlt-exception-fqcn",
         b"org.springframework.kafka.listener.ListenerExecutionFailedException"),
        ("kafka_dlt-exception-cause-fqcn", b"java.lang.IllegalStateException"),
        ("kafka_dlt-exception-message",
         f"Listener method threw; card declined #{i}".encode()),
        ("kafka_dlt-exception-stacktrace",
         b"java.lang.IllegalStateException: card declined\n\tat com.example.Listener.on(L.java:9)\n"),
        ("kafka_dlt-original-topic", topic.encode()),
        ("kafka_dlt-original-partition", struct.pack(">i", i % PARTITIONS)),
        ("kafka_dlt-original-offset", struct.pack(">q", 1000 + i)),
        ("kafka_dlt-original-timestamp", struct.pack(">q", BASE_MS + i)),
        ("kafka_dlt-original-timestamp-type", b"CreateTime"),
        ("kafka_dlt-original-consumer-group", SPRING_GROUP),
    ]


def list_all(control, **filter_fields):
    records, token = [], ""
    for _ in range(100):
        page = control.call("ListDeadLetters", "ListDeadLettersRequest",
                            "ListDeadLettersResponse", page_size=100, page_token=token,
                            filter=control.m["retryd.v1.DeadLetterFilter"](**filter_fields))
        records.extend(page.records)
        token = page.next_page_token
        if not token:
            return records
    raise Failure("ListDeadLetters did not end within 100 pages")


def read(cluster, topic):
    consumer = cluster.consumer()
    try:
        return real_kafka.read_topic(consumer, topic, PARTITIONS, 60)
    finally:
        consumer.close()


def check_listed(control, topic, say):
    listed = list_all(control, key_prefix=b"spring-")
    if len(listed) != SPRING:
        raise Failure(f"ListDeadLetters lists {len(listed)} Spring dead letters, wanted {SPRING}")
    for r in listed:
        i = int(r.key.decode().split("-")[1])
        want = (topic, i % PARTITIONS, 1000 + i, BASE_MS + i,
                f"Listener method threw; card declined #{i}")
        got = (r.original_topic, r.original_partition, r.original_offset,
               r.original_timestamp_unix_ms, r.error)
        if r.dialect != "spring" or r.decode_error or got != want or \
                [h.key for h in r.headers] != ["trace"]:
            raise Failure(f"Spring dead letter {i} listed as {r}; wanted {want}, "
                          f"dialect spring, headers [trace]")
    in_two = list_all(control, original_topic=topic, original_partition=2, key_prefix=b"spring-")
    if sorted(r.key.decode() for r in in_two) != sorted(
            f"spring-{i:02d}" for i in range(SPRING) if i % PARTITIONS == 2):
        raise Failure(f"filter original_partition 2 listed {[r.key for r in in_two]}")
    say(f"list: {SPRING} Spring dead letters decoded (dialect spring, binary partition, offset "
        f"and timestamp); original_partition 2 selects its {len(in_two)}")


def check_redrive(control, cluster, names, retryd, say):
    op = control.call("StartRedrive", "StartRedriveRequest", "Operation",
                      request_id=str(uuid.uuid4()), rate_per_s=1000,
                      filter=control.m["retryd.v1.DeadLetterFilter"](key_prefix=b"spring-"))
    real_kafka.wait_until(
        lambda: control.call("GetOperation", "GetOperationRequest", "Operation", id=op.id).done,
        60, "the redrive to end", check=retryd.check)
    op = control.call("GetOperation", "GetOperationRequest", "Operation", id=op.id)
    if op.state != SUCCEEDED or op.redrive.progress.redriven != SPRING:
        raise Failure(f"the redrive ended {op}")
    back = [r for r in read(cluster, names.topic["input"])
            if r.key and r.key.startswith(b"spring-")]
    if len(back) != SPRING:
        raise Failure(f"the input topic holds {len(back)} redriven records, wanted {SPRING}")
    for r in back:
        i = int(r.key.decode().split("-")[1])
        headers = header_list(r)
        lineage_ok = len(headers) == 3 and headers[1][0] == "retryd-redriven-from" and \
            headers[1][1].startswith(f"{names.topic['dlq']}/".encode()) and \
            headers[2] == ("retryd-redrive-count", b"1")
        if r.partition != i % PARTITIONS or r.value != f"order-{i}".encode() or \
                headers[:1] != [("trace", f"t-{i}".encode())] or not lineage_ok:
            raise Failure(f"redriven Spring dead letter {i} arrived at partition {r.partition} "
                          f"with headers {headers}")
    say(f"redrive: {SPRING} Spring dead letters back at their original partitions, Spring's "
        f"headers gone, retryd's lineage added")


def header_list(record):
    return [(k, v) for k, v in record.headers]


def check_written(cluster, names, retryd, say):
    producer = cluster.producer()
    sent = producer.send(names.topic["input"], key=b"poison-1", value=b"p", partition=1).get(30)
    producer.flush()
    producer.close()
    source = [r for r in read(cluster, names.topic["input"]) if r.key == b"poison-1"][0]

    def dead():
        found = [r for r in read(cluster, names.topic["dlq"]) if r.key == b"poison-1"]
        return found[0] if found else None

    record = real_kafka.wait_until(dead, 60, "the poison record dead-lettered",
                                   check=retryd.check)
    headers = header_list(record)
    keys = [k for k, _ in headers]
    error = dict(headers)["retryd-error"]
    attempts = dict(headers)["retryd-attempt"].decode()
    trace = (b"retryd.ProcessingFailure: " + error + b"\n\tat retryd(" +
             f"{names.topic['input']}-1@{sent.offset}, {attempts} attempts)\n".encode())
    want_spring = [
        ("kafka_dlt-exception-fqcn", b"retryd.ProcessingFailure"),
        ("kafka_dlt-exception-cause-fqcn", b"retryd.ProcessingFailure"),
        ("kafka_dlt-exception-message", error),
        ("kafka_dlt-exception-stacktrace", trace),
        ("kafka_dlt-original-topic", names.topic["input"].encode()),
        ("kafka_dlt-original-partition", b"\x00\x00\x00\x01"),
        ("kafka_dlt-original-offset", struct.pack(">q", sent.offset)),
        ("kafka_dlt-original-timestamp", struct.pack(">q", source.timestamp)),
        ("kafka_dlt-original-timestamp-type", b"CreateTime"),
        ("kafka_dlt-original-consumer-group", names.group["g"].encode()),
    ]
    want_streams = [
        ("__streams.errors.exception", b"retryd.ProcessingFailure"),
        ("__streams.errors.message", error),
        ("__streams.errors.stacktrace", trace),
        ("__streams.errors.topic", names.topic["input"].encode()),
        ("__streams.errors.partition", b"1"),
        ("__streams.errors.offset", str(sent.offset).encode()),
    ]
    first_dialect = keys.index("kafka_dlt-exception-fqcn") if "kafka_dlt-exception-fqcn" in keys \
        else len(keys)
    retryds = headers[:first_dialect]
    if not error or not all(k.startswith("retryd-") for k, _ in retryds) or \
            headers[first_dialect:] != want_spring + want_streams:
        raise Failure(f"the dead letter's headers: {headers}\nwanted retryd's, then "
                      f"{want_spring + want_streams}")
    say(f"write: a poison record dead-lettered with {len(retryds)} retryd headers, then "
        f"Spring's {len(want_spring)} and Streams' {len(want_streams)}, byte for byte")


def run(args, work, say):
    messages = message_classes(args.proto_dir, work)
    cluster = real_kafka.Cluster()
    names = real_kafka.TestNames(cluster, "dlq-dialects", ["input", "retry", "output", "dlq"],
                                 PARTITIONS, groups=["g"])
    with names:
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
dead_letter_dialects: [DEAD_LETTER_DIALECT_SPRING, DEAD_LETTER_DIALECT_STREAMS]
retry {{
  topic: "{names.topic['retry']}"
  threads: 1
  max_attempts: 2
  backoff {{ initial_ms: 100 multiplier: 1.0 max_ms: 100 }}
}}
processor {{
  simulate {{
    seed: {args.seed}
    rule {{ key_prefix: "poison-" permanent: true }}
  }}
}}""")
        producer = cluster.producer()
        for i in range(SPRING):
            producer.send(names.topic["dlq"], key=f"spring-{i:02d}".encode(),
                          value=f"order-{i}".encode(),
                          headers=spring_headers(i, names.topic["input"]))
        producer.flush()
        producer.close()
        retryd = real_kafka.Retryd(args.retryd, config, work)
        try:
            retryd.start()
            control = Control(retryd.address(), messages)
            retryd.wait_assigned()
            check_listed(control, names.topic["input"], say)
            check_redrive(control, cluster, names, retryd, say)
            check_written(cluster, names, retryd, say)
            retryd.stop_gracefully()
        finally:
            retryd.cleanup()
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-dead-letter-dialects", parse_args(__doc__), run))
