"""Enough of a NATS client for the kit's Publisher, answering publishes as a stream would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

STORED = b'{"stream":"S","seq":1}'
DUPLICATE = b'{"stream":"S","seq":1,"duplicate":true}'
NO_STREAM = b"<503>"  # answered as the server does: an empty message with status 503


def refusal_of(err_code: int, description: str = "refused", code: int = 400) -> bytes:
    """An ack payload refusing the publish."""
    error = {"code": code, "err_code": err_code, "description": description}
    return json.dumps({"error": error}).encode()


class Sent:
    """One publish as the client was asked to make it."""

    def __init__(self, subject: str, data: bytes, reply: str, headers: dict[str, str]) -> None:
        self.subject = subject
        self.data = data
        self.reply = reply
        self.headers = headers


class _AckMsg:
    def __init__(self, subject: str, data: bytes, headers: dict[str, str] | None) -> None:
        self.subject = subject
        self.data = data
        self.headers = headers


class _Sub:
    async def unsubscribe(self) -> None:
        return None


class FakeNats:
    """Records publishes; ``answer(sent)`` gives the ack payload, or None for no ack ever."""

    max_payload = 4096

    def __init__(self, answer: Callable[[Sent], bytes | None] = lambda _: STORED) -> None:
        self.answer = answer
        self.sent: list[Sent] = []
        self._cb: Callable[[Any], Awaitable[None]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def new_inbox(self) -> str:
        return "_INBOX.fake"

    async def subscribe(
        self, subject: str, queue: str = "", cb: Callable[[Any], Awaitable[None]] | None = None
    ) -> _Sub:
        self._cb = cb
        return _Sub()

    async def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        sent = Sent(subject, payload, reply, dict(headers or {}))
        self.sent.append(sent)
        answer = self.answer(sent)
        if reply and answer is not None and self._cb is not None:
            msg = (
                _AckMsg(reply, b"", {"Status": "503"})
                if answer == NO_STREAM
                else _AckMsg(reply, answer, None)
            )
            task = asyncio.get_running_loop().create_task(self._cb(msg))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
