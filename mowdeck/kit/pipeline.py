"""JetStream publishes with many acks in flight, without per-publish bookkeeping costs.

nats-py's ``publish_async`` draws random bytes, waits on a semaphore through
``wait_for`` and parses every ack into a dataclass; on a hot path that is most of a
publish. This publisher numbers its requests, keeps one future each, and reads an ack
only far enough to tell success from an error. On the fast client the acks are read by a
direct subscription (``mowdeck.kit.wire``): no ``Msg``, queue or task step per ack; on
nats-py's stock client by a callback subscription.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from mowdeck.errors import MowdeckError
from mowdeck.kit.bus import header
from mowdeck.kit.wire import has_status, subscribe_direct

__all__ = ["PipelinedPublisher", "PublishRefusedError"]


class PublishRefusedError(MowdeckError):
    """The stream answered a publish with an error (or no stream took the subject)."""


class PipelinedPublisher:
    """Publishes to JetStream; each publish returns a future settled by the stream's ack."""

    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        self._prefix = ""
        self._futures: dict[str, asyncio.Future[None]] = {}
        self._next = 0
        self._sub: Any = None

    async def start(self) -> None:
        """Subscribe to the ack inbox."""
        self._prefix = self._nc.new_inbox() + "."
        self._sub = await subscribe_direct(
            self._nc, self._prefix + "*", self._on_raw_ack, fallback=self._on_ack
        )

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str]
    ) -> asyncio.Future[None]:
        """Publish and return the future of the stream's ack (cancel it to give up)."""
        self._next += 1
        token = str(self._next)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures[token] = future
        future.add_done_callback(functools.partial(self._forget, token))
        try:
            await self._nc.publish(subject, data, reply=self._prefix + token, headers=headers)
        except BaseException:
            future.cancel()  # never sent: no ack will come for it
            raise
        return future

    def _forget(self, token: str, _: asyncio.Future[None]) -> None:
        self._futures.pop(token, None)

    async def _on_ack(self, msg: Msg) -> None:
        self._settle(msg.subject, header(msg, "Status") == "503", msg.data)

    def _on_raw_ack(self, subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        del reply
        self._settle(subject.decode(), has_status(hdr, b"503"), data)

    def _settle(self, subject: str, no_stream: bool, data: bytes) -> None:
        future = self._futures.get(subject[len(self._prefix) :])
        if future is None or future.done():
            return
        if no_stream:
            future.set_exception(PublishRefusedError(f"no stream takes {subject}"))
        elif b'"error"' in data:
            future.set_exception(PublishRefusedError(data.decode(errors="replace")))
        else:
            future.set_result(None)

    @property
    def in_flight(self) -> int:
        """Publishes whose ack has not come yet."""
        return len(self._futures)

    async def stop(self) -> None:
        """Stop reading acks; futures still open are cancelled."""
        for future in list(self._futures.values()):
            future.cancel()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:
                self._sub = None
