"""Device links follow no redirect and request only what the device hosts allow.

An endpoint on an allowed host that answers ``302`` to another address must not make the
gateway request that address, on the first connect or any reconnect.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
import structlog
from aiohttp import web

from contracts.v1 import Connection, MowerRegistration
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import ConnectionAdapters, ConnectionDeps, MowerConnection
from tests.support.eventually import eventually


class Counting:
    """An HTTP server that counts every request it receives and answers what it is told."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.paths: list[str] = []
        self._redirect_to = redirect_to
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        if self._redirect_to is not None:
            return web.Response(status=302, headers={"Location": self._redirect_to})
        return web.Response(text="counted")

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Counting]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self.port = runner.addresses[0][1]
        try:
            yield self
        finally:
            await runner.cleanup()


class Links:
    def __init__(self) -> None:
        self.links: list[tuple[bool, str | None]] = []

    def on_state(self, state: object) -> None:
        pass

    def on_link(self, up: bool, reason: str | None) -> None:
        self.links.append((up, reason))


def _link(url: str, hosts: list[str]) -> MowerConnection:
    registration = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name="redirected",
        connection=Connection(
            kind="simulator",
            # Quick reconnects: the test watches several attempts.
            options={"url": url, "backoff_initial_seconds": 0.05, "backoff_max_seconds": 0.5},
        ),
    )
    factory = ConnectionAdapters.from_entry_points().factory("simulator")
    return factory(registration, Links(), deps=ConnectionDeps(DeviceHosts(hosts)))


async def _sentinel(target: Counting) -> None:
    """A request of the test's own to ``target``: counted, so counting works."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{target.port}/sentinel") as response,
    ):
        assert response.status == 200


@pytest.mark.parametrize(
    "target_allowed", [False, True], ids=["target-not-allowed", "target-allowed"]
)
async def test_a_redirect_from_a_device_endpoint_is_refused_on_every_attempt(
    target_allowed: bool,
) -> None:
    async with Counting().serving() as target:
        redirect_to = f"http://127.0.0.1:{target.port}/internal"
        async with Counting(redirect_to).serving() as endpoint:
            hosts = [f"127.0.0.1:{endpoint.port}"]
            if target_allowed:
                hosts.append(f"127.0.0.1:{target.port}")
            conn = _link(f"ws://127.0.0.1:{endpoint.port}/mowers/m/ws", hosts)
            with structlog.testing.capture_logs() as logs:
                await conn.open()
                try:
                    # Three attempts, so two reconnects after the first refusal: a redirect
                    # followed would have reached the target before each next attempt.
                    await eventually(lambda: len(endpoint.paths) >= 3)
                    # The third answer is refused a moment after the endpoint saw it.
                    await eventually(
                        lambda: sum(e["event"] == "device link refused" for e in logs) >= 3
                    )
                finally:
                    await conn.close()
            await _sentinel(target)
            assert target.paths == ["/sentinel"]
            assert not conn.connected
    refused = [e for e in logs if e["event"] == "device link refused"]
    assert len(refused) >= 3
    assert "answered 302" in refused[0]["reason"]
    assert f"127.0.0.1:{target.port}/internal" in refused[0]["reason"]
    assert "follow no redirect" in refused[0]["reason"]


async def test_a_url_the_device_hosts_do_not_allow_is_never_requested() -> None:
    # Defence in depth: the gateway checks a registration's URL at apply; the link's
    # session checks every request again, whoever built the connection.
    async with Counting().serving() as elsewhere:
        conn = _link(f"ws://127.0.0.1:{elsewhere.port}/mowers/m/ws", ["127.0.0.1:1"])
        with structlog.testing.capture_logs() as logs:
            await conn.open()
            try:
                await eventually(
                    lambda: sum(e["event"] == "device link refused" for e in logs) >= 2
                )
            finally:
                await conn.close()
        await _sentinel(elsewhere)
        assert elsewhere.paths == ["/sentinel"]
    refused = next(e for e in logs if e["event"] == "device link refused")
    assert "MOWDECK_GATEWAY_DEVICE_HOSTS does not allow" in refused["reason"]
