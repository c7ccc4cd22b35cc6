"""``MowerWatch``: what the rules remember about one mower between its states.

A watch is stored as JSON per mower (``notification_watches.watch``) and read back into
this struct. It evolves like the contracts do: a new field always has a default, so a
watch written by an older release still decodes, and fields a newer release added are
ignored by an older one. Nothing here decides anything; ``rules.py`` does.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

from contracts.v1 import Activity

__all__ = [
    "Anchor",
    "Escape",
    "Fault",
    "Fix",
    "Flight",
    "Job",
    "MowerWatch",
    "Offline",
    "OfflineCause",
    "decode_watch",
    "encode_watch",
]

OfflineCause = Literal["silence", "link", "state"]


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """A mowing job: from the first ``mowing`` until the mower is back at the dock."""

    started_at: datetime
    # Set while the job waits at the dock for a recharge: when the mower got there.
    recharging_since: datetime | None = None


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """The error the mower is in (activity ``error``), until it clears."""

    code: str
    since: datetime
    # Told, or not to be told (the mower was in this error when first seen).
    settled: bool = False


class Anchor(msgspec.Struct, frozen=True, kw_only=True):
    """Where a mowing mower stood since when: it has not moved the stuck distance since."""

    lat: float
    lon: float
    at: datetime
    # This standstill was told (a new anchor, after a move, may be told again).
    settled: bool = False


class Escape(msgspec.Struct, frozen=True, kw_only=True):
    """A mower outside its permitted ground since when (``rules/geofence.py``)."""

    since: datetime
    # Told (or, outside at the first state, not to be told): an alarm is open while set.
    settled: bool = False


class Fix(msgspec.Struct, frozen=True, kw_only=True):
    """The mower's last distinct position and when it was first reported there."""

    lat: float
    lon: float
    at: datetime


class Flight(msgspec.Struct, frozen=True, kw_only=True):
    """Where and when a mower not mowing began to move faster than a mower can."""

    lat: float
    lon: float
    at: datetime
    # Fast moves in a row so far: one alone may be a jump of the position fix.
    steps: int = 0
    settled: bool = False


class Offline(msgspec.Struct, frozen=True, kw_only=True):
    """An offline episode: what the user knows, or is about to be told, of it.

    ``ended_at`` set means contact is back but ``mower_online`` is still owed (the
    cooldown held it): the episode is kept so the online can name how long it lasted.
    Losing contact again meanwhile continues the same episode, which the user has been
    told about and not yet told the end of.
    """

    since: datetime
    cause: OfflineCause
    told: bool = False
    # Not to be told at all: the mower was offline when the service first saw it.
    quiet: bool = False
    ended_at: datetime | None = None


class MowerWatch(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the rules keep per mower. Times are UTC.

    ``observed_at`` is the watch's clock: the newest state applied (device time). A state
    not newer than it advances nothing. ``contact_at`` is the service's own clock when
    that state was applied; the silence timer counts from it, so a device clock that
    runs behind does not make its mower look silent.
    """

    mower_id: uuid.UUID
    account_id: uuid.UUID
    observed_at: datetime
    contact_at: datetime
    activity: Activity
    battery: int
    job: Job | None = None
    # Armed (a battery_low may fire) since this instant; None once it fired, until the
    # battery is back at the re-arm level. The instant keys the occurrence.
    battery_armed_at: datetime | None = None
    fault: Fault | None = None
    anchor: Anchor | None = None
    # The newest mower.connected/disconnected applied, and an unanswered disconnect.
    link_at: datetime | None = None
    disconnected_at: datetime | None = None
    offline: Offline | None = None
    # When each kind was last sent for this mower (the cooldown). Keys are kind names;
    # ``str`` rather than the Literal so a kind a newer release adds still decodes.
    last_sent: dict[str, datetime] = msgspec.field(default_factory=dict)
    # Occurrences the cooldown holds back, by kind: their dedupe keys, so each is reported
    # suppressed once however often it is found due again.
    held: dict[str, str] = msgspec.field(default_factory=dict)
    # The alarms this mower has open, by condition (``rules/alarms.py``): when each was
    # raised. A condition that no longer holds after a state is cleared.
    alarms: dict[str, datetime] = msgspec.field(default_factory=dict)
    # The geofence rules (``rules/geofence.py``): an escape from the site's areas, the
    # last distinct position, and a fast move while not mowing.
    escape: Escape | None = None
    fix: Fix | None = None
    flight: Flight | None = None


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(MowerWatch)


def encode_watch(watch: MowerWatch) -> bytes:
    """The watch as JSON."""
    return _encoder.encode(watch)


def decode_watch(data: bytes | str) -> MowerWatch:
    """A watch from its JSON."""
    return _decoder.decode(data)
