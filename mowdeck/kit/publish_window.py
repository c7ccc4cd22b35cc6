"""JetStream publishes with many acks in flight, without per-publish bookkeeping costs.

nats-py's ``publish_async`` draws random bytes, waits on a semaphore through
``wait_for`` and parses every ack into a dataclass; on a hot path that is most of a
publish. This publisher numbers its requests, keeps one future each, and reads an ack
only far enough to tell success from an error. On the fast client the acks are read by a
direct subscription (``mowdeck.kit.wire``): no ``Msg``, queue or task step per ack; on
nats-py's stock client by a callback subscription.

An ack that never comes (lost with a reconnect: nats-py fails nothing then) fails its
future after the publisher's ``deadline``. The deadlines are kept in publish order in
one deque, walked from the left by one timer that runs only while publishes are in
flight: a timer per publish (``loop.call_at``, cancelled on the ack) costs about seven
times as much (docs/performance-log.md, "Telemetry").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections import deque
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from mowdeck.kit.errors import AckTimeoutError, PublishRefusedError
from mowdeck.kit.wire import has_status, subscribe_direct

__all__ = ["PublishRefusedError", "PublishWindow", "refusal"]


class PublishWindow:
    """A window of JetStream publishes in flight; each returns a future settled by its ack.

    The future's result is the ack's payload (JSON; ``mowdeck.kit.publisher.pub_ack``
    reads it). It fails with ``PublishRefusedError`` when the stream refuses the message
    and with ``AckTimeoutError`` when no ack comes within ``deadline`` seconds (None:
    wait for ever). ``start()`` is optional: the first publish subscribes.
    """

    def __init__(self, nc: NATS, *, deadline: float | None = None) -> None:
        self._nc = nc
        self._prefix = ""
        self._futures: dict[str, asyncio.Future[bytes]] = {}
        self._next = 0
        self._sub: Any = None
        self._starting: asyncio.Lock | None = None
        self._deadline = deadline
        self._deadlines: deque[tuple[float, asyncio.Future[bytes]]] = deque()
        self._sweep_every = 0.0 if deadline is None else max(deadline / 10, 0.001)
        self._sweeper: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        """Subscribe to the ack inbox (once; later calls return at once)."""
        if self._prefix:
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._sub is not None:
                return  # subscribed meanwhile, by the publish this one waited for
            prefix = self._nc.new_inbox() + "."
            self._sub = await subscribe_direct(
                self._nc, prefix + "*", self._on_raw_ack, fallback=self._on_ack
            )
            self._prefix = prefix

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str]
    ) -> asyncio.Future[bytes]:
        """Publish and return the future of the stream's ack (cancel it to give up)."""
        if not self._prefix:
            await self.start()
        self._next += 1
        token = str(self._next)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        self._futures[token] = future
        future.add_done_callback(functools.partial(self._forget, token))
        try:
            await self._nc.publish(subject, data, reply=self._prefix + token, headers=headers)
        except BaseException:
            future.cancel()  # never sent: no ack will come for it
            raise
        if self._deadline is not None:
            self._deadlines.append((loop.time() + self._deadline, future))
            if self._sweeper is None:
                self._sweeper = loop.call_later(self._sweep_every, self._sweep, loop)
        return future

    def _forget(self, token: str, _: asyncio.Future[bytes]) -> None:
        self._futures.pop(token, None)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweeper = None
        deadlines = self._deadlines
        now = loop.time()
        while deadlines and (deadlines[0][0] <= now or deadlines[0][1].done()):
            _, future = deadlines.popleft()
            if not future.done():
                future.set_exception(
                    AckTimeoutError(f"no JetStream acknowledgement within {self._deadline:g} s")
                )
        if deadlines:
            self._sweeper = loop.call_later(self._sweep_every, self._sweep, loop)

    async def _on_ack(self, msg: Msg) -> None:
        status: Any = msg.headers.get("Status") if msg.headers else None
        if isinstance(status, list):  # so nats-py gives it with ``fast_mail_parser``
            status = status[0] if status else None
        self._settle(msg.subject, status == "503", msg.data)

    def _on_raw_ack(self, subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        del reply
        self._settle(subject.decode(), has_status(hdr, b"503"), data)

    def _settle(self, subject: str, no_stream: bool, data: bytes) -> None:
        future = self._futures.get(subject[len(self._prefix) :])
        if future is None or future.done():
            return
        if no_stream or b'"error"' in data:
            future.set_exception(refusal(data, no_stream=no_stream))
        else:
            future.set_result(data)

    @property
    def in_flight(self) -> int:
        """Publishes whose ack has not come yet."""
        return len(self._futures)

    async def wait_acked(self, timeout: float) -> bool:
        """Wait until every publish made so far is settled; False on timeout."""
        pending = [f for f in self._futures.values() if not f.done()]
        if not pending:
            return True
        _, late = await asyncio.wait(pending, timeout=timeout)
        return not late

    async def stop(self) -> None:
        """Stop reading acks; futures still open are cancelled."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._deadlines.clear()
        for future in list(self._futures.values()):
            future.cancel()
        if self._sub is not None:
            # A connection already gone took the subscription with it.
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None
        self._prefix = ""


def refusal(data: bytes, *, no_stream: bool = False) -> PublishRefusedError:
    """The error of an ack that refuses a publish (read only on this, the rare path)."""
    if no_stream:
        return PublishRefusedError("no stream takes the subject", code=503)
    try:
        error = json.loads(data)["error"]
        return PublishRefusedError(
            str(error.get("description", "")),
            code=int(error.get("code", 0)),
            err_code=int(error.get("err_code", 0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return PublishRefusedError(data.decode(errors="replace"))
