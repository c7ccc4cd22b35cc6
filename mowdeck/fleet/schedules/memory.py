"""In-memory adapters of the schedule store and the site directory (for unit tests);
held to the same contract tests as PostgreSQL's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from zoneinfo import ZoneInfo

from mowdeck.fleet.errors import MowerNotFoundError
from mowdeck.fleet.ports import CommandRecord
from mowdeck.fleet.schedules.plan import Restriction, ScheduleState, SlotRecord
from mowdeck.fleet.schedules.ports import Claim, Mowers, Sending, SiteZone, StoredSchedule

__all__ = ["MemoryScheduleStore", "MemorySiteDirectory"]


@dataclass
class MemorySiteDirectory:
    """Sites by id (account and time zone) and mowers' sites."""

    sites: dict[uuid.UUID, tuple[uuid.UUID, str]] = field(default_factory=dict)
    mowers: dict[uuid.UUID, uuid.UUID | None] = field(default_factory=dict)

    async def site_of(self, mower_id: uuid.UUID) -> SiteZone | None:
        """The site of a mower, or None."""
        site = self.mowers.get(mower_id)
        return (
            None if site is None or site not in self.sites else SiteZone(site, self.sites[site][1])
        )

    async def account_of(self, site_id: uuid.UUID) -> uuid.UUID | None:
        """The account of a site, or None."""
        found = self.sites.get(site_id)
        return None if found is None else found[0]


class MemoryScheduleStore:
    """``ScheduleStore`` in dictionaries; one claim or lock at a time."""

    def __init__(self, sites: MemorySiteDirectory) -> None:
        self.sites = sites
        self.schedules: dict[uuid.UUID, tuple[StoredSchedule, ScheduleState]] = {}
        self.slots: dict[tuple[uuid.UUID, datetime], SlotRecord] = {}
        self.restriction_rows: dict[uuid.UUID, Restriction] = {}
        # command id -> (body, owed since, mower, publish at)
        self.outbox: dict[uuid.UUID, tuple[bytes, datetime, uuid.UUID, datetime]] = {}
        self.commands: list[CommandRecord] = []
        self._lock = asyncio.Lock()
        self._sending = asyncio.Lock()

    async def put(self, schedule: StoredSchedule, state: ScheduleState) -> None:
        """Store a schedule with its first due (a park on it is kept)."""
        if schedule.mower_id not in self.sites.mowers:
            raise MowerNotFoundError(f"mower {schedule.mower_id} is not registered")
        old = self.schedules.get(schedule.mower_id)
        hold = old[1].hold if old is not None else None
        self.schedules[schedule.mower_id] = (schedule, replace(state, hold=hold, decided=None))

    def _state(self, mower_id: uuid.UUID, now: datetime, *, decided: bool) -> ScheduleState:
        stored, state = self.schedules[mower_id]
        site = self.sites.mowers.get(mower_id)
        zone = self.sites.sites[site][1] if site in self.sites.sites else stored.timezone
        active = [r for r in self.restriction_rows.values() if r.site_id == site and r.until > now]
        restriction = max(active, key=lambda r: r.until) if active else None
        seen = None
        if decided and state.due is not None and state.due.kind == "start":
            record = self.slots.get((mower_id, state.due.slot.start))
            seen = record.state if record is not None else None
        return replace(state, zone=ZoneInfo(zone or "UTC"), restriction=restriction, decided=seen)

    async def get(self, mower_id: uuid.UUID, now: datetime) -> ScheduleState | None:
        """A mower's schedule state at ``now``."""
        if mower_id not in self.schedules:
            return None
        return self._state(mower_id, now, decided=False)

    async def stored(self, mower_id: uuid.UUID) -> StoredSchedule | None:
        """A mower's schedule as set."""
        found = self.schedules.get(mower_id)
        return None if found is None else found[0]

    async def recent_slots(self, mower_id: uuid.UUID, limit: int) -> list[SlotRecord]:
        """The mower's latest recorded slots, newest first."""
        mine = [(k[1], v) for k, v in self.slots.items() if k[0] == mower_id]
        return [v for _, v in sorted(mine, key=lambda kv: kv[0], reverse=True)][:limit]

    @asynccontextmanager
    async def claim_due(
        self, now: datetime, limit: int, starts_until: datetime | None = None
    ) -> AsyncIterator[Claim]:
        """Lock up to ``limit`` due schedules; write on exit."""
        until = max(now, starts_until or now)
        async with self._lock:
            due = [
                m
                for m, (_, s) in self.schedules.items()
                if s.due is not None
                and (s.due.at <= now or (s.due.kind == "start" and s.due.at <= until))
            ]
            due.sort(key=lambda m: self.schedules[m][1].due.at)  # type: ignore[union-attr]
            claim = Claim([self._state(m, now, decided=True) for m in due[:limit]])
            yield claim
            self._write(claim, now)

    @asynccontextmanager
    async def lock(self, mowers: Mowers, now: datetime) -> AsyncIterator[Claim]:
        """Lock the schedules of ``mowers``; write on exit."""
        async with self._lock:
            chosen = sorted(
                m
                for m in self.schedules
                if m in mowers.mower_ids
                or (mowers.site_id is not None and self.sites.mowers.get(m) == mowers.site_id)
            )
            claim = Claim([self._state(m, now, decided=True) for m in chosen])
            yield claim
            self._write(claim, now)

    def _write(self, claim: Claim, now: datetime) -> None:
        for state, decision, _ in claim.decisions:
            slot = decision.slot
            key = (state.mower_id, slot.start) if slot is not None else None
            if slot is not None and slot.state == "started" and key in self.slots:
                raise RuntimeError("a slot was decided twice; the claim is rolled back")
            if decision.order is not None and decision.order.kind != "start_mow":
                for owed, (_, _, mower, at) in list(self.outbox.items()):
                    if mower == state.mower_id and at > now:
                        del self.outbox[owed]  # a start claimed ahead, withdrawn
        for state, decision, issued in claim.decisions:
            slot = decision.slot
            if slot is not None:
                key = (state.mower_id, slot.start)
                made = issued.record.command_id if issued is not None else None
                self.slots[key] = replace(slot, command_id=made)
            if issued is not None:
                self.commands.append(issued.record)
                record = issued.record
                self.outbox[record.command_id] = (
                    issued.body,
                    issued.publish_at,
                    record.mower_id,
                    issued.publish_at,
                )
            stored, old = self.schedules[state.mower_id]
            self.schedules[state.mower_id] = (
                stored,
                replace(old, due=decision.due, hold=decision.hold),
            )
        if claim.restriction is not None:
            self.restriction_rows[claim.restriction.restriction_id] = claim.restriction

    async def next_due(self) -> datetime | None:
        """When the earliest schedule is due."""
        dues = [s.due.at for _, s in self.schedules.values() if s.due is not None]
        return min(dues, default=None)

    async def restrictions(self, site_id: uuid.UUID, now: datetime) -> list[Restriction]:
        """The site's restrictions not ended at ``now``, by end."""
        found = [
            r for r in self.restriction_rows.values() if r.site_id == site_id and r.until > now
        ]
        return sorted(found, key=lambda r: r.until)

    async def remove_restriction(self, site_id: uuid.UUID, restriction_id: uuid.UUID) -> bool:
        """Delete a restriction; whether it existed."""
        found = self.restriction_rows.get(restriction_id)
        if found is None or found.site_id != site_id:
            return False
        del self.restriction_rows[restriction_id]
        return True

    async def unpublished(
        self, older_than: datetime, now: datetime, limit: int
    ) -> list[tuple[uuid.UUID, bytes]]:
        """Commands owed since before ``older_than``; each taken (re-dated) by one caller."""
        owed = sorted(
            (since, command_id, body)
            for command_id, (body, since, _, _) in self.outbox.items()
            if since < older_than
        )[:limit]
        for _, command_id, body in owed:
            _, _, mower, at = self.outbox[command_id]
            self.outbox[command_id] = (body, now, mower, at)
        return [(command_id, body) for _, command_id, body in owed]

    @asynccontextmanager
    async def sending(self, command_ids: Sequence[uuid.UUID]) -> AsyncIterator[Sending]:
        """Hold the still-owed commands while they are published; forget those done."""
        async with self._sending:
            sending = Sending({c for c in command_ids if c in self.outbox})
            yield sending
            await self.published(sending.done)

    async def published(self, command_ids: Sequence[uuid.UUID]) -> None:
        """Forget commands the bus stored."""
        for command_id in command_ids:
            self.outbox.pop(command_id, None)
