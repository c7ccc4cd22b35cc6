"""The scheduler's commands: made with a new id, committed with their decision, then
published from the outbox (``fleet_schedule_outbox``) and forgotten once the bus has them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from contracts.v1 import CommandEnvelope, ReturnToDock, StartMow, encode
from mowdeck.fleet.ports import CommandRecord
from mowdeck.fleet.schedules.plan import Order, ScheduleState
from mowdeck.fleet.schedules.ports import Issued, ScheduleStore
from mowdeck.kit.bus import BusError, ExpiredCommandError

__all__ = ["Publishes", "issue", "publish_all"]

log = structlog.get_logger("mowdeck.fleet.scheduler")


class Publishes(Protocol):
    """Publishes a command envelope (``CommandPublisher``)."""

    async def publish(self, envelope: CommandEnvelope, body: bytes) -> None:
        """Return once the bus stored it."""
        ...


def issue(
    state: ScheduleState, order: Order, *, issued_by: str, now: datetime, ttl: timedelta
) -> tuple[CommandEnvelope, Issued]:
    """The envelope of an order issued at ``now`` with a new command id, and its record
    for the store (published at ``now``: a slot's start claimed ahead is issued at it)."""
    command = (
        StartMow(duration_min=order.duration_min, work_area=order.work_area)
        if order.kind == "start_mow"
        else ReturnToDock()
    )
    envelope = CommandEnvelope.issue(
        mower_id=state.mower_id,
        account_id=state.account_id,
        command=command,
        issued_by=issued_by,
        now=now,
        ttl=ttl,
    )
    return envelope, Issued(CommandRecord.of(envelope), encode(envelope), now)


async def publish_all(
    publisher: Publishes, store: ScheduleStore, sent: Sequence[tuple[CommandEnvelope, bytes]]
) -> int:
    """Publish committed commands still owed (a dock may have withdrawn a start) and
    forget those the bus stored (or that expired); the rest stay owed. How many went."""
    if not sent:
        return 0
    async with store.sending([e.command_id for e, _ in sent]) as sending:
        owed = [(e, b) for e, b in sent if e.command_id in sending.owed]
        outcomes = await asyncio.gather(
            *(publisher.publish(envelope, body) for envelope, body in owed),
            return_exceptions=True,
        )
        published = 0
        for (envelope, _), outcome in zip(owed, outcomes, strict=True):
            command_id = str(envelope.command_id)
            if outcome is None:
                sending.done.append(envelope.command_id)
                published += 1
            elif isinstance(outcome, ExpiredCommandError):
                log.warning("scheduled command expired unpublished", command_id=command_id)
                sending.done.append(envelope.command_id)
            elif isinstance(outcome, BusError):
                log.warning("scheduled command not published yet", command_id=command_id)
            else:
                raise outcome
    return published
