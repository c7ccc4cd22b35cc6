"""Services never create streams: without them a service is not ready and says which.

A real gateway (it needs COMMANDS, EVENTS and TELEMETRY) is started against a
``nats-server`` with no streams at all; its ``/readyz`` names what is missing until the
admin step (``mowdeck streams``' ``apply_streams``) has made them, then it is ready.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from contracts.v1.subjects import COMMANDS
from mowdeck.commands.streams import apply_streams
from mowdeck.gateway.service import GatewayService
from mowdeck.kit.bus import Bus
from mowdeck.kit.http import Readiness
from mowdeck.kit.lifecycle import Resources
from mowdeck.kit.settings import BaseSettings
from tests.integration.gateway.conftest import settings_for
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer, free_port

pytestmark = pytest.mark.timeout(60)


async def _get(url: str) -> tuple[int, Any]:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as r:
            return r.status, await r.json(content_type=None)
    except aiohttp.ClientConnectionError:
        return 0, None  # not listening (yet, or for a moment between two listeners)


async def _streams(url: str) -> list[str]:
    bus = await Bus.connect(url, name="reader")
    try:
        return sorted([info.config.name for info in await bus.js.streams_info()])
    finally:
        await bus.drain()


async def test_a_service_without_its_streams_waits_not_ready_naming_them(
    own_nats_server: NatsServer,
) -> None:
    port = free_port()
    gateway = GatewayService(settings_for(own_nats_server.url, [], http_port=port))
    starting = asyncio.ensure_future(gateway.start())
    try:
        ready = f"http://127.0.0.1:{port}/readyz"
        status, body = await eventually(lambda: _answered(ready), timeout=10)
        assert status == 503
        assert body["type"].endswith("/streams-missing")
        assert body["missing_streams"] == ["COMMANDS", "EVENTS", "TELEMETRY"]
        assert "mowdeck streams" in body["detail"]
        assert (await _get(f"http://127.0.0.1:{port}/healthz"))[0] == 200  # alive, waiting
        assert not starting.done()
        assert await _streams(own_nats_server.url) == []  # it created none

        # One stream appears: the answer follows what is still missing.
        admin = await Bus.connect(own_nats_server.url, name="admin")
        await admin.ensure_streams([COMMANDS])
        await admin.drain()
        await eventually(lambda: _missing(ready, ["EVENTS", "TELEMETRY"]), timeout=10)

        await apply_streams(BaseSettings(nats_url=own_nats_server.url))
        await asyncio.wait_for(starting, 20)
        assert await _get(ready) == (200, {"status": "ready"})
    finally:
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        await gateway.stop()


async def _answered(url: str) -> tuple[int, Any] | None:
    status, body = await _get(url)
    return (status, body) if status else None


async def _missing(url: str, streams: list[str]) -> bool:
    status, body = await _get(url)
    return status == 503 and body["missing_streams"] == streams


async def test_bus_for_connects_waits_for_the_users_streams_and_drains_at_close(
    own_nats_server: NatsServer,
) -> None:
    port = free_port()
    settings = BaseSettings(nats_url=own_nats_server.url, http_port=port, nats_fast_path=False)
    resources, readiness = Resources(), Readiness()
    connecting = asyncio.ensure_future(
        resources.bus_for(
            None,
            settings,
            user="telemetry",
            name="telemetry-1",
            readiness=readiness,
            registry=CollectorRegistry(),
        )
    )
    try:
        ready = f"http://127.0.0.1:{port}/readyz"
        needed = ["TELEMETRY", "COMMANDS", "EVENTS", "KV_MOWDECK_DENYLIST"]  # in its order
        await eventually(lambda: _missing(ready, needed), timeout=10)
        await apply_streams(BaseSettings(nats_url=own_nats_server.url))
        bus = await asyncio.wait_for(connecting, 20)
        assert bus.nc.options["name"] == "telemetry-1"
        assert readiness.reason == "starting"  # the rest of the start is the service's
        assert await _get(ready) == (0, None)  # the waiting listener is gone again
    finally:
        if not connecting.done():
            connecting.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        await resources.close()
    assert bus.nc.is_closed
