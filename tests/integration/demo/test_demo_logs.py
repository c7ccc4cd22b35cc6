"""``mowdeck demo``: five services on one loop, and every log line says whose it is."""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from mowdeck import demo
from mowdeck.kit.logging import configure_logging
from tests.integration.demo.commands import command_through
from tests.support.eventually import eventually

SERVICES = ("fleet", "telemetry", "gateway", "notifications", "realtime")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")  # outside the checkout
    return parser.parse_args(["--port", "0", "--mowers", "2", "--state-dir", str(state)])


def _about(lines: Iterable[dict[str, Any]], command_id: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("command_id") == command_id]


class Lines(list[dict[str, Any]]):
    """The JSON lines the process wrote to stderr so far."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        super().__init__()
        self._capsys = capsys

    def read(self) -> Lines:
        """Take in what was written since the last read."""
        err = self._capsys.readouterr().err
        self.extend(json.loads(text) for text in err.splitlines() if text.startswith("{"))
        return self


@pytest.mark.slow
async def test_every_line_names_its_service_and_a_command_s_lines_its_id(
    monkeypatch: pytest.MonkeyPatch, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MOWDECK_NATS_URL", raising=False)  # each service its own connection
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    configure_logging("debug", "json")  # as `mowdeck demo` with MOWDECK_LOG_FORMAT=json
    logs = Lines(capsys)
    async with demo.running_demo(_args()) as running:
        command_id = str((await command_through(running))["command_id"])
        # Telemetry stores the command's results from the bus: its consumer's line about
        # each one, logged by the kit with no ids passed, names the command.
        await eventually(
            lambda: any(
                line["event"] == "message handled" and line.get("service") == "telemetry"
                for line in _about(logs.read(), command_id)
            ),
            timeout=20,
            what="Telemetry's line about the command's result",
        )
    logs.read()
    unnamed = [(line.get("logger"), line["event"]) for line in logs if "service" not in line]
    assert unnamed == []
    # Each service's own loggers log as that service, whatever task or thread logged.
    for line in logs:
        for service in SERVICES:
            if line["logger"].startswith(f"mowdeck.{service}"):
                assert line["service"] == service, line
    assert {line["service"] for line in logs} >= {*SERVICES, "simulator", "demo"}
    # An HTTP handler's lines (the demo registers its mowers through Fleet's API) ...
    registered = [line for line in logs if line["event"] == "mower registered"]
    by_fleet = [line for line in registered if line["logger"] == "mowdeck.fleet"]
    assert len(by_fleet) == len(running.mowers)
    assert {line["service"] for line in by_fleet} == {"fleet"}
    # (and the gateway's, from Fleet's events, as the gateway)
    assert {line["service"] for line in registered if line not in by_fleet} == {"gateway"}
    # ... and a bus consumer's callback's (Telemetry hears of them from Fleet's events).
    heard = [line for line in logs if line["event"] == "directory updated"]
    assert {line["mower_id"] for line in heard} >= {str(m) for m in running.mowers}
    assert {line["service"] for line in heard} == {"telemetry"}
    # A line about the command carries its id, though the kit logged it with none passed.
    handled = [line for line in _about(logs, command_id) if line["event"] == "message handled"]
    assert {line["consumer"] for line in handled} == {"telemetry-results"}
    assert all(line["mower_id"] == str(uuid.UUID(line["subject"][-36:])) for line in handled)
    # The directory's lines about a registration name its mower and account, and no
    # command: each message's bindings end with it.
    directory = [line for line in logs if line.get("consumer") == "telemetry-directory"]
    about_registrations = [line for line in directory if line["subject"].endswith("registered")]
    assert {line["mower_id"] for line in about_registrations} >= {str(m) for m in running.mowers}
    assert {line["account_id"] for line in about_registrations} == {str(demo.DEMO_ACCOUNT)}
    assert all("command_id" not in line for line in directory)
