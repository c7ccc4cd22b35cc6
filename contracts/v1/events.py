"""Domain events: a generic envelope whose payload type follows from ``type`` and ``version``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Generic, Literal, TypeVar

import msgspec

from contracts.v1._base import AwareDatetime, ContractError, Struct, utc_field
from contracts.v1.fleet import MowerLink, MowerRegistration
from contracts.v1.sites import SiteAreas, SiteRef

__all__ = [
    "EVENT_PAYLOADS",
    "AlarmChanged",
    "EventEnvelope",
    "GrantsChanged",
    "NotificationSent",
    "UserRef",
    "payload_type",
]

P = TypeVar("P")

EventType = Annotated[
    str,
    msgspec.Meta(min_length=3, max_length=100, pattern=r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"),
]


class UserRef(Struct, frozen=True):
    """Payload of ``identity.user.disabled`` and ``identity.user.deleted``."""

    user_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    account_id: uuid.UUID | None = None


class GrantsChanged(Struct, frozen=True):
    """Payload of ``identity.grants.changed``: cached authorization decisions are stale."""

    account_id: uuid.UUID | None = None
    user_id: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    object: Annotated[str, msgspec.Meta(max_length=300)] | None = None


Severity = Literal["info", "warning", "critical"]


class NotificationSent(Struct, frozen=True):
    """Payload of ``notifications.sent``: an inbox item was stored for a user."""

    notification_id: uuid.UUID
    user_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    mower_id: uuid.UUID
    kind: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    severity: Severity
    dedupe_key: Annotated[str, msgspec.Meta(min_length=1, max_length=300)]
    title: str = ""
    body: str = ""


AlarmState = Literal["active", "acknowledged", "cleared"]
AlarmChangeKind = Literal["raised", "updated", "cleared", "acknowledged", "assigned"]


class AlarmChanged(Struct, frozen=True):
    """Payload of ``notifications.alarm_changed``: an alarm as it is after ``change``.

    An alarm is a mower's condition from when a rule told it until it ended
    (docs/notifications.md, "Alarms"); the event's ``account_id`` is the mower's account.
    """

    alarm_id: uuid.UUID
    mower_id: uuid.UUID
    condition: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    kind: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    severity: Severity
    state: AlarmState
    change: AlarmChangeKind
    first_at: AwareDatetime
    latest_at: AwareDatetime
    count: Annotated[int, msgspec.Meta(ge=1)] = 1
    code: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    acknowledged_by: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    assignee: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    cleared_at: AwareDatetime | None = None


class EventEnvelope(Struct, Generic[P], frozen=True):
    """A domain event ``<domain>.<name>`` of a given version with its typed payload."""

    id: uuid.UUID
    type: EventType
    occurred_at: AwareDatetime
    producer: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    payload: P
    version: Annotated[int, msgspec.Meta(ge=1)] = 1
    account_id: uuid.UUID | None = None
    correlation_id: uuid.UUID | None = None
    causation_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        utc_field(self, "occurred_at")
        expected = EVENT_PAYLOADS.get((self.type, self.version))
        if expected is None:
            raise ContractError(f"`type` {self.type!r} version {self.version} is not a v1 event")
        if not isinstance(self.payload, expected):
            raise ContractError(
                f"`payload` of {self.type} v{self.version} must be {expected.__name__}"
            )

    @classmethod
    def new(
        cls,
        type: str,
        payload: P,
        *,
        producer: str,
        now: datetime,
        account_id: uuid.UUID | None = None,
        correlation_id: uuid.UUID | None = None,
        causation_id: uuid.UUID | None = None,
        version: int = 1,
    ) -> EventEnvelope[P]:
        """A new event with a fresh id."""
        return cls(
            id=uuid.uuid4(),
            type=type,
            version=version,
            occurred_at=now,
            producer=producer,
            payload=payload,
            account_id=account_id,
            correlation_id=correlation_id,
            causation_id=causation_id,
        )


EVENT_PAYLOADS: dict[tuple[str, int], type[Struct]] = {
    ("mower.registered", 1): MowerRegistration,
    ("mower.updated", 1): MowerRegistration,
    ("mower.removed", 1): MowerRegistration,
    ("mower.connected", 1): MowerLink,
    ("mower.disconnected", 1): MowerLink,
    ("identity.user.disabled", 1): UserRef,
    ("identity.user.deleted", 1): UserRef,
    ("identity.grants.changed", 1): GrantsChanged,
    ("notifications.sent", 1): NotificationSent,
    ("notifications.alarm_changed", 1): AlarmChanged,
    ("site.created", 1): SiteRef,
    ("site.updated", 1): SiteRef,
    ("site.removed", 1): SiteRef,
    ("site.areas_changed", 1): SiteAreas,
}
"""Every v1 event: ``(type, version)`` to its payload model. A new meaning is a new version."""


def payload_type(event_type: str, version: int = 1) -> type[Struct]:
    """The payload model of an event type and version."""
    try:
        return EVENT_PAYLOADS[(event_type, version)]
    except KeyError:
        raise ContractError(f"`type` {event_type!r} version {version} is not a v1 event") from None
