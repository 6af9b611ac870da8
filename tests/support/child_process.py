"""Child processes of the Python-driven tests (tests/soak/, tests/kafka/):
started so that they die with the test, stopped within a bound."""

import subprocess


def start(argv, log_path):
    """Starts `argv` with its output appended to `log_path`. The child gets
    SIGKILL when this script dies, even by SIGKILL (a ctest timeout), so that
    no broker or retryd outlives it: setpriv (util-linux) sets that up and
    execs it, where a preexec_fn would not be safe beside a producer thread."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(["setpriv", "--pdeathsig", "KILL", "--"] + argv,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def stop(proc, sig, timeout):
    """Signals `proc` and reaps it; SIGKILL if it outlives `timeout`. Its exit
    status (negative: the signal that ended it)."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def tail(path, lines=40):
    """The last `lines` lines of the log at `path`, indented, for a failure."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text[-lines:])
