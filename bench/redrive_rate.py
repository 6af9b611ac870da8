#!/usr/bin/python3
"""How close a redrive comes to the rate it is given, on a real Kafka.

The kafka label's kafka_dead_letters holds a redrive to its upper bound (no
10 s window above 1.1 x the rate, plus one second's worth); this measures
the lower bound: for each set rate, the rate the redriven records' CreateTime
shows, as a ratio of the set rate. Each rate redrives its own records (key
prefix r<rate>-, ten seconds' worth, at most --max-records) out of one
dead-letter topic, to a topic of its own. The baseline measured in the
same run is kafka-python's producer writing the seeded dead letters: the
ceiling a redrive is compared with when the set rate is above what one
producer on this machine reaches.

  RETRYD_TEST_KAFKA=host:port bench/redrive_rate.py --retryd build/retryd \\
      --proto-dir proto [--rates 100,1000,10000,100000] [--out FILE.csv]

scripts/bench.sh redrive builds retryd, starts a broker and runs it.
"""

import argparse
import csv
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kafka"))
import real_kafka  # noqa: E402
from control_api import Control, message_classes  # noqa: E402
from dead_letters import Seeded  # noqa: E402

PARTITIONS = 4


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--proto-dir", required=True, help="the project's proto/ directory")
    p.add_argument("--rates", default="100,1000,10000,100000", help="set rates, records a second")
    p.add_argument("--max-records", type=int, default=20000, help="records redriven per rate, at most")
    p.add_argument("--out", default="", help="a CSV of the results")
    return p


def run(args, work, say):
    rates = [int(r) for r in args.rates.split(",")]
    messages = message_classes(args.proto_dir, work)
    cluster = real_kafka.Cluster()
    targets = [f"to{r}" for r in rates]
    names = real_kafka.TestNames(cluster, "redrive-bench",
                                 ["input", "retry", "output", "dlq"] + targets, PARTITIONS,
                                 groups=["g"])
    rows = []
    with names:
        counts = {r: min(args.max_records, r * 10) for r in rates}
        base_ms = int(time.time() * 1000)
        producer = cluster.producer(linger_ms=5)
        began = time.monotonic()
        total = 0
        for r in rates:
            for i in range(counts[r]):
                s = Seeded(i, names.topic["input"], base_ms)
                producer.send(names.topic["dlq"], key=f"r{r}-{i:06d}".encode(), value=s.value,
                              headers=s.headers())
                total += 1
        producer.flush()
        producer.close()
        baseline = total / (time.monotonic() - began)
        say(f"baseline: kafka-python wrote {total} dead letters at {baseline:.0f}/s")
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
retry {{ topic: "{names.topic['retry']}" threads: 1 }}
processor {{ simulate {{ }} }}""")
        retryd = real_kafka.Retryd(args.retryd, config, work)
        try:
            retryd.start()
            control = Control(retryd.address(), messages)
            m = control.m
            for r in rates:
                op = control.call("StartRedrive", "StartRedriveRequest", "Operation",
                                  request_id=str(uuid.uuid4()), rate_per_s=r,
                                  target_topic=names.topic[f"to{r}"],
                                  filter=m["retryd.v1.DeadLetterFilter"](key_prefix=f"r{r}-".encode()))
                started = time.monotonic()
                real_kafka.wait_until(
                    lambda: control.call("GetOperation", "GetOperationRequest", "Operation",
                                         id=op.id).done,
                    counts[r] / r + 120, f"the redrive at {r}/s", check=retryd.check)
                wall = time.monotonic() - started
                consumer = cluster.consumer()
                try:
                    records = real_kafka.read_topic(consumer, names.topic[f"to{r}"], PARTITIONS, 60)
                finally:
                    consumer.close()
                times = sorted(x.timestamp for x in records)
                span = max(1e-3, (times[-1] - times[0]) / 1000) if len(times) > 1 else 1e-3
                achieved = (len(times) - 1) / span
                rows.append({"set_rate": r, "records": len(records), "achieved_rate": round(achieved),
                             "ratio_to_set": round(achieved / r, 3),
                             "ratio_to_baseline": round(achieved / baseline, 3),
                             "wall_s": round(wall, 1)})
                say(f"set {r}/s: {len(records)} redriven at {achieved:.0f}/s by CreateTime: "
                    f"{achieved / r:.2f} x the set rate, {achieved / baseline:.2f} x the baseline "
                    f"producer; {wall:.1f} s from start to end")
            retryd.stop_gracefully()
        finally:
            retryd.cleanup()
            ours = [g for g, _ in cluster.admin.list_consumer_groups()
                    if g.startswith(names.group["g"] + ".")]
            if ours:
                cluster.admin.delete_consumer_groups(ours)
    cluster.close()
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        say(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("redrive-bench", parse_args(), run))
