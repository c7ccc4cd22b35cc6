"""Ports of Fleet: the mower repository (with its unpublished events) and the command log."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import msgspec

from contracts.v1 import CommandEnvelope, CommandResult, Connection, MowerRegistration

# The status Fleet records for a command no final result came for (never published).
UNANSWERED_REASON = "no result from the device gateway (outcome unknown)"

__all__ = [
    "UNANSWERED_REASON",
    "AuditEntry",
    "AuditQuery",
    "AuditStatus",
    "AuditTrail",
    "CommandLog",
    "CommandRecord",
    "EndpointClash",
    "MowerRecord",
    "MowerRepository",
    "PruneCutoffs",
    "Pruning",
    "RegistryEvent",
    "RelayClaim",
    "RelayStats",
    "StatusRecord",
]


@dataclass(frozen=True)
class MowerRecord:
    """A stored registration with its bookkeeping.

    ``endpoint_key`` is the device endpoint the registration holds
    (``EndpointPolicy.key``; None when its connection names none): one mower per key.
    """

    registration: MowerRegistration
    created_at: datetime
    updated_at: datetime
    version: int = 1
    endpoint_key: str | None = None


@dataclass(frozen=True)
class EndpointClash:
    """A mower left without its device endpoint: ``holder``, registered earlier, has it."""

    mower_id: uuid.UUID
    holder: uuid.UUID


@dataclass(frozen=True)
class RegistryEvent:
    """An encoded event owed to the bus; ``event_id`` is its ``Nats-Msg-Id``."""

    event_id: uuid.UUID
    subject: str
    body: bytes
    created_at: datetime


@dataclass(frozen=True)
class RelayStats:
    """How far the relay is behind, and how many events it set aside."""

    pending: int
    oldest: datetime | None
    set_aside: int = 0


@dataclass(frozen=True)
class CommandRecord:
    """A command as issued (from its envelope)."""

    command_id: uuid.UUID
    mower_id: uuid.UUID
    account_id: uuid.UUID
    kind: str
    issued_by: str
    issued_at: datetime
    expires_at: datetime
    command: str | None = None  # the command as JSON (kind and parameters), for the audit

    @classmethod
    def of(cls, envelope: CommandEnvelope) -> CommandRecord:
        """The record of an envelope."""
        return cls(
            command_id=envelope.command_id,
            mower_id=envelope.mower_id,
            account_id=envelope.account_id,
            kind=envelope.kind,
            issued_by=envelope.issued_by,
            issued_at=envelope.issued_at,
            expires_at=envelope.expires_at,
            command=msgspec.json.encode(envelope.command).decode(),
        )


@dataclass(frozen=True)
class StatusRecord:
    """One status a command reached."""

    status: str
    at: datetime
    reason: str | None = None

    @classmethod
    def of(cls, result: CommandResult) -> StatusRecord:
        """The record of a result."""
        return cls(status=result.status, at=result.at, reason=result.reason)


@dataclass
class RelayClaim:
    """Unpublished events claimed by one relay; ``published`` collects what was sent and
    ``failed`` what can never be sent (by id, with the reason)."""

    events: Sequence[RegistryEvent]
    published: list[uuid.UUID] = field(default_factory=list)
    failed: dict[uuid.UUID, str] = field(default_factory=dict)


class MowerRepository(Protocol):
    """The registry; every change is stored together with the event that announces it."""

    async def add(self, record: MowerRecord, event: RegistryEvent) -> None:
        """Store a new mower and its event; ``MowerExistsError`` if the id is taken,
        ``EndpointTakenError`` if another mower holds ``record.endpoint_key``."""
        ...

    async def get(self, mower_id: uuid.UUID) -> MowerRecord | None:
        """One mower, or None."""
        ...

    async def get_many(self, mower_ids: Sequence[uuid.UUID]) -> list[MowerRecord]:
        """The registered mowers among ``mower_ids``, ordered by name then id."""
        ...

    async def page_of_account(
        self,
        account_id: uuid.UUID,
        mower_ids: Sequence[uuid.UUID],
        after: tuple[str, uuid.UUID] | None,
        limit: int,
    ) -> list[MowerRecord]:
        """Up to ``limit`` of the account's mowers among ``mower_ids``, by name then id,
        behind the keyset position ``after`` (a name and an id)."""
        ...

    async def all_registrations(self) -> list[MowerRegistration]:
        """Every registration a gateway may link (the gateways' shard lists are cut from
        it): all but the mowers ``assign_endpoint_keys`` left without their endpoint."""
        ...

    async def update(
        self, record: MowerRecord, event: RegistryEvent, expected_version: int
    ) -> None:
        """Replace a mower and store its event; ``VersionConflictError`` if it moved on,
        ``EndpointTakenError`` if another mower holds ``record.endpoint_key``."""
        ...

    async def assign_endpoint_keys(
        self,
        key_of: Callable[[Connection], str | None],
        event_of: Callable[[MowerRegistration], RegistryEvent],
    ) -> list[EndpointClash]:
        """Give each mower stored without an endpoint key (before keys were kept) its key,
        earliest registration first; returns the mowers left without it.

        A mower whose key another mower holds is left without one and out of
        ``all_registrations``, until a change of its own stores a key or a later call
        finds the key free: then it takes it and ``event_of`` its registration is stored
        (a ``mower.updated``, so the gateways learn of it). Replicas may call it at once.
        """
        ...

    async def remove(
        self, mower_id: uuid.UUID, event: RegistryEvent, expected_version: int
    ) -> None:
        """Delete a mower and store its event; ``MowerNotFoundError``/``VersionConflictError``."""
        ...

    def claim_unpublished(self, limit: int) -> AbstractAsyncContextManager[RelayClaim | None]:
        """Claim up to ``limit`` unpublished events in order; None while another relay works.

        On a clean exit the ids in ``claim.published`` are marked published and those in
        ``claim.failed`` are set aside with their reason (never claimed again, but kept);
        on an exception nothing is marked and the events stay owed.
        """
        ...

    async def relay_stats(self) -> RelayStats:
        """Events owed, the oldest one's time, and events set aside."""
        ...


class CommandLog(Protocol):
    """Issued commands and the statuses reported for them."""

    async def record(
        self, commands: Sequence[CommandRecord], results: Sequence[CommandResult]
    ) -> None:
        """Store commands and results idempotently (redeliveries change nothing).

        Raises ``UnstorableError`` when the store refuses the data of the batch itself
        (nothing of it is stored; one by one, the others would be).
        """
        ...

    async def lookup(
        self, command_id: uuid.UUID
    ) -> tuple[CommandRecord | None, list[StatusRecord]]:
        """A command (None if not recorded yet) and its statuses in time order."""
        ...

    async def finalize_overdue(
        self, expired_before: datetime, *, at: datetime, limit: int
    ) -> list[CommandResult]:
        """Record up to ``limit`` open commands that expired before ``expired_before`` as
        failed (``UNANSWERED_REASON``, at ``at``), in the working set and the audit trail;
        the statuses recorded. Replicas may run it at once: each command is claimed by one.
        """
        ...

    async def settle(
        self, command_id: uuid.UUID, expired_before: datetime, *, at: datetime
    ) -> StatusRecord | None:
        """Finalize ``command_id`` as ``finalize_overdue`` would (if it is open and
        expired before ``expired_before``); its first final status, or None."""
        ...


@dataclass(frozen=True)
class PruneCutoffs:
    """What a pruning round deletes: rows older than these times."""

    published_events: datetime  # events published before this
    commands: datetime  # commands issued, and statuses reported, before this
    audit: datetime | None = None  # the audit trail's rows before this (None: keep all)

    @classmethod
    def at(
        cls, now: datetime, events_days: float, command_days: float, audit_days: float = 400
    ) -> PruneCutoffs:
        """The cutoffs of a round at ``now``."""
        return cls(
            now - timedelta(days=events_days),
            now - timedelta(days=command_days),
            now - timedelta(days=audit_days),
        )


class Pruning(Protocol):
    """Deletes old published events and old command-log rows."""

    async def prune(self, cutoffs: PruneCutoffs, batch_rows: int) -> dict[str, int] | None:
        """Delete in batches of ``batch_rows``; rows deleted per table, or None if another
        replica is pruning (only one at a time does)."""
        ...


@dataclass(frozen=True)
class AuditQuery:
    """One page of an account's audit trail, newest first; ``before`` continues a page."""

    account_id: uuid.UUID
    mower_id: uuid.UUID | None = None
    since: datetime | None = None  # issued at or after
    until: datetime | None = None  # issued before
    kind: str | None = None
    limit: int = 100
    before: tuple[datetime, uuid.UUID] | None = None  # (issued_at, command_id) of the last
    # Only these mowers' commands (a site member's trail); None: the whole account's.
    mower_ids: tuple[uuid.UUID, ...] | None = None


class AuditStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One status of a command in the audit trail, and who recorded it."""

    status: str
    at: datetime
    reason: str | None
    source: str  # "gateway" or "fleet"


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A command in the audit trail with every status it reached, in time order."""

    command_id: uuid.UUID
    account_id: uuid.UUID
    mower_id: uuid.UUID
    kind: str
    command: msgspec.Raw | None  # the command as issued; None for one recorded before it was kept
    issued_by: str
    issued_at: datetime
    expires_at: datetime
    statuses: list[AuditStatus]


class AuditTrail(Protocol):
    """Reads the audit trail (``CommandLog.record`` writes it)."""

    async def page(self, query: AuditQuery) -> list[AuditEntry]:
        """Up to ``query.limit`` commands matching ``query``, newest first."""
        ...
