#!/usr/bin/python3
"""Kill soak on a real Kafka: retryd SIGKILLed again and again while records
flow, nothing lost, and what each kill makes it process again bounded.

Produces --records records with unique keys (10 % flaky: fail twice, then
succeed; 1 % poison: fail for good or until their attempts run out) over the
kill phase, and runs retryd (--retry-threads retry threads) over them. Kills
it with SIGKILL --kills times at seeded random moments (one in five while it
joins its groups, the others up to --kill-window seconds after it is
assigned partitions) and restarts it each time; then waits, bounded, for
both groups to commit everything, stops it with SIGTERM (exit 0) and judges
the output and DLQ topics with kafka-python, by each record's
retryd-original-partition/-offset:

  * lost: an input record with no copy where it belongs (output for healthy
    and flaky keys, the DLQ for poison ones) -- must be 0;
  * duplicates: an input record twice in the output, or in both the output
    and the DLQ (allowed after a kill, reported);
  * replays per kill: the copies written after kill k (by the output and DLQ
    end offsets read right after it) of records that already had one. Each
    must be at most what the runs since the last commit could leave
    uncommitted: for each run, rate x commit_interval_ms + max_in_flight x
    threads, where rate is the most outcomes per second over any second of
    the run (sampled from outside), or, for a run shorter than that, what it
    wrote per second of its life counted as at least one. A run killed
    before every group's committed offsets moved (or reached the end) may
    leave its work, and that of the runs before it, to the next run's
    replays, so its bound carries over to the next kill.

RETRYD_SOAK_RECORDS sets the default of --records (10,000; the long run is
RETRYD_SOAK_RECORDS=100000). Exit status 0 passed, 1 failed, 77 skipped (no
cluster).
"""

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_kafka  # noqa: E402
from real_kafka import Failure  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True, help="the retryd binary")
    p.add_argument("--records", type=int,
                   default=int(os.environ.get("RETRYD_SOAK_RECORDS", "10000")),
                   help="records to produce (RETRYD_SOAK_RECORDS, else 10000)")
    p.add_argument("--kills", type=int, default=5, help="SIGKILLs of retryd (5)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of every topic (4)")
    p.add_argument("--retry-threads", type=int, default=2, help="retry threads (2)")
    p.add_argument("--commit-interval-ms", type=int, default=1000, help="retryd's (1000)")
    p.add_argument("--max-in-flight", type=int, default=500, help="retryd's, per thread (500)")
    p.add_argument("--produce-seconds", type=float, default=None,
                   help="spread producing over this long (default: 5 s per kill, and "
                        "1 s per 5,000 records beyond 10,000)")
    p.add_argument("--kill-window", type=float, default=3.0,
                   help="a kill comes up to this long after an assignment (3 s)")
    p.add_argument("--finish-timeout", type=float, default=180.0,
                   help="seconds allowed for both groups to commit everything (180)")
    return p


def run(args, work, say):
    if args.produce_seconds is None:
        args.produce_seconds = 5.0 * args.kills + max(0, args.records - 10000) / 5000
    cluster = real_kafka.Cluster()
    rng = random.Random(args.seed)
    n = args.partitions
    say(f"cluster {cluster.bootstrap} ({cluster.source}); {args.records} records, {args.kills} "
        f"kills, {n} partitions, 1 primary and {args.retry_threads} retry threads, "
        f"commit_interval_ms {args.commit_interval_ms}, max_in_flight {args.max_in_flight}, "
        f"session.timeout.ms {real_kafka.session_timeout_ms(cluster)}")
    names = real_kafka.TestNames(cluster, "soak", ["input", "retry", "output", "dlq"], n,
                                 groups=["g"])
    with names:
        records = real_kafka.make_records(args.records, rng)
        config = os.path.join(work, "retryd.textproto")
        real_kafka.retryd_config(config, cluster, names, work, f"""
commit_interval_ms: {args.commit_interval_ms}
max_in_flight: {args.max_in_flight}
""" + real_kafka.simulate_body(names, args.seed, args.retry_threads, 5, 1000))
        retryd = real_kafka.Retryd(args.retryd, config, work)
        groups = real_kafka.Groups(cluster, [(names.group["g"], names.topic["input"], n),
                                             (names.group["g"] + ".retry", names.topic["retry"], n)])
        outcome_topics = [(names.topic["output"], n), (names.topic["dlq"], n)]
        sampler = real_kafka.EndSampler(cluster, outcome_topics)
        producer = real_kafka.PacedProducer(cluster, names.topic["input"], records,
                                            args.produce_seconds)
        boundaries = []  # after each kill: {TopicPartition: end offset} of the outcome topics
        commits = []  # after each kill: each group's committed offsets, summed
        spans = []  # each killed run: (started, killed), monotonic
        began = time.monotonic()

        def check():
            retryd.check()
            sampler.sample()

        try:
            retryd.start()
            producer.start()
            for k in range(1, args.kills + 1):
                if rng.random() < 0.2:
                    phase, delay = "starting", rng.uniform(0.2, 3.0)
                    wake = retryd.started_at + delay
                else:
                    phase, delay = "running", rng.uniform(0.0, args.kill_window)
                    retryd.wait_assigned(check=check)
                    wake = time.monotonic() + delay
                real_kafka.wait_until(lambda: time.monotonic() >= wake, delay + 5,
                                      "the kill's moment", poll=0.1, check=check)
                retryd.kill()
                killed = time.monotonic()
                boundaries.append(sampler.sample())
                spans.append((retryd.started_at, killed))
                state = groups.state_or_none()
                commits.append(None if state is None else [(c, e) for _, c, e in state])
                say(f"kill {k}/{args.kills}: SIGKILL at {killed - retryd.started_at:.2f} s into "
                    f"run {retryd.runs} ({phase}, drawn {delay:.2f} s); {groups.describe(state)}")
                retryd.start()
            producer.finish(args.produce_seconds + 120)
            say(f"produced {len(records)}; waiting for both groups to commit everything")
            groups.wait_done(args.finish_timeout, check=retryd.check)
            say(f"both groups done {time.monotonic() - began:.1f} s in: {groups.describe()}")
            retryd.stop_gracefully()
        finally:
            producer.stopping.set()
            retryd.cleanup()
            groups.close()
            sampler.close()

        verdict = real_kafka.Verdict(cluster, names, records)
        replays = verdict.replays(boundaries)
        failures = verdict.failures
        if replays[0]:
            failures.append(f"{replays[0]} records repeated before the first kill")
        per_kill = []
        carried = 0  # the bounds of earlier runs whose work no commit covered
        for k in range(1, args.kills + 1):
            begin, end = spans[k - 1]
            wrote = sum(boundaries[k - 1].values()) - (
                sum(boundaries[k - 2].values()) if k > 1 else 0)
            rate = max(sampler.peak_rate(begin, end), wrote / max(1.0, end - begin))
            own = real_kafka.replay_bound(rate, args.commit_interval_ms, args.max_in_flight,
                                          1 + args.retry_threads)
            # A run's commits cover the runs before it only when every group
            # moved (or had nothing left): else their work carries over.
            before = commits[k - 2] if k > 1 else [(0, 0)] * len(commits[0] or [])
            committed = (commits[k - 1] is not None and before is not None
                         and all(c > b or c >= e
                                 for (c, e), (b, _) in zip(commits[k - 1], before)))
            if not committed:
                own += carried
            carried = own
            bound = own
            per_kill.append(replays[k])
            say(f"  kill {k}: {replays[k]} replayed; rate {rate:.0f}/s, "
                f"{'committed' if committed else 'no commit, earlier runs carried'}, "
                f"bound {bound:.0f} ({'ok' if replays[k] <= bound else 'OVER'})")
            if replays[k] > bound:
                failures.append(f"kill {k}: {replays[k]} records processed again, more than "
                                f"{bound:.0f}")
        say(f"summary: {len(verdict.inputs)} records; lost {len(verdict.lost)}; duplicates "
            f"{verdict.duplicates} ({verdict.extra} extra copies); replays per kill median "
            f"{real_kafka.median(per_kill)}, max {max(per_kill)}; {len(retryd.error_lines())} ERROR lines in retryd's logs; "
            f"{time.monotonic() - began:.1f} s")
        status = real_kafka.verdict_status(say, failures, retryd.log())
    cluster.close()
    return status


if __name__ == "__main__":
    sys.exit(real_kafka.scenario_main("kafka-soak", parse_args(), run))
