#!/usr/bin/python3
"""The dead-letter tools on a real Kafka, judged from outside with
kafka-python and a client written from the protos alone (control_api.py's).

The dead-letter topic (4 partitions) is filled with 2,000 dead letters as
retryd writes them (its headers, reasons OUT_OF_STOCK and FRAUD, attempts 2
to 4, first failures spread over an hour), plus retryd's own dead letters of
poison records it consumed. Checked:

  * filters: each ListDeadLetters filter (key prefix, error text, reason,
    original topic and partition, first-failure range, attempts, DLQ
    partitions) returns exactly the records it says, paged (137 a page) with
    no record twice or missing;
  * a dry run counts per partition and per reason what a redrive would
    send, and writes nothing (no record, no group);
  * 2,000 records redriven at 100/s to a topic: every one there once, with
    retryd-redriven-from and retryd-redrive-count 1; no 10 s window of their
    CreateTime holds more than 1.1 x 100 x 10 plus one burst (a quarter
    second of the rate); a second redrive meanwhile is FAILED_PRECONDITION
    REDRIVE_RUNNING;
  * the pace where records land: redrives at 40/s and 20/s to topics
    stamped by the broker (LogAppendTime), as a consumer sees them arrive:
    no 1 s window from the first record holds more than the rate plus a
    quarter second's burst, no 2 s window more than twice the rate plus it
    (the token bucket's bound: a record unacknowledged holds back a token,
    so no wait in the producer turns into a burst);
  * a cancelled redrive (reason FRAUD, 200/s): CancelOperation returns with
    the operation ended CANCELLED, its redriven count equal to the records
    in its target, all of them FRAUD, and nothing arrives there after;
  * SIGKILL of retryd mid-redrive (reason FRAUD, 200/s): the next start
    resumes it under its id; every record reaches the target at least once,
    duplicates at most the rate times the commit interval (1 s), plus a
    second's worth for the flush before a commit; the ended operation and
    its audit line count the whole redrive (total and scanned the whole
    range, matched and redriven every FRAUD record once), and its
    sent_twice equals the duplicates in the target;
  * the loop guard: poison records retryd dead-letters are redriven to
    their origin three times (the first without reset_attempts, so through
    the retry topic with one more attempt), purging the older copies each
    time; the fourth redrive skips every one (max_redrives 3);
  * purge: the marks hide exactly the range below them from ListDeadLetters;
    with delete_records the partition's log start moves there too.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import collections
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402
from control_api import Control, message_classes, parse_args  # noqa: E402

import grpc  # noqa: E402
from kafka import TopicPartition  # noqa: E402

PARTITIONS = 4
SEEDED = 2000
POISON = 20
RATE = 100
FAST_RATE = 200
COMMIT_INTERVAL_S = 1.0
# OperationState.
RUNNING, SUCCEEDED, FAILED, CANCELLED = 1, 2, 3, 4
HOUR_MS = 3_600_000


class Seeded:
    """One synthetic dead letter and what its headers say."""

    def __init__(self, i, input_topic, base_ms):
        self.key = f"{'vip' if i % 10 == 0 else 'k'}-{i:05d}"
        self.reason = "shop.example/OUT_OF_STOCK" if i % 2 == 0 else "shop.example/FRAUD"
        self.error = f"UNAVAILABLE: {'no stock' if i % 2 == 0 else 'card declined'} #{i}"
        self.attempts = 2 + i % 3
        self.original_topic = input_topic
        self.original_partition = i % 3
        self.first_failure_ms = base_ms + (i * HOUR_MS) // SEEDED
        self.value = f"order-{i}".encode()

    def headers(self):
        h = {
            "retryd-attempt": str(self.attempts),
            "retryd-due-ms": str(self.first_failure_ms + 1000),
            "retryd-first-failure-ms": str(self.first_failure_ms),
            "retryd-original-topic": self.original_topic,
            "retryd-original-partition": str(self.original_partition),
            "retryd-original-offset": str(1000 + int(self.key.split("-")[1])),
            "retryd-original-timestamp-ms": str(self.first_failure_ms - 5),
            "retryd-error": self.error,
            "retryd-first-error": "DEADLINE_EXCEEDED: first",
            "retryd-error-reason": self.reason,
            "retryd-dead-lettered-ms": str(self.first_failure_ms + 9000),
            "retryd-dead-lettered-by": "pod-a/thread-3",
        }
        return [("trace", b"t-" + self.key.encode())] + [(k, v.encode()) for k, v in h.items()]


class Tools:
    """The dead-letter RPCs of one retryd."""

    def __init__(self, control):
        self.c = control

    def list_all(self, page_size=137, **filter_fields):
        keys, token, pages = [], "", 0
        while True:
            page = self.c.call("ListDeadLetters", "ListDeadLettersRequest",
                               "ListDeadLettersResponse", page_size=page_size, page_token=token,
                               filter=self.c.m["retryd.v1.DeadLetterFilter"](**filter_fields))
            pages += 1
            keys.extend(r.key.decode() for r in page.records)
            token = page.next_page_token
            if not token:
                return keys, pages
            if pages > 1000:
                raise Failure("ListDeadLetters did not end within 1,000 pages")

    def redrive(self, **fields):
        filter_fields = fields.pop("filter", {})
        return self.c.call("StartRedrive", "StartRedriveRequest", "Operation",
                           request_id=str(uuid.uuid4()),
                           filter=self.c.m["retryd.v1.DeadLetterFilter"](**filter_fields),
                           **fields)

    def get(self, op_id):
        return self.c.call("GetOperation", "GetOperationRequest", "Operation", id=op_id)

    def wait_ended(self, op_id, timeout, check):
        real_kafka.wait_until(lambda: self.get(op_id).done, timeout,
                              f"operation {op_id} to end", check=check)
        op = self.get(op_id)
        return op

    def purge(self, **fields):
        return self.c.call("PurgeDeadLetters", "PurgeDeadLettersRequest",
                           "PurgeDeadLettersResponse", request_id=str(uuid.uuid4()), **fields)


def header(record, key):
    for k, v in record.headers or ():
        if k == key:
            return v.decode()
    return None


def check_filters(tools, seeded, input_topic, say):
    def expect(what, keys, predicate):
        want = sorted(s.key for s in seeded if predicate(s))
        if sorted(keys) != want:
            missing = sorted(set(want) - set(keys))[:5]
            extra = sorted(set(keys) - set(want))[:5]
            raise Failure(f"filter {what}: {len(keys)} records, wanted {len(want)} "
                          f"(missing {missing}, extra {extra}, repeated "
                          f"{len(keys) - len(set(keys))})")
    everything, pages = tools.list_all()
    expect("none", everything, lambda s: True)
    mid = seeded[SEEDED // 2].first_failure_ms
    cases = [
        ("key_prefix vip-", dict(key_prefix=b"vip-"), lambda s: s.key.startswith("vip-")),
        ("error 'card declined'", dict(error_contains="card declined"),
         lambda s: "card declined" in s.error),
        ("reason FRAUD", dict(reason="FRAUD"), lambda s: s.reason.endswith("/FRAUD")),
        ("reason shop.example/OUT_OF_STOCK", dict(reason="shop.example/OUT_OF_STOCK"),
         lambda s: s.reason == "shop.example/OUT_OF_STOCK"),
        ("original partition 1", dict(original_topic=input_topic, original_partition=1),
         lambda s: s.original_partition == 1),
        ("first failure in the second half hour",
         dict(first_failure_from_unix_ms=mid, first_failure_to_unix_ms=mid + HOUR_MS // 4),
         lambda s: mid <= s.first_failure_ms < mid + HOUR_MS // 4),
        ("attempts 3..4", dict(min_attempts=3, max_attempts=4), lambda s: 3 <= s.attempts <= 4),
        ("vip FRAUD with 4 attempts", dict(key_prefix=b"vip-", reason="FRAUD", min_attempts=4),
         lambda s: s.key.startswith("vip-") and s.reason.endswith("/FRAUD") and s.attempts >= 4),
    ]
    for what, fields, predicate in cases:
        keys, _ = tools.list_all(**fields)
        expect(what, keys, predicate)
    # DLQ partitions: the seeded records are keyed, so kafka-python placed them.
    by_partition = collections.Counter()
    for p in range(PARTITIONS):
        keys, _ = tools.list_all(partitions=[p])
        by_partition[p] = len(keys)
    if sum(by_partition.values()) != SEEDED or len(by_partition) != PARTITIONS:
        raise Failure(f"per DLQ partition: {dict(by_partition)}")
    first = tools.c.call("ListDeadLetters", "ListDeadLettersRequest", "ListDeadLettersResponse",
                         page_size=1)
    r = first.records[0]
    if not (r.error_reason and r.first_error == "DEADLINE_EXCEEDED: first" and
            r.dead_lettered_by == "pod-a/thread-3" and r.attempts >= 2 and
            r.original_topic == input_topic and [h.key for h in r.headers] == ["trace"]):
        raise Failure(f"a record's decoded metadata: {r}")
    tools.c.refused("a page token not from retryd", grpc.StatusCode.INVALID_ARGUMENT,
                    "INVALID_FIELD", "ListDeadLetters", "ListDeadLettersRequest",
                    "ListDeadLettersResponse", page_token="bm9wZQ")
    say(f"filters: {len(cases) + 1} filters and {PARTITIONS} partitions select exactly their "
        f"records; {SEEDED} listed in {pages} pages of 137")


def dry_run(tools, cluster, names, retryd, say):
    op = tools.redrive(dry_run=True, target_topic=names.topic["redriven"],
                       filter=dict(reason="OUT_OF_STOCK"))
    op = tools.wait_ended(op.id, 60, retryd.check)
    want = SEEDED // 2
    result = op.redrive
    if op.state != SUCCEEDED or result.progress.redriven != want or not result.progress.dry_run:
        raise Failure(f"dry run: {op}")
    reasons = {c.key: c.matched for c in result.by_reason}
    if reasons != {"shop.example/OUT_OF_STOCK": want}:
        raise Failure(f"dry run per reason: {reasons}")
    if sum(c.matched for c in result.by_partition) != want:
        raise Failure(f"dry run per partition: {list(result.by_partition)}")
    consumer = cluster.consumer()
    try:
        ends = real_kafka.end_offsets(consumer, names.topic["redriven"], PARTITIONS)
    finally:
        consumer.close()
    groups = [g for g, _ in cluster.admin.list_consumer_groups()
              if g.startswith(names.group["g"] + ".ops.")]
    if any(ends.values()) or groups:
        raise Failure(f"the dry run wrote: target ends {ends}, groups {groups}")
    say(f"dry run: {want} would be redriven ({len(result.by_partition)} partitions), nothing "
        f"written")


def read_target(cluster, names, topic_name):
    consumer = cluster.consumer()
    try:
        return real_kafka.read_topic(consumer, names.topic[topic_name], PARTITIONS, 60)
    finally:
        consumer.close()


def rated_redrive(tools, cluster, names, retryd, say):
    op = tools.redrive(target_topic=names.topic["redriven"], rate_per_s=RATE, reset_attempts=True)
    if op.state != RUNNING or op.kind != 2:
        raise Failure(f"StartRedrive answered {op}")
    real_kafka.wait_until(lambda: tools.get(op.id).progress.redrive.redriven > 50, 30,
                          "the redrive under way", check=retryd.check)
    tools.c.refused("a second redrive of the same DLQ", grpc.StatusCode.FAILED_PRECONDITION,
                    "REDRIVE_RUNNING", "StartRedrive", "StartRedriveRequest", "Operation",
                    target_topic=names.topic["redriven2"])
    running = tools.get(op.id).progress.redrive
    op = tools.wait_ended(op.id, SEEDED / RATE + 60, retryd.check)
    if op.state != SUCCEEDED or op.redrive.progress.redriven != SEEDED:
        raise Failure(f"the redrive ended {op}")
    records = read_target(cluster, names, "redriven")
    keys = collections.Counter(r.key.decode() for r in records)
    if len(keys) != SEEDED or max(keys.values()) != 1:
        raise Failure(f"target holds {len(records)} records, {len(keys)} keys")
    bad = [r for r in records if header(r, "retryd-redrive-count") != "1" or
           not (header(r, "retryd-redriven-from") or "").startswith(names.topic["dlq"] + "/")
           or header(r, "retryd-attempt") is not None]
    if bad:
        raise Failure(f"{len(bad)} redriven records lack their lineage or kept retry state, "
                      f"e.g. {bad[0].headers}")
    times = sorted(r.timestamp for r in records)
    # One burst: the quarter second a redrive may make up after a flush.
    limit = 1.1 * RATE * 10 + RATE / 4
    worst, j = 0, 0
    for i, t in enumerate(times):
        while times[j] < t - 10_000:
            j += 1
        worst = max(worst, i - j + 1)
    span = (times[-1] - times[0]) / 1000
    say(f"rate: {SEEDED} redriven at {RATE}/s over {span:.1f} s (CreateTime); busiest 10 s "
        f"window {worst} records (limit {limit:.0f}); progress while running: rate "
        f"{running.rate_per_s:.0f}/s, ETA {running.eta_ms} ms")
    if worst > limit:
        raise Failure(f"a 10 s window holds {worst} records, more than {limit:.0f}")
    groups = [g for g, _ in cluster.admin.list_consumer_groups()
              if g.startswith(names.group["g"] + ".ops.")]
    if groups:
        raise Failure(f"the ended redrive left its group: {groups}")


def busiest(times, window_ms):
    """The most of `times` (sorted, ms) in any window [t, t + window_ms)."""
    worst, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window_ms:
            j += 1
        worst = max(worst, i - j + 1)
    return worst


def paced_redrive(tools, cluster, names, retryd, topic_name, rate, filter_fields, say):
    """A redrive at `rate` to a topic the broker stamps: judged by when its
    records landed, as a consumer sees them arrive."""
    topic = names.topic[topic_name]
    op = tools.redrive(target_topic=topic, rate_per_s=rate, reset_attempts=True,
                       filter=filter_fields)
    op = tools.wait_ended(op.id, 120, retryd.check)
    if op.state != SUCCEEDED:
        raise Failure(f"the redrive at {rate}/s ended {op}")
    records = read_target(cluster, names, topic_name)
    if len(records) != op.redrive.progress.redriven or not records:
        raise Failure(f"target holds {len(records)}, the redrive says "
                      f"{op.redrive.progress.redriven}")
    if any(r.timestamp_type != 1 for r in records):
        raise Failure("the target's records are not stamped by the broker (LogAppendTime)")
    times = sorted(r.timestamp for r in records)
    burst = rate / 4
    one, two = busiest(times, 1000), busiest(times, 2000)
    first_quarter = sum(1 for t in times if t < times[0] + 250)
    say(f"pace at {rate}/s: {len(times)} records over {(times[-1] - times[0]) / 1000:.1f} s "
        f"(LogAppendTime); busiest 1 s window {one} (limit {rate + burst:.0f}), busiest 2 s "
        f"window {two} (limit {2 * rate + burst:.0f}); first 250 ms {first_quarter}")
    # The bound is exact (see RedrivePacer); one record of slack for the
    # broker's and retryd's clocks rounding to the millisecond.
    if one > rate + burst + 1 or two > 2 * rate + burst + 1:
        raise Failure(f"at {rate}/s a 1 s window holds {one}, a 2 s window {two}: more than the "
                      f"rate plus a quarter second's burst ({rate + burst:.0f}, "
                      f"{2 * rate + burst:.0f})")


def cancelled_redrive(tools, cluster, names, retryd, say):
    op = tools.redrive(target_topic=names.topic["redriven2"], rate_per_s=FAST_RATE,
                       filter=dict(reason="FRAUD"))
    real_kafka.wait_until(lambda: tools.get(op.id).progress.redrive.redriven > 100, 30,
                          "the redrive under way", check=retryd.check)
    cancelled = tools.c.call("CancelOperation", "CancelOperationRequest", "Operation", id=op.id,
                             request_id=str(uuid.uuid4()))
    if not cancelled.done or cancelled.state != CANCELLED:
        raise Failure(f"CancelOperation returned before the redrive ended: {cancelled}")
    count = cancelled.redrive.progress.redriven
    first = read_target(cluster, names, "redriven2")
    time.sleep(2)  # Nothing to wait on: checks that nothing arrives during it.
    second = read_target(cluster, names, "redriven2")
    not_fraud = [r for r in second if "card declined" not in header(r, "retryd-error")]
    if len(first) != count or len(second) != count or not_fraud:
        raise Failure(f"cancelled at {count} redriven: target held {len(first)}, then "
                      f"{len(second)} 2 s later; {len(not_fraud)} not FRAUD")
    say(f"cancel: CancelOperation returned the redrive CANCELLED at {count} redriven; the "
        f"target holds exactly {count}, all FRAUD, and nothing after")


def killed_redrive(tools, cluster, names, retryd, seeded, config_messages, say):
    in_range = sum(dlq_ends(cluster, names).values())
    fraud = {s.key for s in seeded if s.reason.endswith("/FRAUD")}
    op = tools.redrive(target_topic=names.topic["redriven3"], rate_per_s=FAST_RATE,
                       filter=dict(reason="FRAUD"))
    real_kafka.wait_until(lambda: tools.get(op.id).progress.redrive.redriven > 300, 30,
                          "the redrive under way", check=retryd.check)
    at_kill = tools.get(op.id).progress.redrive.redriven
    retryd.kill()
    retryd.start()
    control = Control(retryd.address(), config_messages)
    tools.c = control
    real_kafka.wait_until(lambda: op.id in [o.id for o in control.call(
        "ListOperations", "ListOperationsRequest", "ListOperationsResponse").operations], 60,
        f"redrive {op.id} resumed after the restart", check=retryd.check)
    resumed = tools.get(op.id)
    if not resumed.progress.redrive.resumed:
        raise Failure(f"the operation after the restart is not marked resumed: {resumed}")
    ended = tools.wait_ended(op.id, SEEDED / FAST_RATE + 60, retryd.check)
    if ended.state != SUCCEEDED:
        raise Failure(f"the resumed redrive ended {ended}")
    records = read_target(cluster, names, "redriven3")
    keys = collections.Counter(r.key.decode() for r in records)
    duplicates = sum(n - 1 for n in keys.values())
    bound = FAST_RATE * COMMIT_INTERVAL_S + FAST_RATE
    p = ended.redrive.progress
    say(f"SIGKILL at {at_kill} redriven: resumed as {op.id}; {len(keys)} of {len(fraud)} keys "
        f"in the target, {duplicates} duplicates (bound {bound:.0f}); the operation says "
        f"{p.scanned} of {p.total} scanned (range {in_range}), {p.matched} matched, "
        f"{p.redriven} redriven, {p.sent_twice} sent twice")
    if set(keys) != fraud:
        raise Failure(f"{len(fraud - set(keys))} records never redriven after the kill, "
                      f"{len(set(keys) - fraud)} not FRAUD")
    if duplicates > bound:
        raise Failure(f"{duplicates} duplicates, more than {bound:.0f}")
    wanted = (in_range, in_range, len(fraud), len(fraud), 0, duplicates)
    got = (p.total, p.scanned, p.matched, p.redriven, p.skipped, p.sent_twice)
    if got != wanted:
        raise Failure(f"the resumed redrive reports (total, scanned, matched, redriven, skipped, "
                      f"sent_twice) {got}; the range, the FRAUD records and the duplicates in "
                      f"the target are {wanted}")
    audit = (f"ended SUCCEEDED: {in_range} of {in_range} dead letters scanned, {len(fraud)} "
             f"matched, {len(fraud)} redriven, 0 skipped by the loop guard, {duplicates} sent "
             f"twice")
    if audit.encode() not in retryd.log_text():
        raise Failure(f"no audit line saying {audit!r}")
    return control


def dlq_ends(cluster, names):
    consumer = cluster.consumer()
    try:
        ends = real_kafka.end_offsets(consumer, names.topic["dlq"], PARTITIONS)
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        consumer.close()


def poison_copies(cluster, names, since):
    """The poison records in the DLQ at or after `since` ({partition: offset})."""
    return [r for r in read_target(cluster, names, "dlq")
            if r.key.decode().startswith("poison-") and r.offset >= since[r.partition]]


def loop_guard(tools, cluster, names, retryd, say):
    marks = dlq_ends(cluster, names)
    # Everything before the poison records' first dead letters is purged;
    # each round then purges the copies it redrove.
    tools.purge(up_to=marks)
    producer = cluster.producer()
    for i in range(POISON):
        producer.send(names.topic["input"], key=f"poison-{i:03d}".encode(), value=b"p")
    producer.flush()
    producer.close()
    real_kafka.wait_until(lambda: len(poison_copies(cluster, names, marks)) >= POISON, 60,
                          "the poison records dead-lettered", check=retryd.check)
    rounds = []
    for round_no in range(1, 5):
        before = dlq_ends(cluster, names)
        listed, _ = tools.list_all(key_prefix=b"poison-")
        if sorted(set(listed)) != sorted(listed) or len(listed) != POISON:
            raise Failure(f"round {round_no}: the DLQ lists {len(listed)} poison records after "
                          f"the purge, wanted {POISON}, once each")
        op = tools.redrive(reset_attempts=round_no != 1, rate_per_s=1000,
                           filter=dict(key_prefix=b"poison-"))
        op = tools.wait_ended(op.id, 60, retryd.check)
        p = op.redrive.progress
        rounds.append((p.redriven, p.skipped))
        if round_no == 4:
            if op.state != SUCCEEDED or p.redriven != 0 or p.skipped != POISON:
                raise Failure(f"round 4: redriven {p.redriven}, skipped {p.skipped}; wanted every "
                              f"one skipped")
            break
        if op.state != SUCCEEDED or p.redriven != POISON or p.skipped != 0:
            raise Failure(f"round {round_no}: {op}")
        real_kafka.wait_until(lambda: len(poison_copies(cluster, names, before)) >= POISON, 60,
                              f"round {round_no}'s records dead-lettered again",
                              check=retryd.check)
        back = poison_copies(cluster, names, before)
        counts = {header(r, "retryd-redrive-count") for r in back}
        attempts = {header(r, "retryd-attempt") for r in back}
        want_attempts = {"3"} if round_no == 1 else {"2"}
        if counts != {str(round_no)} or attempts != want_attempts:
            raise Failure(f"round {round_no}: back in the DLQ with redrive counts {counts}, "
                          f"attempts {attempts} (wanted {round_no}, {want_attempts})")
        tools.purge(up_to=before)
    say(f"loop guard: (redriven, skipped) per round {rounds}; the first round went through the "
        f"retry topic with one more attempt (3), the others started over (2)")


def purge_hides(tools, cluster, names, say):
    ends = dlq_ends(cluster, names)
    listed_before, _ = tools.list_all()
    # A fresh purge group state: move partition 0's mark to its end with
    # DeleteRecords, and check that the range is gone from the listing and
    # the log.
    response = tools.purge(up_to={0: ends[0]}, delete_records=True)
    part = [p for p in response.partitions if p.partition == 0][0]
    if part.to != ends[0] or not part.deleted:
        raise Failure(f"purge answered {response}")
    consumer = cluster.consumer()
    try:
        start = consumer.beginning_offsets([TopicPartition(names.topic["dlq"], 0)])
    finally:
        consumer.close()
    listed_after, _ = tools.list_all()
    in_zero, _ = tools.list_all(partitions=[0])
    if in_zero or start[TopicPartition(names.topic["dlq"], 0)] != ends[0]:
        raise Failure(f"after purging partition 0 to {ends[0]}: {len(in_zero)} still listed, "
                      f"log start {start}")
    say(f"purge: partition 0 hidden and deleted up to {ends[0]}; {len(listed_before)} listed "
        f"before, {len(listed_after)} after")


def run(args, work, say):
    messages = message_classes(args.proto_dir, work)
    cluster = real_kafka.Cluster()
    names = real_kafka.TestNames(
        cluster, "dead-letters",
        ["input", "retry", "output", "dlq", "redriven", "redriven2", "redriven3", "paced40",
         "paced20"], PARTITIONS,
        configs_of={name: {"message.timestamp.type": "LogAppendTime"}
                    for name in ("paced40", "paced20")},
        groups=["g"])
    with names:
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
retry {{
  topic: "{names.topic['retry']}"
  threads: 1
  max_attempts: 2
  backoff {{ initial_ms: 100 multiplier: 1.0 max_ms: 100 }}
}}
processor {{
  simulate {{
    seed: {args.seed}
    rule {{ key_prefix: "poison-" permanent: false fail_attempts: 1000 }}
  }}
}}""")
        base_ms = int(time.time() * 1000) - 2 * HOUR_MS
        seeded = [Seeded(i, names.topic["input"], base_ms) for i in range(SEEDED)]
        producer = cluster.producer()
        for s in seeded:
            producer.send(names.topic["dlq"], key=s.key.encode(), value=s.value,
                          headers=s.headers())
        producer.flush()
        producer.close()
        retryd = real_kafka.Retryd(args.retryd, config, work)
        try:
            retryd.start()
            control = Control(retryd.address(), messages)
            retryd.wait_assigned()
            tools = Tools(control)
            check_filters(tools, seeded, names.topic["input"], say)
            dry_run(tools, cluster, names, retryd, say)
            rated_redrive(tools, cluster, names, retryd, say)
            # 200 and 100 records: 5 s each.
            paced_redrive(tools, cluster, names, retryd, "paced40", 40, dict(key_prefix=b"vip"),
                          say)
            paced_redrive(tools, cluster, names, retryd, "paced20", 20,
                          dict(key_prefix=b"vip", partitions=[0, 1]), say)
            cancelled_redrive(tools, cluster, names, retryd, say)
            killed_redrive(tools, cluster, names, retryd, seeded, messages, say)
            retryd.wait_assigned()
            loop_guard(tools, cluster, names, retryd, say)
            purge_hides(tools, cluster, names, say)
            retryd.stop_gracefully()
        finally:
            retryd.cleanup()
            ours = [g for g, _ in cluster.admin.list_consumer_groups()
                    if g.startswith(names.group["g"] + ".")]
            if ours:
                try:
                    cluster.admin.delete_consumer_groups(ours)
                except Exception as e:  # noqa: BLE001 (cleanup only)
                    print(f"note: could not delete groups {ours}: {e!r}", flush=True)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-dead-letters", parse_args(__doc__), run))
