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
    record's coordinates, its error and the group give;
  * the dead letter's own timestamp: with Streams on, the failed record's,
    as Kafka Streams 4.2's ExceptionHandlerUtils gives it (the poison
    record is an hour old, so the time of dead-lettering would not pass);
    its retryd-dead-lettered-ms still says when;
  * a timestamp the dead-letter topic refuses: its
    message.timestamp.before.max.ms is 2 hours, and a 3-hour-old poison
    record's dead letter (INVALID_TIMESTAMP) is written again as one cut
    to fit, stamped when written, its 40 KiB value whole (not the 16 KiB
    form), rather than sent again for ever;
  * LogAppendTime: a record of an input topic with
    message.timestamp.type=LogAppendTime fails twice, so it goes through the
    retry topic (which carries retryd-original-timestamp-type) and a retry
    thread dead-letters it: kafka_dlt-original-timestamp-type says
    LogAppendTime, as Spring's DeadLetterRecordManager writes it from the
    consumer record's timestampType();
  * without Streams: the same retryd restarted with Spring's dialect alone
    dead-letters an hour-old record stamped when it was dead-lettered, as
    Spring's writer (which leaves the timestamp to its producer) and
    retryd's own dead letters have it.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import os
import struct
import sys
import time
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
HOUR_MS = 3_600_000
CREATE_TIME, LOG_APPEND_TIME = 0, 1  # kafka-python's ConsumerRecord.timestamp_type.


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


def now_ms():
    return int(time.time() * 1000)


def produce(cluster, names, topic, key, timestamp_ms=None, value=b"p"):
    """Sends `key` to partition 1 of `names.topic[topic]`; what was sent and
    the record as a consumer reads it back (its timestamp and type)."""
    producer = cluster.producer()
    sent = producer.send(names.topic[topic], key=key, value=value, partition=1,
                         timestamp_ms=timestamp_ms).get(30)
    producer.flush()
    producer.close()
    return sent, [r for r in read(cluster, names.topic[topic]) if r.key == key][0]


def dead_letter(cluster, names, key, retryd):
    def dead():
        found = [r for r in read(cluster, names.topic["dlq"]) if r.key == key]
        return found[0] if found else None

    return real_kafka.wait_until(dead, 60, f"{key!r} dead-lettered", check=retryd.check)


def check_written(cluster, names, retryd, say):
    # An hour old: stamped when it was dead-lettered, the dead letter would
    # be an hour younger.
    sending_ms = now_ms()
    sent, source = produce(cluster, names, "input", b"poison-1", sending_ms - HOUR_MS)
    record = dead_letter(cluster, names, b"poison-1", retryd)
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
    dead_lettered_ms = int(dict(headers)["retryd-dead-lettered-ms"])
    if (record.timestamp, record.timestamp_type) != (source.timestamp, CREATE_TIME) or \
            dead_lettered_ms < sending_ms:
        raise Failure(f"the dead letter's timestamp is {record.timestamp} (type "
                      f"{record.timestamp_type}), retryd-dead-lettered-ms {dead_lettered_ms}; "
                      f"wanted the poison record's, {source.timestamp} (CreateTime), as Kafka "
                      f"Streams gives it, and dead-lettered at {sending_ms} or later")
    say(f"timestamp: with Streams on, the dead letter has the failed record's "
        f"({(dead_lettered_ms - record.timestamp) / 1000:.0f} s before it was dead-lettered)")


def check_refused_timestamp(cluster, names, retryd, say):
    sending_ms = now_ms()
    # Larger than the smallest form (16 KiB), which a refusal of its size
    # alone would have it cut to.
    value = bytes(range(256)) * 160
    _, source = produce(cluster, names, "input", b"poison-old", sending_ms - 3 * HOUR_MS, value)
    record = dead_letter(cluster, names, b"poison-old", retryd)
    headers = dict(header_list(record))
    error = headers.get("retryd-error", b"")
    if record.timestamp < sending_ms or record.value != value or \
            b"dead-letter record refused by Kafka" not in error or \
            headers.get("retryd-truncated") is None or \
            headers.get("kafka_dlt-original-timestamp") != struct.pack(">q", source.timestamp):
        raise Failure(f"a dead letter whose original timestamp the DLQ refuses: timestamp "
                      f"{record.timestamp} (wanted {sending_ms} or later), value of "
                      f"{len(record.value or b'')} bytes (wanted {len(value)}), headers {headers}")
    say(f"refused timestamp: written again stamped when written, its {len(value)}-byte value "
        f"whole ({error.decode()!r})")


def check_log_append_time(cluster, names, retryd, say):
    sent, source = produce(cluster, names, "appended", b"tired-1")
    if source.timestamp_type != LOG_APPEND_TIME:
        raise Failure(f"the broker gave {names.topic['appended']}'s record timestamp type "
                      f"{source.timestamp_type}, not LogAppendTime: the test cannot judge")
    record = dead_letter(cluster, names, b"tired-1", retryd)
    headers = dict(header_list(record))
    retried = [r for r in read(cluster, names.topic["retry"]) if r.key == b"tired-1"]
    want = {
        "retryd-attempt": b"2",  # The retry thread's attempt.
        "retryd-original-timestamp-ms": str(source.timestamp).encode(),
        "retryd-original-timestamp-type": b"LogAppendTime",
        "kafka_dlt-original-topic": names.topic["appended"].encode(),
        "kafka_dlt-original-offset": struct.pack(">q", sent.offset),
        "kafka_dlt-original-timestamp": struct.pack(">q", source.timestamp),
        "kafka_dlt-original-timestamp-type": b"LogAppendTime",
    }
    got = {k: headers.get(k) for k in want}
    through_retry = len(retried) == 1 and \
        dict(header_list(retried[0])).get("retryd-original-timestamp-type") == b"LogAppendTime"
    if got != want or not through_retry or record.timestamp != source.timestamp:
        raise Failure(f"a LogAppendTime record dead-lettered by a retry thread: {got}, "
                      f"timestamp {record.timestamp}; through the retry topic as "
                      f"{[header_list(r) for r in retried]}\nwanted {want}, timestamp "
                      f"{source.timestamp}")
    say("LogAppendTime: kept through the retry topic, a retry thread's dead letter says "
        "kafka_dlt-original-timestamp-type LogAppendTime")


def check_without_streams(cluster, names, retryd, config, say):
    """`retryd` restarted with Spring's dialect alone: the dead letter is
    stamped when it was dead-lettered."""
    with open(config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text.replace(STREAMS_ON, "dead_letter_dialects: [DEAD_LETTER_DIALECT_SPRING]"))
    retryd.start()
    retryd.wait_assigned()
    sending_ms = now_ms()
    _, source = produce(cluster, names, "input", b"poison-2", sending_ms - HOUR_MS)
    record = dead_letter(cluster, names, b"poison-2", retryd)
    headers = dict(header_list(record))
    if record.timestamp < sending_ms or "__streams.errors.topic" in headers or \
            headers.get("kafka_dlt-original-timestamp") != struct.pack(">q", source.timestamp):
        raise Failure(f"with Spring's dialect alone the dead letter's timestamp is "
                      f"{record.timestamp}, wanted {sending_ms} or later (the source's is "
                      f"{source.timestamp}); headers {headers}")
    say("without Streams: the dead letter stamped when it was dead-lettered, the original "
        "timestamp in Spring's header")


STREAMS_ON = "dead_letter_dialects: [DEAD_LETTER_DIALECT_SPRING, DEAD_LETTER_DIALECT_STREAMS]"


def run(args, work, say):
    messages = message_classes(args.proto_dir, work)
    cluster = real_kafka.Cluster()
    names = real_kafka.TestNames(
        cluster, "dlq-dialects", ["input", "appended", "retry", "output", "dlq"], PARTITIONS,
        groups=["g"], configs_of={
            "appended": {"message.timestamp.type": "LogAppendTime"},
            "dlq": {"message.timestamp.before.max.ms": str(2 * HOUR_MS)}})
    with names:
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
{STREAMS_ON}
input_topics: "{names.topic['appended']}"
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
    rule {{ key_prefix: "tired-" fail_attempts: 100 }}
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
            check_refused_timestamp(cluster, names, retryd, say)
            check_log_append_time(cluster, names, retryd, say)
            retryd.stop_gracefully()
            check_without_streams(cluster, names, retryd, config, say)
            retryd.stop_gracefully()
        finally:
            retryd.cleanup()
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-dead-letter-dialects", parse_args(__doc__), run))
