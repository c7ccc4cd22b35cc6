"""Events as they go out: encoded once for every client, as an SSE block and a WebSocket frame.

An SSE block is ``event: <type>``, ``id: <position>``, ``data: <json>``; a WebSocket text
frame is ``{"id": ..., "type": ..., "data": ...}``. The JSON body comes from the bus as it
was published (it is one line: msgspec writes no newlines).
"""

from __future__ import annotations

import time
import uuid
from typing import Final, Literal

import msgspec

__all__ = [
    "CONTROL_TYPES",
    "EVENT_TYPES",
    "Frame",
    "FrameType",
    "frame",
]

FrameType = Literal[
    "state",
    "command",
    "link",
    "notification",
    "alarm",
    "snapshot",
    "resync",
    "heartbeat",
    "access",
    "close",
]
EVENT_TYPES: Final = frozenset({"state", "command", "link", "notification", "alarm"})
"""The types a client may choose with ``?types=``; the others always come."""
CONTROL_TYPES: Final = frozenset({"snapshot", "resync", "heartbeat", "access", "close"})


class Frame(msgspec.Struct, gc=False):
    """One event, encoded lazily for each transport and then shared by every client.

    Not tracked by the garbage collector (it holds no containers, so it can be in no
    cycle): thousands a second live for a few milliseconds, and tracked they would
    trigger collections that walk every long-lived object with the loop stopped.
    """

    type: FrameType
    id: str
    data: bytes
    mower_id: uuid.UUID | None
    born: float  # time.monotonic() when the bus delivered it
    _sse: bytes | None = None
    _ws: bytes | None = None

    @property
    def sse(self) -> bytes:
        """The Server-Sent Events block."""
        if self._sse is None:
            self._sse = b"event: %s\nid: %s\ndata: %s\n\n" % (
                self.type.encode(),
                self.id.encode(),
                self.data,
            )
        return self._sse

    @property
    def ws(self) -> bytes:
        """The WebSocket text frame's payload."""
        if self._ws is None:
            self._ws = b'{"id":"%s","type":"%s","data":%s}' % (
                self.id.encode(),
                self.type.encode(),
                self.data,
            )
        return self._ws

    @property
    def conflatable(self) -> bool:
        """A state: a newer one of the same mower replaces it while it waits."""
        return self.type == "state"


def frame(type_: FrameType, id_: str, data: bytes, mower_id: uuid.UUID | None = None) -> Frame:
    """A frame born now."""
    return Frame(type_, id_, data, mower_id, time.monotonic())
