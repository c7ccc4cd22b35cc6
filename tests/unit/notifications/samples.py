"""States, times, clocks and a step runner shared by the notifications tests."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from contracts.v1 import MowerState, Position
from mowdeck.authn import AuthSettings
from mowdeck.notifications.rules.evaluate import (
    Link,
    Thresholds,
    evaluate_link,
    evaluate_silence,
    evaluate_state,
)
from mowdeck.notifications.rules.events import AlarmChange, RuleEvent, Suppressed
from mowdeck.notifications.rules.watch import MowerWatch

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000000a")
OTHER_ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000000b")
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000001")
OTHER_MOWER = uuid.UUID("00000000-0000-4000-8000-000000000002")
THRESHOLDS = Thresholds()
AUTH = AuthSettings(jwt_secret="notifications-tests-secret-0123456789abcdef")
# One metre north is about 9e-6 degrees of latitude.
METRE = 1.0 / 111_195


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


class Clock:
    """The service's clock, set (``now``) and moved (``advance``) by the test."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += timedelta(seconds=seconds)


class EpochClock:
    """``time.time`` as the test sets it (``now``, seconds since the epoch)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def state(
    seconds: float = 0,
    *,
    mower_id: uuid.UUID = MOWER,
    account_id: uuid.UUID = ACCOUNT,
    lat: float | None = 52.5,
    lon: float = 13.4,
    **fields: Any,
) -> MowerState:
    """An idle state at ``T0 + seconds`` with overrides."""
    values: dict[str, Any] = {"activity": "idle", "battery": 80, "charging": False}
    values.update(fields)
    return MowerState(
        mower_id=mower_id,
        account_id=account_id,
        observed_at=at(seconds),
        position=None if lat is None else Position(lat=lat, lon=lon),
        **values,
    )


def first_watch(seconds: float = 0, *, now: float | None = None, **fields: Any) -> MowerWatch:
    """The watch the first state ``state(seconds, **fields)`` starts, handled at ``now``."""
    handled = at(seconds if now is None else now)
    watch = evaluate_state(None, state(seconds, **fields), handled, THRESHOLDS).watch
    assert watch is not None
    return watch


@dataclass(frozen=True)
class Step:
    """One input of a script: a state, a link event or a run of the silence timer."""

    kind: str
    seconds: float
    now: float
    fields: dict[str, Any] = field(default_factory=dict)
    link: Link = "connected"
    since: float = -3600.0


def S(seconds: float, *, now: float | None = None, **fields: Any) -> Step:
    """A state observed at ``seconds``, handled at ``now`` (default: the same instant)."""
    return Step("state", seconds, seconds if now is None else now, fields)


def L(seconds: float, link: Link) -> Step:
    """A link event that occurred at ``seconds``."""
    return Step("link", seconds, seconds, link=link)


def Q(now: float, *, since: float = -3600.0) -> Step:
    """The silence timer at ``now``, the service consuming since ``since``."""
    return Step("silence", now, now, since=since)


@dataclass
class Trace:
    """What a script produced."""

    watch: MowerWatch | None = None
    events: list[RuleEvent] = field(default_factory=list)
    suppressed: list[Suppressed] = field(default_factory=list)
    alarm_changes: list[AlarmChange] = field(default_factory=list)

    @property
    def alarms(self) -> list[str]:
        """``change:condition@seconds`` of every alarm change."""
        return [f"{a.change}:{a.condition}@{_secs(a.at)}" for a in self.alarm_changes]

    @property
    def sent(self) -> list[str]:
        """``message_key@seconds`` of every event."""
        return [f"{e.message_key}@{_secs(e.occurred_at)}" for e in self.events]

    @property
    def held(self) -> list[str]:
        """``kind:reason@seconds`` of every suppression."""
        return [f"{s.kind}:{s.reason}@{_secs(s.at)}" for s in self.suppressed]


def _secs(when: datetime) -> str:
    return f"{(when - T0).total_seconds():g}"


def run(
    steps: Sequence[Step], thresholds: Thresholds = THRESHOLDS, watch: MowerWatch | None = None
) -> Trace:
    """Feed ``steps`` to the rules in order, starting from ``watch``."""
    trace = Trace(watch)
    for step in steps:
        if step.kind == "state":
            fields = dict(step.fields)
            placement = fields.pop("placement", None)  # the geofence fact, if the step has one
            outcome = evaluate_state(
                trace.watch, state(step.seconds, **fields), at(step.now), thresholds, placement
            )
        elif step.kind == "link":
            assert trace.watch is not None
            outcome = evaluate_link(trace.watch, step.link, at(step.seconds))
        else:
            assert trace.watch is not None
            outcome = evaluate_silence(trace.watch, at(step.now), at(step.since), thresholds)
        trace.watch = outcome.watch
        trace.events.extend(outcome.events)
        trace.suppressed.extend(outcome.suppressed)
        trace.alarm_changes.extend(outcome.alarms)
    return trace
