"""In-memory stand-ins for a JetStream delivery, a NATS connection and the bus (no server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple

import nats.errors
from msgspec import Struct
from nats.aio.msg import Msg
from nats.js import api

from contracts.v1.subjects import MSG_ID_HEADER
from mowdeck.kit.publisher import Ack, Publisher, pub_ack

__all__ = [
    "DUPLICATE",
    "NO_STREAM",
    "STORED",
    "FakeBus",
    "FakeMsg",
    "FakeNats",
    "PubAnswer",
    "Published",
    "refusal_of",
]


class FakeMsg(Msg):
    """A JetStream delivery that records how it was settled instead of telling a server.

    Its reply subject is a real ``$JS.ACK`` one built from ``stream``, ``consumer``,
    ``num_delivered`` and ``sequence`` (unless ``reply`` is given), so ``metadata`` and
    the parsing of the reply subject work as on a delivery. ``fail_ack`` makes ``ack()``
    raise it, as when the connection is being replaced.
    """

    def __init__(
        self,
        data: bytes = b"",
        subject: str = "test.subject",
        *,
        headers: dict[str, str] | None = None,
        reply: str | None = None,
        num_delivered: int = 1,
        sequence: int = 1,
        stream: str = "STREAM",
        consumer: str = "consumer",
        fail_ack: BaseException | None = None,
    ) -> None:
        if reply is None:
            # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
            reply = f"$JS.ACK.{stream}.{consumer}.{num_delivered}.{sequence}.{sequence}.0.0"
        # No client: nothing here writes to a connection (``wire.ack_all`` then calls ack()).
        super().__init__(_client=None, subject=subject, reply=reply, data=data, headers=headers)  # type: ignore[arg-type]
        self.fail_ack = fail_ack
        self.settled: list[str] = []  # "ack", "nak", "term", in the order they came
        self.nak_delays: list[float | None] = []
        self.progress = 0  # in_progress() calls
        self._settled_event = asyncio.Event()

    def __eq__(self, other: object) -> bool:
        # Msg compares its fields; two stand-ins built alike are still two deliveries.
        return self is other

    __hash__ = None  # type: ignore[assignment]  # unhashable, like Msg

    @property
    def outcome(self) -> str | None:
        """The last settlement (``ack``, ``nak`` or ``term``), None while unsettled."""
        return self.settled[-1] if self.settled else None

    async def wait_settled(self, timeout: float = 5.0) -> str:
        """The first settlement, once it came."""
        await asyncio.wait_for(self._settled_event.wait(), timeout)
        return self.settled[0]

    def _settle(self, outcome: str) -> None:
        self.settled.append(outcome)
        self._ackd = True
        self._settled_event.set()

    async def ack(self) -> None:
        """Record an ack (or raise ``fail_ack``)."""
        if self.fail_ack is not None:
            raise self.fail_ack
        self._settle("ack")

    async def nak(self, delay: float | None = None) -> None:
        """Record a nak and its delay."""
        self.nak_delays.append(delay)
        self._settle("nak")

    async def term(self) -> None:
        """Record a term."""
        self._settle("term")

    async def in_progress(self) -> None:
        """Count a progress report (it settles nothing)."""
        self.progress += 1


class Published(NamedTuple):
    """One publish a ``FakeNats`` recorded; ``reply`` is set when an ack was asked for."""

    subject: str
    data: bytes
    headers: dict[str, str] | None
    reply: str = ""

    @property
    def msg_id(self) -> str | None:
        """The ``Nats-Msg-Id`` header, if there is one."""
        return (self.headers or {}).get(MSG_ID_HEADER)


# How a stream acknowledges a publish, as the ack's payload.
STORED = b'{"stream":"S","seq":1}'
DUPLICATE = b'{"stream":"S","seq":1,"duplicate":true}'
NO_STREAM = b"<503>"  # answered as the server does: an empty message with status 503


def refusal_of(err_code: int, description: str = "refused", code: int = 400) -> bytes:
    """An ack payload refusing the publish."""
    error = {"code": code, "err_code": err_code, "description": description}
    return json.dumps({"error": error}).encode()


# The ack payload of a JetStream publish (None: no ack ever comes), or a function of the
# publish that gives it.
PubAnswer = bytes | None | Callable[[Published], bytes | None]


class _AckMsg:
    def __init__(self, subject: str, data: bytes, headers: dict[str, str] | None) -> None:
        self.subject = subject
        self.data = data
        self.headers = headers


class _Sub:
    async def unsubscribe(self) -> None:
        return None


class FakeNats:
    """Enough of a NATS connection for the kit's ``Publisher`` and for core publishes.

    Every publish is recorded in ``published``. One with a reply subject (a JetStream
    publish) is acknowledged as a stream would, with ``answer`` (see ``PubAnswer``), on
    the subscription the publisher made for its acks. The first ``fail`` publishes raise
    ``MaxPayloadError`` instead (the next are kept).
    """

    def __init__(
        self, answer: PubAnswer = STORED, *, max_payload: int = 1024 * 1024, fail: int = 0
    ) -> None:
        self.answer = answer
        self.max_payload = max_payload
        self.fail = fail
        self.published: list[Published] = []
        self._cb: Callable[[Any], Awaitable[None]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def new_inbox(self) -> str:
        """The prefix of the publisher's ack subjects."""
        return "_INBOX.fake"

    async def subscribe(
        self, subject: str, queue: str = "", cb: Callable[[Any], Awaitable[None]] | None = None
    ) -> _Sub:
        """Take ``cb`` as the receiver of every ack (nats-py's signature)."""
        self._cb = cb
        return _Sub()

    async def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Record a publish (or fail it, while ``fail`` lasts); acknowledge it if asked."""
        if self.fail:
            self.fail -= 1
            raise nats.errors.MaxPayloadError
        sent = Published(subject, payload, None if headers is None else dict(headers), reply)
        self.published.append(sent)
        answer = self.answer(sent) if callable(self.answer) else self.answer
        if reply and answer is not None and self._cb is not None:
            msg = (
                _AckMsg(reply, b"", {"Status": "503"})
                if answer == NO_STREAM
                else _AckMsg(reply, answer, None)
            )
            task = asyncio.get_running_loop().create_task(self._cb(msg))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def flush(self, timeout: float = 10.0) -> None:
        """Nothing is buffered."""


class FakeBus:
    """A ``Bus`` stand-in: publishes recorded on its connection, requests answered by script.

    The connection ``nc`` is a ``FakeNats`` (``answer``, ``max_payload``, and ``fail_core``
    as its ``fail``): what code publishes through the kit's ``Publisher`` on ``bus.nc``,
    and what the bus's own ``publish`` methods send, lands in ``nc.published``.
    ``replies`` are the answers to ``request`` in turn (an exception is raised); once used
    up, ``reply`` answers.
    """

    def __init__(
        self,
        *,
        answer: PubAnswer = STORED,
        max_payload: int = 1024 * 1024,
        fail_core: int = 0,
        replies: Iterable[bytes | BaseException] = (),
        reply: bytes | None = None,
    ) -> None:
        self.nc = FakeNats(answer, max_payload=max_payload, fail=fail_core)
        self.replies = list(replies)
        self.reply = reply
        self.requests: list[tuple[str, Any]] = []
        self._publisher: Publisher | None = None

    @property
    def publisher(self) -> Publisher:
        """The bus's own publisher, on ``nc``, as ``Bus.publisher``."""
        if self._publisher is None:
            self._publisher = Publisher(self.nc)  # type: ignore[arg-type]
        return self._publisher

    @property
    def published(self) -> list[Published]:
        """Everything published on the connection, in order."""
        return self.nc.published

    async def publish_nowait(
        self, subject: str, data: bytes, *, msg_id: str, headers: dict[str, str] | None = None
    ) -> Ack:
        """Publish through the bus's publisher; await the future for the ack."""
        return await self.publisher.publish(subject, data, msg_id=msg_id, headers=headers)

    async def publish(
        self, subject: str, data: bytes, *, msg_id: str, headers: dict[str, str] | None = None
    ) -> api.PubAck:
        """Publish and wait for the ack."""
        ack = await self.publish_nowait(subject, data, msg_id=msg_id, headers=headers)
        return pub_ack(await ack)

    async def request(self, subject: str, message: Struct, *, timeout: float) -> bytes:
        """The next scripted reply (raised if it is an exception), then ``reply``."""
        self.requests.append((subject, message))
        answer = self.replies.pop(0) if self.replies else self.reply
        if isinstance(answer, BaseException):
            raise answer
        if answer is None:
            raise AssertionError(f"no reply scripted for request {len(self.requests)}")
        return answer
