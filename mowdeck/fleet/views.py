"""What Fleet's API answers: the response models the handlers encode and the OpenAPI
document describes (``fleet/openapi.py``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

from contracts.v1 import CommandStatus as Status
from contracts.v1 import Connection
from mowdeck.fleet.ports import AuditEntry, MowerRecord

__all__ = [
    "AuditPage",
    "CommandAccepted",
    "CommandView",
    "MowerPage",
    "MowerView",
    "StatusView",
    "mower_view",
]


class MowerView(msgspec.Struct, frozen=True, kw_only=True):
    """A mower as the API shows it: the registration plus timestamps."""

    mower_id: uuid.UUID
    account_id: uuid.UUID
    name: str
    connection: Connection
    created_at: datetime
    updated_at: datetime
    site_id: uuid.UUID | None = None


def mower_view(record: MowerRecord) -> MowerView:
    """The view of a stored mower."""
    reg = record.registration
    return MowerView(
        mower_id=reg.mower_id,
        account_id=reg.account_id,
        name=reg.name,
        connection=reg.connection,
        created_at=record.created_at,
        updated_at=record.updated_at,
        site_id=reg.site_id,
    )


class MowerPage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of mowers by name then id; ``next_after`` continues it while ``has_more``."""

    mowers: list[MowerView]
    next_after: str | None
    has_more: bool


class AuditPage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the audit, newest first; ``next_after`` continues it while ``has_more``.

    ``next_cursor`` is the same cursor under the name it had first.
    """

    commands: list[AuditEntry]
    next_after: str | None
    next_cursor: str | None
    has_more: bool


class CommandAccepted(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A command sent to its mower; ``status`` is ``pending`` when a ``wait`` ran out."""

    command_id: uuid.UUID
    status: Literal["pending"] | None = None


class StatusView(msgspec.Struct, frozen=True, kw_only=True):
    """One status a command reached."""

    status: Status
    at: datetime
    reason: str | None


class CommandView(msgspec.Struct, frozen=True, kw_only=True):
    """A command and the statuses it reached so far; ``final`` when no other follows."""

    command_id: uuid.UUID
    mower_id: uuid.UUID
    kind: str
    issued_by: str
    issued_at: datetime
    expires_at: datetime
    statuses: list[StatusView]
    final: bool
