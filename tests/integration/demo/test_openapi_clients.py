"""A typed Python client generated from each committed document works against the demo.

As docs/api.md tells integrators: ``openapi-python-client generate --path
docs/openapi/<service>.json``; then one call per service through the generated code.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mowdeck import demo
from mowdeck.commands.contracts import DOCUMENTS, OPENAPI_DIR
from tests.integration.demo.test_demo_start import _args

_GENERATOR = Path(sys.executable).parent / "openapi-python-client"


async def _generate(name: str, into: Path) -> None:
    out = into / f"{name}_client"
    proc = await asyncio.create_subprocess_exec(
        str(_GENERATOR),
        "generate",
        "--path",
        str(OPENAPI_DIR / f"{name}.json"),
        "--output-path",
        str(out),
        "--meta",
        "none",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=into,
    )
    text, _ = await proc.communicate()
    assert proc.returncode == 0, text.decode()
    assert (out / "client.py").exists(), text.decode()


def _module(name: str, path: str) -> ModuleType:
    return importlib.import_module(f"{name}_client.{path}")


def _client(name: str, url: str, token: str | None) -> Any:
    clients = _module(name, "client")
    if token is None:  # the simulator asks for none
        return clients.Client(base_url=url)
    return clients.AuthenticatedClient(base_url=url, token=token)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_generated_client_calls_every_service(
    monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path
) -> None:
    for name in DOCUMENTS:
        await _generate(name, tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("MOWDECK_NATS_URL", raising=False)
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    async with demo.running_demo(_args()) as running:
        token, mowers = running.token, {str(m) for m in running.mowers}

        async with _client("fleet", running.fleet_url, token) as fleet:
            page = await _module("fleet", "api.mowers.list_mowers").asyncio(client=fleet, limit=1)
        assert type(page).__name__ == "MowerPage"
        assert (len(page.mowers), page.has_more) == (1, True)
        assert str(page.mowers[0].mower_id) in mowers

        async with _client("telemetry", running.telemetry_url, token) as telemetry:
            states = await _module("telemetry", "api.telemetry.list_states").asyncio(
                client=telemetry
            )
        assert type(states).__name__ == "StatePage"
        assert {str(s.mower_id) for s in states.items} <= mowers

        async with _client("notifications", running.notifications_url, token) as notifications:
            prefs = await _module("notifications", "api.inbox.get_preferences").asyncio(
                client=notifications
            )
        assert (type(prefs).__name__, prefs.scope) == ("Preferences", "all")

        async with _client("realtime", running.realtime_url, token) as realtime:
            ticket = await _module("realtime", "api.streams.issue_ticket").asyncio(client=realtime)
        assert type(ticket).__name__ == "TicketReply"
        assert ticket.ticket and ticket.expires_in > 0

        async with _client("simulator", running.sim_url, None) as simulator:
            listed = await _module("simulator", "api.simulator.list_simulated_mowers").asyncio(
                client=simulator
            )
        assert {str(m.mower_id) for m in listed.mowers} == mowers
