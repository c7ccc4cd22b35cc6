"""In-memory stand-ins for a JetStream delivery and for the bus, for tests without a server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import nats.errors
from msgspec import Struct
from nats.aio.msg import Msg
from nats.js import api

__all__ = ["FakeBus", "FakeMsg", "FakeNc", "PubAnswer", "Published"]


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
    """One publish a fake recorded."""

    subject: str
    data: bytes
    headers: dict[str, str] | None
    msg_id: str | None = None


class FakeNc:
    """The core connection of a ``FakeBus``: records publishes.

    The first ``fail`` publishes raise ``MaxPayloadError`` instead (the next are kept).
    """

    def __init__(self, *, max_payload: int = 1024 * 1024, fail: int = 0) -> None:
        self.max_payload = max_payload
        self.fail = fail
        self.published: list[Published] = []

    async def publish(
        self, subject: str, data: bytes = b"", headers: dict[str, str] | None = None
    ) -> None:
        """Record a core publish (or fail it, while ``fail`` lasts)."""
        if self.fail:
            self.fail -= 1
            raise nats.errors.MaxPayloadError
        self.published.append(Published(subject, data, headers))

    async def flush(self, timeout: float = 10.0) -> None:
        """Nothing is buffered."""


# How JetStream answers a publish: True acks, None never answers, an exception is raised
# from the ack; a callable decides per msg id.
PubAnswer = bool | BaseException | None | Callable[[str], "bool | BaseException | None"]


class FakeBus:
    """A ``Bus`` stand-in: records JetStream publishes and answers requests from a script.

    ``answer`` settles each publish's ack (see ``PubAnswer``). ``replies`` are the answers
    to ``request`` in turn (an exception is raised); once used up, ``reply`` answers. The
    core connection is ``nc`` (a ``FakeNc`` with ``max_payload`` and ``fail_core``).
    """

    def __init__(
        self,
        *,
        answer: PubAnswer = True,
        max_payload: int = 1024 * 1024,
        fail_core: int = 0,
        replies: Iterable[bytes | BaseException] = (),
        reply: bytes | None = None,
    ) -> None:
        self.nc = FakeNc(max_payload=max_payload, fail=fail_core)
        self.answer = answer
        self.published: list[Published] = []
        self.acks: list[asyncio.Future[api.PubAck]] = []
        self.replies = list(replies)
        self.reply = reply
        self.requests: list[tuple[str, Any]] = []

    async def publish_nowait(
        self, subject: str, data: bytes, *, msg_id: str, headers: dict[str, str] | None = None
    ) -> asyncio.Future[api.PubAck]:
        """Record a publish; its ack future is settled as ``answer`` says."""
        self.published.append(Published(subject, data, headers, msg_id))
        ack: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
        outcome = self.answer(msg_id) if callable(self.answer) else self.answer
        if isinstance(outcome, BaseException):
            ack.set_exception(outcome)
        elif outcome:
            ack.set_result(api.PubAck(stream="FAKE", seq=len(self.published)))
        self.acks.append(ack)
        return ack

    async def publish(
        self, subject: str, data: bytes, *, msg_id: str, headers: dict[str, str] | None = None
    ) -> api.PubAck:
        """Record a publish and wait for its ack."""
        return await (await self.publish_nowait(subject, data, msg_id=msg_id, headers=headers))

    async def request(self, subject: str, message: Struct, *, timeout: float) -> bytes:
        """The next scripted reply (raised if it is an exception), then ``reply``."""
        self.requests.append((subject, message))
        answer = self.replies.pop(0) if self.replies else self.reply
        if isinstance(answer, BaseException):
            raise answer
        if answer is None:
            raise AssertionError(f"no reply scripted for request {len(self.requests)}")
        return answer
