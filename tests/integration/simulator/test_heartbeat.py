"""The simulator connection's heartbeat: a silent mower is found, a quiet one is kept.

The mowers here are bare WebSocket servers that send their hello and then nothing, so
only the heartbeat's pings and pongs cross the link.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from contracts.v1 import Connection, MowerRegistration
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import ConnectionDeps
from mowdeck.gateway.connections.simulator import SimulatorConnection
from simulator.protocol import Hello, encode_frame
from tests.support.eventually import eventually

PERIOD = 1.0  # heartbeat_seconds: the options' lower bound


class QuietMower:
    """Says hello, then only answers pings, or (``answers=False``) nothing at all."""

    def __init__(self, *, answers: bool) -> None:
        self.mower_id = uuid.uuid4()
        self.answers = answers
        self.pings: list[float] = []
        self.pongs_received = 0
        self.pings_first = False  # the mower pings the gateway right after its hello

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        await ws.send_bytes(encode_frame(Hello(mower_id=self.mower_id)))
        if self.pings_first:
            await ws.ping(b"from-the-mower")
        async for msg in ws:
            if msg.type is aiohttp.WSMsgType.PING:
                self.pings.append(time.monotonic())
                if self.answers:
                    await ws.pong(msg.data)
            elif msg.type is aiohttp.WSMsgType.PONG and msg.data == b"from-the-mower":
                self.pongs_received += 1
        return ws


@asynccontextmanager
async def served(mower: QuietMower) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/ws", mower.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"ws://127.0.0.1:{port}/ws"
    finally:
        await runner.cleanup()


class Links:
    def __init__(self) -> None:
        self.links: list[tuple[bool, str | None, float]] = []

    def on_state(self, state: object) -> None:
        pass

    def on_link(self, up: bool, reason: str | None) -> None:
        self.links.append((up, reason, time.monotonic()))


def connection(mower: QuietMower, url: str, links: Links) -> SimulatorConnection:
    reg = MowerRegistration(
        mower_id=mower.mower_id,
        account_id=uuid.uuid4(),
        name="quiet",
        connection=Connection(
            kind="simulator",
            # No reconnect within the test: one link, one verdict.
            options={
                "url": url,
                "heartbeat_seconds": PERIOD,
                "backoff_initial_seconds": 60,
                "backoff_max_seconds": 60,
            },
        ),
    )
    hosts = DeviceHosts(["127.0.0.1"])
    return SimulatorConnection(reg, links, deps=ConnectionDeps(hosts))  # type: ignore[arg-type]


@asynccontextmanager
async def linked(mower: QuietMower) -> AsyncIterator[tuple[SimulatorConnection, Links]]:
    """The gateway's connection to ``mower``, open; closed at the end."""
    links = Links()
    async with served(mower) as url:
        conn = connection(mower, url, links)
        await conn.open()
        try:
            yield conn, links
        finally:
            await conn.close()


async def test_a_mower_that_answers_nothing_is_reported_down_within_about_two_periods() -> None:
    mower = QuietMower(answers=False)
    async with linked(mower) as (_, links):
        await eventually(lambda: len(links.links) >= 2, timeout=10 * PERIOD)
    (up, _, up_at), (down, reason, down_at) = links.links[:2]
    assert (up, down) == (True, False)
    assert reason == "link error: nothing from the mower for 1.5 s, not even a pong"
    # Pinged once it had been silent for a period (1 to 2 periods after its hello, the
    # timer's phase), given half a period more to answer; a little slack for a busy loop.
    assert len(mower.pings) == 1
    assert PERIOD * 0.9 <= mower.pings[0] - up_at <= PERIOD * 2.3
    assert PERIOD * 0.4 <= down_at - mower.pings[0] <= PERIOD * 1.0
    assert down_at - up_at <= PERIOD * 3.0


async def test_a_quiet_mower_that_answers_pings_keeps_its_link() -> None:
    mower = QuietMower(answers=True)
    async with linked(mower) as (conn, links):
        # Three pings answered: three silent periods the heartbeat looked at.
        await eventually(lambda: len(mower.pings) >= 3, timeout=10 * PERIOD)
        assert conn.connected
    assert [(up, reason) for up, reason, _ in links.links] == [(True, None), (False, "closed")]


async def test_a_ping_from_the_mower_is_answered() -> None:
    mower = QuietMower(answers=True)
    mower.pings_first = True
    async with linked(mower):
        await eventually(lambda: mower.pongs_received == 1, timeout=5.0)
