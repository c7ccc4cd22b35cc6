"""Ports of the schedules: the schedule store (with its slot log, restrictions and
command outbox) and the sites' time zones."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from mowdeck.fleet.ports import CommandRecord
from mowdeck.fleet.schedules.plan import Decision, Restriction, ScheduleState, SlotRecord
from mowdeck.fleet.schedules.slots import Task

__all__ = [
    "Claim",
    "Issued",
    "Mowers",
    "ScheduleStore",
    "Sending",
    "SiteDirectory",
    "SiteZone",
    "StoredSchedule",
]


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A mower's schedule as its owner set it (``timezone``: its own, for a mower
    without a site)."""

    mower_id: uuid.UUID
    account_id: uuid.UUID
    enabled: bool
    tasks: list[Task]
    timezone: str | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Issued:
    """A command owed to the bus: its record (for the command log and audit) and body."""

    record: CommandRecord
    body: bytes
    publish_at: datetime  # when it goes to the bus: now, or a slot's start claimed ahead


@dataclass(frozen=True, slots=True)
class Mowers:
    """Which schedules to lock: these mowers, or every mower of ``site_id``."""

    mower_ids: Sequence[uuid.UUID] = ()
    site_id: uuid.UUID | None = None


@dataclass
class Claim:
    """Schedules locked for one transaction; ``decide`` collects what happens to them.

    On a clean exit of the context the decisions, their slots, their commands (command
    log, audit trail and outbox) and ``restriction`` are written in one transaction; on
    an exception nothing is.
    """

    states: list[ScheduleState]
    decisions: list[tuple[ScheduleState, Decision, Issued | None]] = field(default_factory=list)
    restriction: Restriction | None = None

    def decide(self, state: ScheduleState, decision: Decision, issued: Issued | None) -> None:
        """Record ``decision`` for ``state`` (and the command it issues)."""
        self.decisions.append((state, decision, issued))


@dataclass
class Sending:
    """Commands held while they are published: ``owed`` may go, ``done`` went."""

    owed: set[uuid.UUID]
    done: list[uuid.UUID] = field(default_factory=list)


class ScheduleStore(Protocol):
    """Schedules, their slots, the sites' restrictions and the scheduler's outbox."""

    async def put(self, schedule: StoredSchedule, state: ScheduleState) -> None:
        """Store a schedule with its first due (a park on it is kept)."""
        ...

    async def get(self, mower_id: uuid.UUID, now: datetime) -> ScheduleState | None:
        """A mower's schedule state (zone, due, park, the site's restriction at ``now``)."""
        ...

    async def stored(self, mower_id: uuid.UUID) -> StoredSchedule | None:
        """A mower's schedule as set."""
        ...

    async def recent_slots(self, mower_id: uuid.UUID, limit: int) -> list[SlotRecord]:
        """The mower's latest recorded slots, newest first."""
        ...

    def claim_due(
        self, now: datetime, limit: int, starts_until: datetime | None = None
    ) -> AbstractAsyncContextManager[Claim]:
        """Lock up to ``limit`` schedules due at ``now`` (a slot's start: due by
        ``starts_until``, claimed ahead) that no other claim holds."""
        ...

    def lock(self, mowers: Mowers, now: datetime) -> AbstractAsyncContextManager[Claim]:
        """Lock the schedules of ``mowers`` (waiting for a claim that holds one)."""
        ...

    async def next_due(self) -> datetime | None:
        """When the earliest schedule is due (None: none is)."""
        ...

    async def restrictions(self, site_id: uuid.UUID, now: datetime) -> list[Restriction]:
        """The site's restrictions that have not ended at ``now``, by end."""
        ...

    async def remove_restriction(self, site_id: uuid.UUID, restriction_id: uuid.UUID) -> bool:
        """Delete a restriction; whether it existed."""
        ...

    async def unpublished(
        self, older_than: datetime, now: datetime, limit: int
    ) -> list[tuple[uuid.UUID, bytes]]:
        """Commands committed but not yet confirmed published, owed since before
        ``older_than`` (a replica stopped between the two); each taken by one caller."""
        ...

    async def published(self, command_ids: Sequence[uuid.UUID]) -> None:
        """Forget commands the bus stored."""
        ...

    def sending(self, command_ids: Sequence[uuid.UUID]) -> AbstractAsyncContextManager[Sending]:
        """Hold those of ``command_ids`` still owed (not withdrawn) while they are
        published; on a clean exit forget ``sending.done``."""
        ...


@dataclass(frozen=True, slots=True)
class SiteZone:
    """A mower's site and its time zone."""

    site_id: uuid.UUID
    timezone: str


class SiteDirectory(Protocol):
    """What the schedules read of the sites (Fleet's ``fleet_sites``)."""

    async def site_of(self, mower_id: uuid.UUID) -> SiteZone | None:
        """The site of a mower, or None."""
        ...

    async def account_of(self, site_id: uuid.UUID) -> uuid.UUID | None:
        """The account a site belongs to, or None for no such site."""
        ...
