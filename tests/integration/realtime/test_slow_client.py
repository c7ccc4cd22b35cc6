"""A client that stops reading: its states conflate, its commands all arrive, others go on."""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit

from mowdeck.authn import TokenIssuer
from mowdeck.kit.bus import Bus
from tests.integration.realtime.conftest import (
    ACCOUNT,
    MOWER,
    Opener,
    ServiceFactory,
    publish_result,
    publish_state,
    state,
)
from tests.support.eventually import eventually

PADDING = {"note": "x" * 2000}  # large states fill the socket buffers quickly


async def _stalled_stream(
    url: str, token: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An SSE request on a socket with a small receive buffer that nobody reads yet."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    # A small limit: the reader stops taking bytes from the socket once 2 KiB wait unread.
    reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
    writer.write(
        f"GET /v1/stream?mowers={MOWER} HTTP/1.0\r\nHost: x\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


def _blocks(raw: bytes) -> list[tuple[str, str]]:
    """(event type, data) of every SSE block in ``raw``."""
    found = []
    for block in raw.split(b"\n\n"):
        fields = dict(line.split(": ", 1) for line in block.decode().splitlines() if ": " in line)
        if "event" in fields:
            found.append((fields["event"], fields.get("data", "")))
    return found


async def test_a_stalled_client_gets_the_newest_state_and_every_command(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener, issuer: TokenIssuer
) -> None:
    service = await make_service()
    fast = await open_stream(service, "bob")
    await fast.next()
    reader, writer = await _stalled_stream(service.url, issuer.mint("alice", ACCOUNT))
    await eventually(lambda: len(service.parts.hub.clients) == 2)
    commands = []
    for n in range(300):
        await publish_state(bus, state(MOWER, battery=n % 100, raw=PADDING))
        if n % 100 == 50:
            commands.append(str(await publish_result(bus, MOWER)))
    await publish_state(bus, state(MOWER, battery=100, raw=PADDING))  # the newest (no other is 100)
    conflated = "mowdeck_realtime_events_conflated_total"
    await eventually(lambda: service.metrics_registry.get_sample_value(conflated))
    # The fast reader was not held back: it has every command and the newest state.
    seen = []
    while not seen or seen[-1].type != "state" or seen[-1].data["battery"] != 100:
        seen.append(await fast.next())
    assert [e.data["command_id"] for e in seen if e.type == "command"] == commands
    # Now the stalled one reads what is left.
    raw = b""
    while b'"battery":100' not in raw:
        raw += await asyncio.wait_for(reader.read(1 << 20), 10)
    writer.close()
    await writer.wait_closed()
    events = _blocks(raw.partition(b"\r\n\r\n")[2])
    states = [data for kind, data in events if kind == "state"]
    got_commands = [data for kind, data in events if kind == "command"]
    assert len(states) < 301  # some were replaced by newer ones before they were written
    assert '"battery":100' in states[-1]
    assert all(any(c in data for data in got_commands) for c in commands)
