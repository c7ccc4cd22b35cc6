"""In-memory adapters of Fleet's ports, for unit tests; same contract as PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from contracts.v1 import CommandResult, MowerRegistration
from mowdeck.fleet.errors import (
    MowerExistsError,
    MowerNotFoundError,
    UnstorableError,
    VersionConflictError,
)
from mowdeck.fleet.ports import (
    CommandRecord,
    MowerRecord,
    OutboxClaim,
    OutboxEvent,
    OutboxStats,
    PruneCutoffs,
    StatusRecord,
)

__all__ = ["InMemoryCommandLog", "InMemoryMowerRepository", "InMemoryPruning"]


class InMemoryMowerRepository:
    """A ``MowerRepository`` in dicts; the outbox is a list in commit order."""

    def __init__(self) -> None:
        self.mowers: dict[uuid.UUID, MowerRecord] = {}
        self.outbox: list[tuple[OutboxEvent, datetime | None]] = []
        self.failed: dict[uuid.UUID, str] = {}  # set aside: never published
        self._relay = asyncio.Lock()

    async def add(self, record: MowerRecord, event: OutboxEvent) -> None:
        """Store a new mower and its event."""
        mower_id = record.registration.mower_id
        if mower_id in self.mowers:
            raise MowerExistsError(f"mower {mower_id} is already registered")
        self.mowers[mower_id] = record
        self.outbox.append((event, None))

    async def get(self, mower_id: uuid.UUID) -> MowerRecord | None:
        """One mower, or None."""
        return self.mowers.get(mower_id)

    async def get_many(self, mower_ids: Sequence[uuid.UUID]) -> list[MowerRecord]:
        """The registered mowers among ``mower_ids``, by name then id."""
        found = [self.mowers[m] for m in set(mower_ids) if m in self.mowers]
        return sorted(found, key=lambda r: (r.registration.name, r.registration.mower_id))

    async def all_registrations(self) -> list[MowerRegistration]:
        """Every registration."""
        return [r.registration for r in self.mowers.values()]

    def _current(self, mower_id: uuid.UUID, expected_version: int) -> MowerRecord:
        current = self.mowers.get(mower_id)
        if current is None:
            raise MowerNotFoundError(f"mower {mower_id} is not registered")
        if current.version != expected_version:
            raise VersionConflictError(f"mower {mower_id} changed meanwhile")
        return current

    async def update(self, record: MowerRecord, event: OutboxEvent, expected_version: int) -> None:
        """Replace a mower and store its event."""
        self._current(record.registration.mower_id, expected_version)
        self.mowers[record.registration.mower_id] = record
        self.outbox.append((event, None))

    async def remove(self, mower_id: uuid.UUID, event: OutboxEvent, expected_version: int) -> None:
        """Delete a mower and store its event."""
        self._current(mower_id, expected_version)
        del self.mowers[mower_id]
        self.outbox.append((event, None))

    @asynccontextmanager
    async def claim_outbox(self, limit: int) -> AsyncIterator[OutboxClaim | None]:
        """Claim unpublished events in order; None while another relay holds the claim."""
        if self._relay.locked():
            yield None
            return
        async with self._relay:
            claim = OutboxClaim(self._owed()[:limit])
            yield claim
            done = set(claim.published)
            stamp = datetime.now(UTC)
            self.outbox = [(e, stamp if e.event_id in done else at) for e, at in self.outbox]
            self.failed.update(claim.failed)

    def _owed(self) -> list[OutboxEvent]:
        return [e for e, at in self.outbox if at is None and e.event_id not in self.failed]

    async def outbox_stats(self) -> OutboxStats:
        """Events owed, the oldest one's time, and events set aside."""
        pending = self._owed()
        return OutboxStats(
            len(pending), min((e.created_at for e in pending), default=None), len(self.failed)
        )


class InMemoryCommandLog:
    """A ``CommandLog`` in dicts."""

    def __init__(self) -> None:
        self.commands: dict[uuid.UUID, CommandRecord] = {}
        self.statuses: dict[uuid.UUID, dict[str, StatusRecord]] = {}

    async def record(
        self, commands: Sequence[CommandRecord], results: Sequence[CommandResult]
    ) -> None:
        """Store commands and results; repeats change nothing.

        Like PostgreSQL, refuses the whole batch when a result holds a NUL character.
        """
        if any(r.reason is not None and "\x00" in r.reason for r in results):
            raise UnstorableError("command log refuses the data: a NUL character")
        for command in commands:
            self.commands.setdefault(command.command_id, command)
        for result in results:
            self.statuses.setdefault(result.command_id, {}).setdefault(
                result.status, StatusRecord.of(result)
            )

    async def lookup(
        self, command_id: uuid.UUID
    ) -> tuple[CommandRecord | None, list[StatusRecord]]:
        """A command and its statuses in time order."""
        statuses = sorted(self.statuses.get(command_id, {}).values(), key=lambda s: s.at)
        return self.commands.get(command_id), statuses


class InMemoryPruning:
    """``Pruning`` over the in-memory outbox and command log; ``locked`` stands for a
    round running in another replica."""

    def __init__(self, repository: InMemoryMowerRepository, log: InMemoryCommandLog) -> None:
        self.repository = repository
        self.log = log
        self.locked = False

    async def prune(
        self,
        cutoffs: PruneCutoffs,
        batch_rows: int,  # noqa: ARG002 - batches only matter to SQL
    ) -> dict[str, int] | None:
        """Delete what is older than the cutoffs."""
        if self.locked:
            return None
        outbox = self.repository.outbox
        kept = [(e, at) for e, at in outbox if at is None or at >= cutoffs.outbox]
        self.repository.outbox = kept
        statuses = 0
        for command_id in list(self.log.statuses):
            by_status = self.log.statuses[command_id]
            for status, record in list(by_status.items()):
                if record.at < cutoffs.commands:
                    del by_status[status]
                    statuses += 1
            if not by_status:
                del self.log.statuses[command_id]
        old = [c for c, r in self.log.commands.items() if r.issued_at < cutoffs.commands]
        for command_id in old:
            del self.log.commands[command_id]
        return {
            "fleet_outbox": len(outbox) - len(kept),
            "fleet_command_statuses": statuses,
            "fleet_commands": len(old),
        }
