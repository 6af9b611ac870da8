#!/usr/bin/python3
"""The console in a real browser: starts retryd on its embedded broker with
the demo load, the console on and a control token, then runs
console_test.mjs (playwright-core driving Debian's Chromium) against it.

  run_console_test.py --retryd BUILD/retryd --node-modules DIR [--keep]

DIR holds playwright-core (scripts/setup.sh installs the version pinned in
tests/console/package-lock.json into BUILD/console-tools/node_modules).
Exit status: 0 passed, 1 failed, 77 skipped (no node, no /usr/bin/chromium
or no playwright-core). retryd and the browser die with this script; every
wait is bounded.
"""

import argparse
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
TOKEN = "console-browser-token"


def say(text):
    print(f"console-test: {text}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--retryd", required=True)
    p.add_argument("--node-modules", required=True)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()

    node = shutil.which("node")
    missing = [what for what, ok in [
        ("node", node is not None),
        ("/usr/bin/chromium", os.access("/usr/bin/chromium", os.X_OK)),
        (f"playwright-core in {args.node_modules}",
         os.path.isfile(os.path.join(args.node_modules, "playwright-core", "package.json"))),
    ] if not ok]
    if missing:
        say(f"skipped: missing {', '.join(missing)} (scripts/setup.sh installs them)")
        return 77

    work = tempfile.mkdtemp(prefix="retryd-console-")
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    with open(os.path.join(ROOT, "deploy", "examples", "demo.textproto")) as f:
        demo = f.read()
    # The demo's own addresses give way to free ports (the flags below).
    config = os.path.join(work, "retryd.textproto")
    with open(config, "w") as f:
        f.write(demo + f'\ncontrol {{ auth_token_file: "{token_file}" }}\n')
    log_path = os.path.join(work, "retryd.log")
    log = open(log_path, "w")
    retryd = subprocess.Popen(
        [args.retryd, "--config", config, "--demo", "--listen", "127.0.0.1:0",
         "--metrics_address", "127.0.0.1:0", "--console"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    status = 1
    try:
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            if retryd.poll() is not None:
                raise RuntimeError(f"retryd exited with {retryd.returncode}")
            with open(log_path) as f:
                m = re.search(r"console: serving http://[^:]+:(\d+)/console/", f.read())
            if m:
                port = int(m.group(1))
            else:
                time.sleep(0.2)
        if port is None:
            raise RuntimeError("retryd did not serve the console within 60 s")
        say(f"retryd serves the console on port {port}")
        env = dict(os.environ,
                   RETRYD_CONSOLE_URL=f"http://127.0.0.1:{port}",
                   RETRYD_CONSOLE_TOKEN=TOKEN,
                   RETRYD_CONSOLE_NODE_MODULES=os.path.abspath(args.node_modules),
                   RETRYD_CONSOLE_SCREENSHOT=os.path.join(work, "console.png"))
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
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        say(f"FAILED: {e}")
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
