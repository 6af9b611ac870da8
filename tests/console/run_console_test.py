#!/usr/bin/python3
"""The console in a real browser: starts retryd on its embedded broker with
the demo load, the console on and a control token, runs console_test.mjs
(playwright-core driving Debian's Chromium) against it, then reads the
record the page dead-lettered from the dead-letter topic with kafka-python.

  run_console_test.py --retryd BUILD/retryd --node-modules DIR [--keep]

DIR holds playwright-core (scripts/setup.sh installs the version pinned in
tests/console/package-lock.json into BUILD/console-tools/node_modules).
Exit status: 0 passed, 1 failed, 77 skipped (no node, no /usr/bin/chromium,
no playwright-core or no kafka-python; under CI=true that fails instead,
see tests/support/missing_tool.py). retryd and the browser die with this
script; every wait is bounded.
"""

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from missing_tool import missing_tool  # noqa: E402

TOKEN = "console-browser-token"
DLQ = "orders.dlq"
# The demo's topics, processor and load (deploy/examples/demo.textproto), but
# 2 records a second (the primary waits in its poll between them), a fifth of
# the attempts failing, and the retry topic one tier of 120 s: a record there
# waits long enough for the stuck-records view to be worked with.
CONFIG = """
group_id: "demo"
input_topics: "orders"
output_topic: "orders.done"
kafka {}
retry {
  threads: 2
  tiers { topic: "orders.retry" delay_ms: 120000 max_attempts: 3 }
}
dead_letter_topic: "%s"
processor { simulate {
  latency_min_ms: 1
  latency_max_ms: 5
  transient_failure_rate: 0.2
  seed: 7
  rule { key_prefix: "perm-" permanent: true }
  rule { key_prefix: "flaky-" fail_attempts: 2 }
} }
http { console: true }
control { auth_token_file: "%s" }
"""


def say(text):
    print(f"console-test: {text}", flush=True)


def find_dead_letter(bootstrap, record, timeout_s):
    """The dead letter of the input record `record` ({topic, partition,
    offset}, as the page showed it) that an operator's DeadLetterRecord
    wrote, read from DLQ with kafka-python (no group); None if none comes
    within `timeout_s`."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                                 api_version=(2, 5, 0), request_timeout_ms=15000)
    except KafkaError as e:
        raise RuntimeError(f"kafka-python cannot reach {bootstrap}: {e!r}")
    try:
        partitions = [TopicPartition(DLQ, p) for p in consumer.partitions_for_topic(DLQ) or []]
        if not partitions:
            return None
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        want = (record["topic"], str(record["partition"]), str(record["offset"]))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=1000).items():
                for m in messages:
                    h = {k: (v or b"").decode("utf-8", "replace") for k, v in m.headers or []}
                    origin = (h.get("retryd-original-topic"), h.get("retryd-original-partition"),
                              h.get("retryd-original-offset"))
                    if origin == want and "DeadLetterRecord" in h.get("retryd-error", ""):
                        return (f"{tp.topic}/{tp.partition}@{m.offset} key {m.key!r}, "
                                f"retryd-error {h['retryd-error']!r}")
        return None
    except KafkaError as e:
        raise RuntimeError(f"reading {DLQ}: {e!r}")
    finally:
        consumer.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True)
    p.add_argument("--node-modules", required=True)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()

    node = shutil.which("node")
    missing = [(tool, package) for tool, package, ok in [
        ("node", "Debian package nodejs", node is not None),
        ("/usr/bin/chromium", "Debian package chromium", os.access("/usr/bin/chromium", os.X_OK)),
        (f"playwright-core in {args.node_modules}",
         "npm package playwright-core, pinned in tests/console/package-lock.json",
         os.path.isfile(os.path.join(args.node_modules, "playwright-core", "package.json"))),
        ("kafka-python", "Debian package python3-kafka",
         importlib.util.find_spec("kafka") is not None),
    ] if not ok]
    if missing:
        return missing_tool(missing, say=say)

    work = tempfile.mkdtemp(prefix="retryd-console-")
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    config = os.path.join(work, "retryd.textproto")
    with open(config, "w") as f:
        f.write(CONFIG % (DLQ, token_file))
    log_path = os.path.join(work, "retryd.log")
    result_path = os.path.join(work, "result.json")
    log = open(log_path, "w")
    retryd = subprocess.Popen(
        [args.retryd, "--config", config, "--demo", "--demo_rate", "2",
         "--listen", "127.0.0.1:0", "--metrics_address", "127.0.0.1:0", "--console"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    status = 1
    try:
        port = None
        bootstrap = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            if retryd.poll() is not None:
                raise RuntimeError(f"retryd exited with {retryd.returncode}")
            with open(log_path) as f:
                text = f.read()
            m = re.search(r"console: serving http://[^:]+:(\d+)/console/", text)
            b = re.search(r"embedded broker bootstrap: (\S+)", text)
            if m and b:
                port = int(m.group(1))
                bootstrap = b.group(1)
            else:
                time.sleep(0.2)
        if port is None:
            raise RuntimeError("retryd did not serve the console within 60 s")
        say(f"retryd serves the console on port {port}; its embedded broker: {bootstrap}")
        env = dict(os.environ,
                   RETRYD_CONSOLE_URL=f"http://127.0.0.1:{port}",
                   RETRYD_CONSOLE_TOKEN=TOKEN,
                   RETRYD_CONSOLE_NODE_MODULES=os.path.abspath(args.node_modules),
                   RETRYD_CONSOLE_SCREENSHOT=os.path.join(work, "console.png"),
                   RETRYD_CONSOLE_RESULT=result_path)
        # In a session of its own, so that the browser it starts dies with it.
        test = subprocess.Popen([node, os.path.join(HERE, "console_test.mjs")], env=env,
                                start_new_session=True)
        try:
            status = test.wait(timeout=240)
        finally:
            try:
                os.killpg(test.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            test.wait()
        # The console's action went through the service's audit line.
        with open(log_path) as f:
            text = f.read()
        if status == 0 and not re.search(r"StartRetryThreads\(count=2\) from console 127\.0\.0\.1:",
                                         text):
            say("retryd's log has no StartRetryThreads(count=2) line naming the console's caller")
            status = 1
        # The record the page dead-lettered is in the dead-letter topic, as
        # any Kafka reader finds it.
        if status == 0:
            with open(result_path) as f:
                record = json.load(f)["deadLettered"]
            found = find_dead_letter(bootstrap, record, timeout_s=60)
            if found is None:
                say(f"FAILED: no dead letter of {record} in {DLQ} within 60 s")
                status = 1
            else:
                say(f"ok   {DLQ} holds the record the page dead-lettered: {found}")
    except (RuntimeError, subprocess.TimeoutExpired, OSError, KeyError, ValueError) as e:
        say(f"FAILED: {e!r}")
        status = 1
    finally:
        try:
            os.killpg(retryd.pid, signal.SIGTERM)
            retryd.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(retryd.pid, signal.SIGKILL)
            retryd.wait()
        except ProcessLookupError:
            pass
        log.close()
        if status not in (0, 77):
            with open(log_path) as f:
                say("retryd's log, last lines:\n" + "".join(f.readlines()[-40:]))
        if args.keep or status not in (0, 77):
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    say("PASSED" if status == 0 else f"status {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
