"""Admission of a delivered command, in ADR 0013's order: a pure decision, no I/O.

1. invalid envelope, or a subject naming another mower: terminate;
2. another shard's mower: acknowledge without acting;
3. unknown mower: ``rejected``;
4. account differs from the registered owner: ``rejected`` (the mower never sees it);
5. expired: ``expired``;
6. otherwise admitted: acknowledged and handed to the mower's controller.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from contracts.v1 import CommandEnvelope, ContractError, MowerRegistration, decode_command, shard_of
from contracts.v1.subjects import mower_id_from_subject

__all__ = [
    "Admitted",
    "Decision",
    "Expired",
    "Foreign",
    "Invalid",
    "Rejected",
    "admit",
]


@dataclass(frozen=True, slots=True)
class Invalid:
    """Terminate: the message can never be executed."""

    reason: str


@dataclass(frozen=True, slots=True)
class Foreign:
    """Acknowledge: another shard owns this mower."""

    mower_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Rejected:
    """Answer ``rejected`` and acknowledge."""

    envelope: CommandEnvelope
    reason: str


@dataclass(frozen=True, slots=True)
class Expired:
    """Answer ``expired`` and acknowledge."""

    envelope: CommandEnvelope


@dataclass(frozen=True, slots=True)
class Admitted:
    """Hand to the controller and acknowledge."""

    envelope: CommandEnvelope
    registration: MowerRegistration


Decision = Invalid | Foreign | Rejected | Expired | Admitted


def admit(  # noqa: PLR0911 - one return per outcome of ADR 0013's order
    subject: str,
    data: bytes,
    *,
    shard_index: int,
    shard_count: int,
    mowers: Mapping[uuid.UUID, MowerRegistration],
    now: datetime,
) -> Decision:
    """Decide what happens to one delivered command."""
    try:
        subject_mower = mower_id_from_subject(subject)
        envelope = decode_command(data)
    except ContractError as err:
        return Invalid(f"invalid command: {err}")
    if envelope.mower_id != subject_mower:
        return Invalid(
            f"subject names mower {subject_mower} but the envelope is for {envelope.mower_id}"
        )
    if shard_of(subject_mower, shard_count) != shard_index:
        return Foreign(subject_mower)
    registration = mowers.get(envelope.mower_id)
    if registration is None:
        return Rejected(envelope, "unknown mower")
    if registration.account_id != envelope.account_id:
        return Rejected(envelope, "account does not own this mower")
    if envelope.is_expired(now):
        return Expired(envelope)
    return Admitted(envelope, registration)
