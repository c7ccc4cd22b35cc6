"""The documented trace script shows a command's whole path in order."""

from __future__ import annotations

import subprocess
import sys


def test_one_commands_path_appears_in_the_log_in_order() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tests.e2e.trace_command"],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    ).stdout
    events = [
        line.split("event=")[1].split(" status=")[0].split(" kind=")[0]
        + (" " + line.split("status=")[1].split()[0] if "status=" in line else "")
        for line in out.splitlines()
        if "event=" in line
    ]
    expected = [
        "command published",
        "command admitted",
        "command sent to mower",
        "mower answered executed",
        "command result executed",
    ]
    positions = [events.index(e) for e in expected]
    assert positions == sorted(positions), events
    assert "command result accepted" in events
