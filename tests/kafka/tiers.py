#!/usr/bin/python3
"""Tiered retry topics on a real Kafka, judged from outside with kafka-python,
retryctl and /proc.

retryd runs with three tiers over 4 partitions: tier1 (500 ms, 1 attempt),
tier2 (1.5 s, 1 attempt), tier3 (10 min, 1 attempt). `through-` records fail
twice and succeed in tier2; `slow-` records (1 KiB values) always fail, so
they pass tier1 and tier2 and then wait in tier3. Checked:

  * each record went through the tiers in order, with the attempt its tier
    makes (retryd-attempt 2, 3, 4), due its tier's delay after the failure
    that sent it there, and left a tier (for the next one, or the output)
    only once due;
  * `through-` records reached the output once, with attempt 3; no `slow-`
    record reached the output or the DLQ;
  * four waves of slow- records pile up in tier3 (GetStatus' retry_tiers
    backlog, the sum in retry_backlog, every record accounted for), while
    retryd holds one waiting record per tier3 partition (ListInFlight) and
    its resident memory stays flat: VmRSS after the fourth wave within
    16 MiB of the second (the first two warm the allocator up), where the
    backlog grew by 30,000 records of 1 KiB;
  * threads per tier: `threads start 1 --tier` adds a thread to tier2 that
    GetStatus shows with its tier; an unknown tier is refused;
  * SIGTERM exits 0.

Exit status 0 passed, 1 failed, 77 skipped (no cluster).
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402

PARTITIONS = 4
DELAYS_MS = {"tier1": 500, "tier2": 1500, "tier3": 600000}
VALUE = "x" * 1024
RSS_SLACK_MIB = 16
WAVES = 4


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--retryctl", required=True, help="the retryctl binary")
    p.add_argument("--through", type=int, default=200, help="through- records (200)")
    p.add_argument("--wave", type=int, default=15000, help="slow- records per wave (15000)")
    return p


def header(record, key):
    for k, v in record.headers:
        if k == key:
            return v.decode()
    raise Failure(f"record {record.key!r} lacks header {key}")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise Failure("no VmRSS")


def produce(cluster, topic, records):
    producer = cluster.producer(linger_ms=20, batch_size=256 * 1024)
    futures = [producer.send(topic, key=k.encode(), value=v.encode()) for k, v in records]
    producer.flush(timeout=120)
    failed = [f for f in futures if not f.succeeded()]
    producer.close(timeout=10)
    if failed:
        raise Failure(f"{len(failed)} records not acknowledged, e.g. {failed[0].exception!r}")


def run(args, work, say):
    cluster = real_kafka.Cluster()
    names = real_kafka.TestNames(cluster, "tiers",
                                 ["input", "tier1", "tier2", "tier3", "output", "dlq"],
                                 PARTITIONS, groups=["g"])
    with names:
        config = os.path.join(work, "retryd.textproto")
        tiers = "\n".join(
            f'  tiers {{ topic: "{names.topic[t]}" delay_ms: {d} max_attempts: 1 }}'
            for t, d in DELAYS_MS.items())
        real_kafka.retryd_config(config, cluster, names, work, f"""
retry {{
  threads: 1
  max_threads: 2
{tiers}
}}
processor {{
  simulate {{
    seed: {args.seed}
    rule {{ key_prefix: "through-" fail_attempts: 2 }}
    rule {{ key_prefix: "slow-" fail_attempts: 1000 }}
  }}
}}""")
        retryd = real_kafka.Retryd(args.retryd, config, work)

        def ctl(*argv):
            return real_kafka.retryctl(args.retryctl, retryd.address(), *argv, timeout=30)

        def status():
            return json.loads(ctl("--json", "status"))

        def tier_backlogs(s):
            return [int(t.get("backlog", "0")) for t in s.get("retry_tiers", [])]

        rss = []
        try:
            retryd.start()
            retryd.wait_assigned()
            s = status()
            listed = [t["topic"] for t in s.get("retry_tiers", [])]
            if listed != [names.topic[t] for t in DELAYS_MS]:
                raise Failure(f"GetStatus lists the tiers {listed}")
            if int(s["config"]["retry"]["max_attempts"]) != 4:
                raise Failure(f"effective retry.max_attempts {s['config']['retry']}, want 4")

            # Threads per tier.
            started = json.loads(ctl("--json", "threads", "start", "1", "--tier",
                                     names.topic["tier2"]))["thread_ids"]
            tier_of = {t["thread_id"]: t.get("tier", "") for t in status()["threads"]}
            if [tier_of.get(i) for i in started] != [names.topic["tier2"]]:
                raise Failure(f"started {started}, tiers {tier_of}")
            refused = subprocess.run([args.retryctl, "--addr", retryd.address(), "threads",
                                      "start", "1", "--tier", "nowhere"], capture_output=True)
            if refused.returncode != 64 + 3 or b"INVALID_FIELD" not in refused.stderr:
                raise Failure(f"an unknown tier: status {refused.returncode}, "
                              f"{refused.stderr.decode(errors='replace')}")
            say(f"thread {started[0]} started in tier2; an unknown tier refused")

            through = [(f"through-{i:05d}", f"t{i}") for i in range(args.through)]
            produce(cluster, names.topic["input"], through)
            total = 0
            for wave in range(WAVES):
                slow = [(f"slow-{wave}-{i:06d}", VALUE) for i in range(args.wave)]
                produce(cluster, names.topic["input"], slow)
                total += len(slow)
                want = [0, 0, total]
                real_kafka.wait_until(lambda: tier_backlogs(status()) == want, 180,
                                      f"tier backlogs {want}", poll=1, check=retryd.check)
                s = status()
                if int(s.get("retry_backlog", "0")) != total:
                    raise Failure(f"retry_backlog {s.get('retry_backlog')} != {total}")
                held = json.loads(ctl("--json", "inflight", "--limit", "100"))
                count = int(held.get("total", "0"))
                if count > PARTITIONS:
                    raise Failure(f"{count} records held with {total} waiting in tier3: a tier "
                                  f"holds one waiting record per partition ({PARTITIONS})")
                rss.append(rss_kib(retryd.proc.pid))
                say(f"wave {wave + 1}: tier3 backlog {total}, {count} records held, "
                    f"VmRSS {rss[-1] / 1024:.1f} MiB")
            retryd.stop_gracefully()
        finally:
            retryd.cleanup()

        failures = []
        grew = (rss[-1] - rss[1]) / 1024
        if grew > RSS_SLACK_MIB:
            failures.append(f"VmRSS grew {grew:.1f} MiB from the second wave to the last "
                            f"(bound {RSS_SLACK_MIB} MiB) while the backlog grew by "
                            f"{(WAVES - 2) * args.wave} records of 1 KiB")
        reader = cluster.consumer()
        try:
            read = {t: real_kafka.read_topic(reader, names.topic[t], PARTITIONS, 120)
                    for t in ["tier1", "tier2", "tier3", "output", "dlq"]}
        finally:
            reader.close()
        if read["dlq"]:
            failures.append(f"{len(read['dlq'])} records dead-lettered, none should be")
        out = [r.key.decode() for r in read["output"]]
        if sorted(out) != sorted(k for k, _ in through):
            failures.append(f"output has {len(out)} records, want the {len(through)} through- "
                            f"ones once each")
        for r in read["output"]:
            if header(r, "retryd-attempt") != "3":
                failures.append(f"{r.key!r} reached the output at attempt "
                                f"{header(r, 'retryd-attempt')}, want 3")
                break
        # The path of every record, tier by tier, judged on the timestamps
        # and retryd-due-ms headers Kafka holds. The stop hands the records
        # tier3's thread held back to tier3 (one per partition), unchanged:
        # those copies must carry the first one's attempt and due time.
        at = {}  # key -> its record in the tier before (or None).
        late, early, wrong, copies = [], [], [], []
        for n, tier in enumerate(["tier1", "tier2", "tier3"]):
            delay = DELAYS_MS[tier]
            seen = {}
            for r in read[tier]:
                key = r.key.decode()
                if key in seen:
                    first = seen[key]
                    same = all(header(r, h) == header(first, h)
                               for h in ("retryd-attempt", "retryd-due-ms"))
                    copies.append((tier, key, same))
                    continue
                if header(r, "retryd-attempt") != str(n + 2):
                    wrong.append(f"{key} in {tier} at attempt {header(r, 'retryd-attempt')}")
                due = int(header(r, "retryd-due-ms"))
                if not delay - 1000 < due - r.timestamp <= delay:
                    late.append(f"{key} in {tier}: due {due - r.timestamp} ms after it was "
                                f"written, want {delay}")
                before = at.get(key)
                if n > 0 and (before is None or r.timestamp < int(header(before, "retryd-due-ms"))):
                    early.append(f"{key} reached {tier} before it was due in the tier before")
                seen[key] = r
            want = {k for k, _ in through} if n < 2 else set()
            want |= {k for k in at if k.startswith("slow-")} if n > 0 else set()
            if n == 0:
                want |= {f"slow-{w}-{i:06d}" for w in range(WAVES) for i in range(args.wave)}
            if set(seen) != want:
                failures.append(f"{tier} holds {len(seen)} keys, want {len(want)}")
            at = seen
        handed_back = [c for c in copies if c[0] == "tier3"]
        if len(handed_back) != len(copies) or len(handed_back) > PARTITIONS:
            failures.append(f"copies in the tiers: {len(copies)}, want at most {PARTITIONS}, all "
                            f"in tier3 (what its thread held at the stop), e.g. {copies[:2]}")
        if not all(same for _, _, same in copies):
            failures.append(f"a handed-back copy changed its attempt or due time: {copies}")
        tier2 = {r.key.decode(): r for r in read["tier2"]}
        for r in read["output"]:
            before = tier2.get(r.key.decode())
            if before is None or r.timestamp < int(header(before, "retryd-due-ms")):
                early.append(f"{r.key!r} reached the output before it was due in tier2")
        for what, items in (("wrong attempt", wrong), ("due not its tier's delay", late),
                            ("moved before due", early)):
            if items:
                failures.append(f"{len(items)} records: {what}, e.g. {items[0]}")
        say(f"{len(read['tier1'])}/{len(read['tier2'])}/{len(read['tier3'])} records in the "
            f"tiers ({len(copies)} handed back at the stop), {len(out)} in the output; VmRSS "
            + " -> ".join(f"{k / 1024:.1f}" for k in rss) + f" MiB over {WAVES} waves of "
            f"{args.wave}")
        status_code = real_kafka.verdict_status(say, failures, log_of=retryd.log())
    cluster.close()
    return status_code


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-tiers", parse_args(), run))
