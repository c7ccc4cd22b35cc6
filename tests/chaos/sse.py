"""Realtime clients: Server-Sent Events read and remembered, resumed with ``Last-Event-ID``."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class SseClient:
    """One stream of command results for a few mowers; every event and reconnect kept."""

    url: str
    token: str
    mowers: list[str]
    # (monotonic time, type, id, data) of every event.
    events: list[tuple[float, str, str, Any]] = field(default_factory=list)
    reconnects: int = 0
    last_id: str = ""

    async def run(self, stop: asyncio.Event) -> None:
        """Read until ``stop``; reconnect (resuming from the last id) whenever the stream ends."""
        headers = {"Authorization": f"Bearer {self.token}"}
        params = {"mowers": ",".join(self.mowers), "types": "command"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=40)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                if self.last_id:
                    headers["Last-Event-ID"] = self.last_id
                try:
                    async with session.get(
                        f"{self.url}/v1/stream", params=params, headers=headers
                    ) as r:
                        if r.status == 200:
                            await self._read(r, stop)
                except (aiohttp.ClientError, TimeoutError, ConnectionError):
                    pass
                if not stop.is_set():
                    self.reconnects += 1
                    await asyncio.sleep(0.5)

    async def _read(self, response: aiohttp.ClientResponse, stop: asyncio.Event) -> None:
        kind, ident, data = "message", "", ""
        reading = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                line_task = asyncio.ensure_future(response.content.readline())
                done, _ = await asyncio.wait(
                    {line_task, reading}, return_when=asyncio.FIRST_COMPLETED
                )
                if line_task not in done:
                    line_task.cancel()
                    return
                raw = line_task.result()
                if not raw:
                    return
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("id:"):
                    ident = line[3:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif line == "":
                    if data:
                        self._event(kind, ident, data)
                    kind, ident, data = "message", "", ""
        finally:
            reading.cancel()

    def _event(self, kind: str, ident: str, data: str) -> None:
        try:
            doc = json.loads(data)
        except ValueError:
            doc = data
        self.events.append((time.monotonic(), kind, ident, doc))
        if ident:
            self.last_id = ident
        if kind == "close":
            self.reconnects += 0  # the server ends it; the loop reconnects with last_id

    def results(self) -> set[tuple[str, str]]:
        """(command id, status) of every command event received."""
        return {
            (d["command_id"], d["status"])
            for _, k, _, d in self.events
            if k == "command" and isinstance(d, dict)
        }

    def commands_seq(self) -> list[tuple[int, str]]:
        """(COMMANDS position, event type) of every event, in order received."""
        out = []
        for _, kind, ident, _ in self.events:
            for part in ident.split("."):
                if part.startswith("c") and part[1:].isdigit():
                    out.append((int(part[1:]), kind))
        return out
