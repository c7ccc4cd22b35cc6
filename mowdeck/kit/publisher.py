"""Publishing to JetStream: one typed method per kind of message, one engine underneath.

Subjects, ``Nats-Msg-Id``, the ``Mowdeck-Priority`` header and the refusal of an
expired command (ADR 0009) are made here and nowhere else. Every method hands the
message to the publish window (``kit/publish_window.py``) and returns the future of the
stream's ack: it fails with ``PublishRefusedError`` when the stream refuses the message
(no stream, too large, ...) and with ``AckTimeoutError`` after the publisher's deadline.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from nats.aio.client import Client as NATS
from nats.js import api

from contracts.v1 import CommandEnvelope, CommandResult, EventEnvelope, MowerState, encode
from contracts.v1.subjects import (
    COMMAND_PREFIX,
    EMERGENCY_PREFIX,
    EVENT_PREFIX,
    MSG_ID_HEADER,
    PRIORITY_HEADER,
    RESULT_PREFIX,
    TELEMETRY_PREFIX,
)
from mowdeck.kit.errors import ExpiredCommandError
from mowdeck.kit.publish_window import PublishWindow

__all__ = ["ACK_DEADLINE_SECONDS", "Ack", "Publisher", "pub_ack"]

ACK_DEADLINE_SECONDS = 5.0

Ack = asyncio.Future[bytes]
"""Settled by the stream's ack (its JSON payload: ``pub_ack`` reads it)."""

_pub_ack = msgspec.json.Decoder(dict[str, Any])


def pub_ack(data: bytes) -> api.PubAck:
    """The stream's ack as nats-py's ``PubAck`` (stream, sequence, duplicate)."""
    return api.PubAck.from_response(_pub_ack.decode(data))


class Publisher:
    """Typed JetStream publishes, many in flight, each ack bounded by ``deadline`` seconds.

    ``key`` gives a mower's id as text; a caller that formats ids once (the gateway's
    ``MowerKeys``) passes its own, so subjects cost a lookup and a concatenation.
    ``start()`` subscribes to the ack inbox; the first acknowledged publish does it too.
    """

    def __init__(
        self,
        nc: NATS,
        *,
        deadline: float = ACK_DEADLINE_SECONDS,
        key: Callable[[uuid.UUID], str] = str,
    ) -> None:
        self._nc = nc
        self._window = PublishWindow(nc, deadline=deadline)
        self._key = key
        self.deadline = deadline

    async def start(self) -> None:
        """Subscribe to the ack inbox (idempotent)."""
        await self._window.start()

    async def command(
        self, envelope: CommandEnvelope, *, now: datetime, body: bytes | None = None
    ) -> Ack:
        """Publish on ``command.mower.<id>``; ``ExpiredCommandError`` if it expired by ``now``.

        An emergency stop is first announced, the same bytes and headers, on the core
        subject ``emergency.mower.<id>``, in the same write: the gateway's emergency lane
        reads only that subject, so it sees the stops and none of the ordinary commands
        (docs/gateway.md, amendment 2 to ADR 0013). The stream's copy is the stop of
        record either way. ``body`` is the envelope already encoded, when the caller has
        it.
        """
        if envelope.is_expired(now):
            raise ExpiredCommandError(
                f"command {envelope.command_id} expired at {envelope.expires_at}"
            )
        key = self._key(envelope.mower_id)
        data = encode(envelope) if body is None else body
        headers = {
            MSG_ID_HEADER: str(envelope.command_id),
            PRIORITY_HEADER: envelope.priority or "normal",
        }
        if envelope.is_emergency:
            await self._nc.publish(EMERGENCY_PREFIX + key, data, headers=headers)
        return await self._window.publish(COMMAND_PREFIX + key, data, headers)

    async def result(self, result: CommandResult) -> Ack:
        """Publish on ``command.result.mower.<id>`` with msg id ``<command_id>:<status>``."""
        return await self._window.publish(
            RESULT_PREFIX + self._key(result.mower_id),
            encode(result),
            {MSG_ID_HEADER: result.msg_id},
        )

    async def state(self, state: MowerState, *, msg_id: str) -> Ack:
        """Publish on ``telemetry.mower.<id>``."""
        return await self._window.publish(
            TELEMETRY_PREFIX + self._key(state.mower_id), encode(state), {MSG_ID_HEADER: msg_id}
        )

    async def state_unacked(self, state: MowerState, *, msg_id: str) -> None:
        """Publish on ``telemetry.mower.<id>`` without asking for the stream's ack.

        The stream still stores and de-duplicates it. For a stream of states where a newer
        one supersedes a lost one: no ack to wait for, none to hold a slot in flight.
        """
        await self._nc.publish(
            TELEMETRY_PREFIX + self._key(state.mower_id),
            encode(state),
            headers={MSG_ID_HEADER: msg_id},
        )

    async def event(self, event: EventEnvelope[Any]) -> Ack:
        """Publish on ``event.<type>`` with the event id as msg id."""
        return await self.publish(EVENT_PREFIX + event.type, encode(event), msg_id=str(event.id))

    async def publish(
        self, subject: str, data: bytes, *, msg_id: str, headers: dict[str, str] | None = None
    ) -> Ack:
        """Publish bytes already encoded (an outbox row, a test's junk) with ``msg_id``."""
        hdrs = {MSG_ID_HEADER: msg_id}
        if headers:
            hdrs.update(headers)
        return await self._window.publish(subject, data, hdrs)

    @property
    def in_flight(self) -> int:
        """Publishes whose ack has not come yet."""
        return self._window.in_flight

    async def wait_acked(self, timeout: float) -> bool:
        """Wait until every publish made so far is settled; False on timeout."""
        return await self._window.wait_acked(timeout)

    async def stop(self) -> None:
        """Stop reading acks; publishes still waiting for theirs are cancelled."""
        await self._window.stop()
