"""The two transports: Server-Sent Events on a streamed response, and a WebSocket."""

from __future__ import annotations

import contextlib

from aiohttp import WSMsgType, web

from mowdeck.realtime.client import close_data
from mowdeck.realtime.frames import Frame, frame

__all__ = ["SseSink", "WsSink", "ws_close_code"]


class SseSink:
    """Frames as ``event:``/``id:``/``data:`` blocks; the close as a last ``close`` event."""

    def __init__(self, response: web.StreamResponse, position: str) -> None:
        self._response = response
        self._position = position

    async def write(self, frames: list[Frame]) -> None:
        """One write for the batch."""
        if len(frames) == 1:
            await self._response.write(frames[0].sse)
        else:
            await self._response.write(b"".join(f.sse for f in frames))
        self._position = frames[-1].id

    async def close(self, reason: str) -> None:
        """Send the reason and end the response."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._response.write(frame("close", self._position, close_data(reason)).sse)
            await self._response.write_eof()


def ws_close_code(reason: str) -> int:
    """The WebSocket close code of a reason: 1001 going away, 1008 policy, 4000 slow."""
    if reason == "shutdown":
        return 1001
    if reason.startswith("too-far-behind"):
        return 4000
    return 1008


class WsSink:
    """Frames as ``{"id", "type", "data"}`` text messages; the close with a code and reason."""

    def __init__(self, ws: web.WebSocketResponse, position: str) -> None:
        self._ws = ws
        self._position = position

    async def write(self, frames: list[Frame]) -> None:
        """One text message per frame."""
        ws = self._ws
        for f in frames:
            await ws.send_frame(f.ws, WSMsgType.TEXT)
        self._position = frames[-1].id

    async def close(self, reason: str) -> None:
        """Send the reason as a ``close`` event and in the close frame."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            if not self._ws.closed:
                await self._ws.send_frame(
                    frame("close", self._position, close_data(reason)).ws, WSMsgType.TEXT
                )
            await self._ws.close(code=ws_close_code(reason), message=reason.encode()[:120])
