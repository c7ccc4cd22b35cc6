"""In-memory adapters of Fleet's ports, for unit tests; same contract as PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime

import msgspec

from contracts.v1 import FINAL_STATUSES, CommandResult, Connection, MowerRegistration
from mowdeck.fleet.errors import (
    EndpointTakenError,
    MowerExistsError,
    MowerNotFoundError,
    UnstorableError,
    VersionConflictError,
)
from mowdeck.fleet.ports import (
    UNANSWERED_REASON,
    AuditEntry,
    AuditQuery,
    AuditStatus,
    CommandRecord,
    EndpointClash,
    MowerRecord,
    PruneCutoffs,
    RegistryEvent,
    RelayClaim,
    RelayStats,
    StatusRecord,
)

__all__ = [
    "InMemoryAuditTrail",
    "InMemoryCommandLog",
    "InMemoryMowerRepository",
    "InMemoryPruning",
]


class InMemoryMowerRepository:
    """A ``MowerRepository`` in dicts; the events are a list in commit order."""

    def __init__(self) -> None:
        self.mowers: dict[uuid.UUID, MowerRecord] = {}
        self.events: list[tuple[RegistryEvent, datetime | None]] = []
        self.failed: dict[uuid.UUID, str] = {}  # set aside: never published
        self.endpoints: dict[str, uuid.UUID] = {}  # the unique index: key -> holder
        self.unlinkable: set[uuid.UUID] = set()  # left without their endpoint: not listed
        self._relay = asyncio.Lock()

    def _hold(self, record: MowerRecord) -> None:
        # Raises before anything changed, as PostgreSQL's unique index does.
        mower_id, key = record.registration.mower_id, record.endpoint_key
        if key is not None and self.endpoints.get(key, mower_id) != mower_id:
            raise EndpointTakenError
        self._release(mower_id)
        if key is not None:
            self.endpoints[key] = mower_id
        self.unlinkable.discard(mower_id)

    def _release(self, mower_id: uuid.UUID) -> None:
        current = self.mowers.get(mower_id)
        if current is not None and current.endpoint_key is not None:
            self.endpoints.pop(current.endpoint_key, None)

    async def add(self, record: MowerRecord, event: RegistryEvent) -> None:
        """Store a new mower and its event."""
        mower_id = record.registration.mower_id
        if mower_id in self.mowers:
            raise MowerExistsError(f"mower {mower_id} is already registered")
        self._hold(record)
        self.mowers[mower_id] = record
        self.events.append((event, None))

    async def get(self, mower_id: uuid.UUID) -> MowerRecord | None:
        """One mower, or None."""
        return self.mowers.get(mower_id)

    async def get_many(self, mower_ids: Sequence[uuid.UUID]) -> list[MowerRecord]:
        """The registered mowers among ``mower_ids``, by name then id."""
        found = [self.mowers[m] for m in set(mower_ids) if m in self.mowers]
        return sorted(found, key=lambda r: (r.registration.name, r.registration.mower_id))

    async def page_of_account(
        self,
        account_id: uuid.UUID,
        mower_ids: Sequence[uuid.UUID],
        after: tuple[str, uuid.UUID] | None,
        limit: int,
    ) -> list[MowerRecord]:
        """Up to ``limit`` of the account's mowers among ``mower_ids`` behind ``after``."""
        found = [
            r
            for r in await self.get_many(mower_ids)
            if r.registration.account_id == account_id
            and (after is None or (r.registration.name, r.registration.mower_id) > after)
        ]
        return found[:limit]

    async def all_registrations(self) -> list[MowerRegistration]:
        """Every registration a gateway may link."""
        return [r.registration for m, r in self.mowers.items() if m not in self.unlinkable]

    def _current(self, mower_id: uuid.UUID, expected_version: int) -> MowerRecord:
        current = self.mowers.get(mower_id)
        if current is None:
            raise MowerNotFoundError(f"mower {mower_id} is not registered")
        if current.version != expected_version:
            raise VersionConflictError(f"mower {mower_id} changed meanwhile")
        return current

    async def update(
        self, record: MowerRecord, event: RegistryEvent, expected_version: int
    ) -> None:
        """Replace a mower and store its event."""
        self._current(record.registration.mower_id, expected_version)
        self._hold(record)
        self.mowers[record.registration.mower_id] = record
        self.events.append((event, None))

    async def remove(
        self, mower_id: uuid.UUID, event: RegistryEvent, expected_version: int
    ) -> None:
        """Delete a mower and store its event."""
        self._current(mower_id, expected_version)
        self._release(mower_id)
        self.unlinkable.discard(mower_id)
        del self.mowers[mower_id]
        self.events.append((event, None))

    async def assign_endpoint_keys(
        self,
        key_of: Callable[[Connection], str | None],
        event_of: Callable[[MowerRegistration], RegistryEvent],
    ) -> list[EndpointClash]:
        """Give mowers stored without an endpoint key theirs, earliest first."""
        keyless = sorted(
            (r for r in self.mowers.values() if r.endpoint_key is None),
            key=lambda r: (r.created_at, r.registration.mower_id),
        )
        clashes: list[EndpointClash] = []
        for record in keyless:
            mower_id = record.registration.mower_id
            key = key_of(record.registration.connection)
            if key is None:
                continue
            holder = self.endpoints.get(key)
            if holder is not None:
                self.unlinkable.add(mower_id)
                clashes.append(EndpointClash(mower_id, holder))
                continue
            self.endpoints[key] = mower_id
            self.mowers[mower_id] = replace(record, endpoint_key=key)
            if mower_id in self.unlinkable:
                self.unlinkable.discard(mower_id)
                self.events.append((event_of(record.registration), None))
        return clashes

    @asynccontextmanager
    async def claim_unpublished(self, limit: int) -> AsyncIterator[RelayClaim | None]:
        """Claim unpublished events in order; None while another relay holds the claim."""
        if self._relay.locked():
            yield None
            return
        async with self._relay:
            claim = RelayClaim(self._owed()[:limit])
            yield claim
            done = set(claim.published)
            stamp = datetime.now(UTC)
            self.events = [(e, stamp if e.event_id in done else at) for e, at in self.events]
            self.failed.update(claim.failed)

    def _owed(self) -> list[RegistryEvent]:
        return [e for e, at in self.events if at is None and e.event_id not in self.failed]

    async def relay_stats(self) -> RelayStats:
        """Events owed, the oldest one's time, and events set aside."""
        pending = self._owed()
        return RelayStats(
            len(pending), min((e.created_at for e in pending), default=None), len(self.failed)
        )


class InMemoryCommandLog:
    """A ``CommandLog`` in dicts: the working set, the audit trail and the open commands."""

    def __init__(self) -> None:
        self.commands: dict[uuid.UUID, CommandRecord] = {}
        self.statuses: dict[uuid.UUID, dict[str, StatusRecord]] = {}
        self.audit_commands: dict[uuid.UUID, CommandRecord] = {}
        self.audit_statuses: dict[uuid.UUID, dict[tuple[str, str], AuditStatus]] = {}
        self.open: dict[uuid.UUID, CommandRecord] = {}

    async def record(
        self, commands: Sequence[CommandRecord], results: Sequence[CommandResult]
    ) -> None:
        """Store commands and results; repeats change nothing.

        Like PostgreSQL, refuses the whole batch when a result holds a NUL character.
        """
        if any(r.reason is not None and "\x00" in r.reason for r in results):
            raise UnstorableError("command log refuses the data: a NUL character")
        for command in commands:
            if command.command_id not in self.commands:
                self.commands[command.command_id] = command
                self.open[command.command_id] = command
            self.audit_commands.setdefault(command.command_id, command)
        for result in results:
            if result.is_final and self._answered_otherwise(result):
                continue  # the gateway's first final status stands (as in PostgreSQL)
            self._status(result, "gateway")
            if result.is_final:
                self.open.pop(result.command_id, None)

    def _answered_otherwise(self, result: CommandResult) -> bool:
        return any(
            source == "gateway" and status != result.status and status in FINAL_STATUSES
            for status, source in self.audit_statuses.get(result.command_id, {})
        )

    def _status(self, result: CommandResult, source: str) -> None:
        self.statuses.setdefault(result.command_id, {}).setdefault(
            result.status, StatusRecord.of(result)
        )
        entry = AuditStatus(status=result.status, at=result.at, reason=result.reason, source=source)
        self.audit_statuses.setdefault(result.command_id, {}).setdefault(
            (result.status, source), entry
        )

    async def lookup(
        self, command_id: uuid.UUID
    ) -> tuple[CommandRecord | None, list[StatusRecord]]:
        """A command and its statuses in time order."""
        statuses = sorted(self.statuses.get(command_id, {}).values(), key=lambda s: s.at)
        return self.commands.get(command_id), statuses

    async def finalize_overdue(
        self, expired_before: datetime, *, at: datetime, limit: int
    ) -> list[CommandResult]:
        """Record overdue open commands as failed (outcome unknown)."""
        due = sorted(
            (c for c in self.open.values() if c.expires_at < expired_before),
            key=lambda c: c.expires_at,
        )[:limit]
        return [r for c in due if (r := self._finalize(c, at)) is not None]

    def _finalize(self, command: CommandRecord, at: datetime) -> CommandResult | None:
        del self.open[command.command_id]
        known = self.statuses.get(command.command_id, {})
        if any(status in FINAL_STATUSES for status in known):
            return None
        result = CommandResult(
            command_id=command.command_id,
            mower_id=command.mower_id,
            status="failed",
            at=at,
            reason=UNANSWERED_REASON,
        )
        self._status(result, "fleet")
        return result

    async def settle(
        self, command_id: uuid.UUID, expired_before: datetime, *, at: datetime
    ) -> StatusRecord | None:
        """Finalize one command if it is overdue; its first final status, or None."""
        command = self.open.get(command_id)
        if command is not None and command.expires_at < expired_before:
            self._finalize(command, at)
        _, statuses = await self.lookup(command_id)
        return next((s for s in statuses if s.status in FINAL_STATUSES), None)


class InMemoryAuditTrail:
    """An ``AuditTrail`` over an ``InMemoryCommandLog``."""

    def __init__(self, log: InMemoryCommandLog) -> None:
        self.log = log

    async def page(self, query: AuditQuery) -> list[AuditEntry]:
        """Up to ``query.limit`` commands matching ``query``, newest first."""
        q = query
        found = [
            c
            for c in self.log.audit_commands.values()
            if c.account_id == q.account_id
            and (q.mower_id is None or c.mower_id == q.mower_id)
            and (q.mower_ids is None or c.mower_id in q.mower_ids)
            and (q.since is None or c.issued_at >= q.since)
            and (q.until is None or c.issued_at < q.until)
            and (q.kind is None or c.kind == q.kind)
            and (q.before is None or (c.issued_at, c.command_id) < q.before)
        ]
        found.sort(key=lambda c: (c.issued_at, c.command_id), reverse=True)
        return [self._entry(c) for c in found[: q.limit]]

    def _entry(self, c: CommandRecord) -> AuditEntry:
        statuses = self.log.audit_statuses.get(c.command_id, {}).values()
        return AuditEntry(
            command_id=c.command_id,
            account_id=c.account_id,
            mower_id=c.mower_id,
            kind=c.kind,
            command=msgspec.Raw(c.command.encode()) if c.command is not None else None,
            issued_by=c.issued_by,
            issued_at=c.issued_at,
            expires_at=c.expires_at,
            statuses=sorted(statuses, key=lambda s: (s.at, s.status, s.source)),
        )


class InMemoryPruning:
    """``Pruning`` over the in-memory events and command log; ``locked`` stands for a
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
        events = self.repository.events
        kept = [(e, at) for e, at in events if at is None or at >= cutoffs.published_events]
        self.repository.events = kept
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
        stale = [c for c, r in self.log.open.items() if r.expires_at < cutoffs.commands]
        for command_id in stale:
            del self.log.open[command_id]
        deleted = {
            "fleet_outbox": len(events) - len(kept),
            "fleet_command_statuses": statuses,
            "fleet_commands": len(old),
            "fleet_open_commands": len(stale),
        }
        if cutoffs.audit is not None:
            deleted.update(self._prune_audit(cutoffs.audit))
        return deleted

    def _prune_audit(self, cutoff: datetime) -> dict[str, int]:
        statuses = 0
        for command_id in list(self.log.audit_statuses):
            by_key = self.log.audit_statuses[command_id]
            for key, status in list(by_key.items()):
                if status.at < cutoff:
                    del by_key[key]
                    statuses += 1
            if not by_key:
                del self.log.audit_statuses[command_id]
        old = [c for c, r in self.log.audit_commands.items() if r.issued_at < cutoff]
        for command_id in old:
            del self.log.audit_commands[command_id]
        return {"fleet_audit_statuses": statuses, "fleet_audit_commands": len(old)}
