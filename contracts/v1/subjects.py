"""Subjects, headers and stream limits as data (ADR 0009)."""

from __future__ import annotations

import uuid
from typing import Final

import msgspec

from contracts.v1._base import ContractError

__all__ = [
    "COMMANDS",
    "EMERGENCY_FILTER",
    "EVENTS",
    "FLEET_MOWERS_LIST",
    "FLEET_SITES_AREAS",
    "MSG_ID_HEADER",
    "PRIORITY_HEADER",
    "SITE_EVENT_FILTER",
    "STREAMS",
    "TELEMETRY",
    "StreamSpec",
    "command_subject",
    "emergency_subject",
    "event_subject",
    "event_type_from_subject",
    "mower_id_from_subject",
    "result_subject",
    "telemetry_subject",
]

MSG_ID_HEADER: Final = "Nats-Msg-Id"
PRIORITY_HEADER: Final = "Mowdeck-Priority"

COMMAND_PREFIX: Final = "command.mower."
RESULT_PREFIX: Final = "command.result.mower."
TELEMETRY_PREFIX: Final = "telemetry.mower."
EVENT_PREFIX: Final = "event."

COMMAND_FILTER: Final = "command.mower.*"

EMERGENCY_PREFIX: Final = "emergency.mower."
EMERGENCY_FILTER: Final = "emergency.mower.*"
"""Core only (no stream holds it): an emergency stop announced as it is published.

The stop itself is the ``command.mower.<id>`` message the stream stores; the kit's
publisher sends the same bytes and headers here first, so that the gateway's emergency
lane sees the stops and nothing else (docs/gateway.md, amendment 2 to ADR 0013).
"""
RESULT_FILTER: Final = "command.result.mower.*"
TELEMETRY_FILTER: Final = "telemetry.mower.*"
MOWER_EVENT_FILTER: Final = "event.mower.*"
SITE_EVENT_FILTER: Final = "event.site.*"

FLEET_MOWERS_LIST: Final = "fleet.mowers.list"
"""Core NATS request/reply (not persisted): ``MowerListRequest`` to ``MowerListReply``."""

FLEET_SITES_AREAS: Final = "fleet.sites.areas"
"""Core NATS request/reply (not persisted): ``SiteAreasRequest`` to ``SiteAreasReply``."""


class StreamSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A JetStream stream the kit creates or updates on connect."""

    name: str
    subjects: tuple[str, ...]
    duplicate_window_s: float
    max_age_s: float
    max_msgs_per_subject: int = -1


COMMANDS: Final = StreamSpec(
    name="COMMANDS", subjects=("command.>",), duplicate_window_s=120, max_age_s=24 * 3600
)
TELEMETRY: Final = StreamSpec(
    name="TELEMETRY", subjects=("telemetry.>",), duplicate_window_s=30, max_age_s=3600
)
EVENTS: Final = StreamSpec(
    name="EVENTS", subjects=("event.>",), duplicate_window_s=120, max_age_s=7 * 24 * 3600
)
STREAMS: Final = (COMMANDS, TELEMETRY, EVENTS)


def command_subject(mower_id: uuid.UUID) -> str:
    """``command.mower.<id>``."""
    return f"{COMMAND_PREFIX}{mower_id}"


def emergency_subject(mower_id: uuid.UUID) -> str:
    """``emergency.mower.<id>``: where a stop is announced (core, not stored)."""
    return f"{EMERGENCY_PREFIX}{mower_id}"


def result_subject(mower_id: uuid.UUID) -> str:
    """``command.result.mower.<id>``."""
    return f"{RESULT_PREFIX}{mower_id}"


def telemetry_subject(mower_id: uuid.UUID) -> str:
    """``telemetry.mower.<id>``."""
    return f"{TELEMETRY_PREFIX}{mower_id}"


def event_subject(event_type: str) -> str:
    """``event.<domain>.<name>`` for an event type ``<domain>.<name>``."""
    return f"{EVENT_PREFIX}{event_type}"


def event_type_from_subject(subject: str) -> str:
    """The event type named by an ``event.`` subject."""
    if not subject.startswith(EVENT_PREFIX) or len(subject) <= len(EVENT_PREFIX):
        raise ContractError(f"subject {subject!r} is not an event subject")
    return subject[len(EVENT_PREFIX) :]


def mower_id_from_subject(subject: str) -> uuid.UUID:
    """Read the mower id from a command, result, telemetry or stop announcement subject."""
    for prefix in (RESULT_PREFIX, COMMAND_PREFIX, TELEMETRY_PREFIX, EMERGENCY_PREFIX):
        if subject.startswith(prefix):
            token = subject[len(prefix) :]
            try:
                return uuid.UUID(token)
            except ValueError:
                raise ContractError(f"subject {subject!r} does not end in a mower id") from None
    raise ContractError(f"subject {subject!r} names no mower")
