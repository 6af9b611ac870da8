"""A test that needs a tool of the machine (Chromium, promtool, ...) that is
missing: skipped (exit status 77, which ctest reports as skipped) where
someone runs the suite on a machine without it, failed (exit status 1) under
CI=true (or CI=1), where a skip would pass unseen and the check it stands for
would never run. Either way the message names the tool and the Debian package
that brings it (scripts/setup.sh installs them all). tests/support/
missing_tool.h is the same rule for the GoogleTest tests.
"""

import os

SKIPPED = 77
FAILED = 1


def tools_required():
    """Whether CI is "true" or "1" (CI services set CI=true)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def missing_tool(tools, say=print):
    """`tools`: (tool, what brings it) pairs, all missing, e.g.
    ("promtool", "Debian package prometheus"). Says so; returns the exit
    status: FAILED under CI=true, else SKIPPED."""
    what = ", ".join(f"{tool} ({package})" for tool, package in tools)
    installs = "installs " + ("it" if len(tools) == 1 else "them")
    if tools_required():
        say(f"FAILED: missing {what}, and CI=true requires every tool: "
            f"bash scripts/setup.sh {installs}")
        return FAILED
    say(f"skipped: missing {what}; bash scripts/setup.sh {installs}")
    return SKIPPED
