"""A running in-process simulator and helpers to talk the device protocol to it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import msgspec
import pytest

from simulator import FleetConfig, SimulatorServer
from simulator.protocol import DeviceFrame, decode_device_frame


@pytest.fixture
async def sim() -> AsyncIterator[SimulatorServer]:
    """Three mowers at 50x on a free port."""
    server = SimulatorServer(FleetConfig(mowers=3, seed=42, speed=50.0))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client for the test."""
    async with aiohttp.ClientSession() as session:
        yield session


class DeviceClient:
    """A raw device-protocol client that keeps every frame it receives."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.frames: list[DeviceFrame] = []
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                self.frames.append(decode_device_frame(msg.data))
        self.closed.set()

    def of(self, kind: type[Any]) -> list[Any]:
        """The received frames of one type."""
        return [f for f in self.frames if isinstance(f, kind)]

    async def send(self, doc: dict[str, Any] | bytes) -> None:
        """Send a frame (a dict is JSON-encoded)."""
        data = doc if isinstance(doc, bytes) else msgspec.json.encode(doc)
        await self.ws.send_bytes(data)

    async def command(self, kind: str, **fields: Any) -> uuid.UUID:
        """Send a command frame; returns its id."""
        cid = uuid.uuid4()
        await self.send(
            {"type": "command", "v": 1, "command_id": str(cid), "command": {"kind": kind, **fields}}
        )
        return cid

    async def close(self) -> None:
        """Close the socket and stop reading."""
        await self.ws.close()
        await self._reader


@pytest.fixture
async def connect(
    sim: SimulatorServer, http: aiohttp.ClientSession
) -> AsyncIterator[Callable[[uuid.UUID], Any]]:
    """Open device-protocol clients to mowers of ``sim``; all closed after the test."""
    clients: list[DeviceClient] = []

    async def open_(mower_id: uuid.UUID) -> DeviceClient:
        ws = await http.ws_connect(f"ws://127.0.0.1:{sim.port}/mowers/{mower_id}/ws")
        client = DeviceClient(ws)
        clients.append(client)
        return client

    yield open_
    for c in clients:
        await c.close()
