"""Alarms: a condition of a mower that holds until it ends, decided from the watch.

A rule that fires (``mower_stuck``, ``battery_low``, ``mower_offline``) raises an alarm for
its condition: an error code (``error:<code>``), a standstill while mowing
(``standstill``), a low battery (``battery_low``), silence (``mower_offline``), a mower
outside its site's areas (``left_area``) or carried away (``theft_suspected``). The
watch keeps the conditions it has raised (``MowerWatch.alarms``); a condition that no
longer holds in the watch after a state clears its alarm: the error clears or changes,
the mower moves or stops mowing, the battery re-arms, contact is back, the mower is back
inside its areas, or back at its dock or mowing after a theft. A rule firing for a
condition already raised (a later occurrence the cooldown let through) updates the alarm
instead of opening another.

An alarm is a told condition that has not ended: it opens with the notification that
tells it (an occurrence the cooldown holds back opens it when it is sent), so the
watch's own marks of what was told (``Fault.settled``, ``Anchor.settled``, a battery
not re-armed, an offline episode not ended) are what keeps it open. Nothing here does
I/O; ``alarm_changes`` runs in the watch actor with every evaluation (it is
called by ``Emitter.outcome``) and is free when a mower has no alarm and fired nothing.

A mower first seen in a condition (its first state shows an error, a low battery while
not charging, ``offline``, or a place outside its areas) tells nobody, since that is old
news (``first_state``), but its alarm opens all the same (``first_sight``): an operator
looking at the alarms sees every mower that needs attention, whether the service saw the
condition begin or not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from mowdeck.notifications.rules.events import AlarmChange, AlarmChangeKind, RuleEvent
from mowdeck.notifications.rules.kinds import SEVERITY, Kind
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["ALARM_KINDS", "alarm_changes", "condition_holds", "first_sight"]

ALARM_KINDS: frozenset[Kind] = frozenset(
    {"mower_stuck", "battery_low", "mower_offline", "left_area", "theft_suspected"}
)
"""The kinds whose firing raises an alarm (the others tell of something that happened)."""


def _condition(kind: Kind, key: str, watch: MowerWatch) -> str:
    """The condition a firing of ``kind`` (its dedupe key ``key``) is about."""
    if kind == "mower_stuck":
        fault = watch.fault
        if ":error:" in key and fault is not None:
            return f"error:{fault.code}"
        return "standstill"
    return kind


def condition_holds(condition: str, watch: MowerWatch) -> bool:
    """Whether ``condition`` still holds in ``watch``."""
    if condition.startswith("error:"):
        return watch.fault is not None and f"error:{watch.fault.code}" == condition
    holds = _HOLDS.get(condition)
    # A condition an older release raised and this one does not know holds no longer.
    return holds is not None and holds(watch)


_HOLDS: dict[str, Callable[[MowerWatch], bool]] = {
    "standstill": lambda w: w.anchor is not None and w.anchor.settled,
    "battery_low": lambda w: w.battery_armed_at is None,
    "mower_offline": lambda w: w.offline is not None and w.offline.ended_at is None,
    "left_area": lambda w: w.escape is not None and w.escape.settled,
    "theft_suspected": lambda w: w.flight is not None and w.flight.settled,
}


def alarm_changes(
    before: MowerWatch,
    after: MowerWatch,
    events: Sequence[RuleEvent],
    at: datetime,
) -> tuple[dict[str, datetime], list[AlarmChange]]:
    """The conditions raised after this evaluation (condition → raised at) and the
    changes to store. ``before`` is the watch evaluated, ``after`` the watch it became."""
    raised = before.alarms
    if not raised and not events:
        return raised, []
    changes: list[AlarmChange] = []
    now_raised = dict(raised)
    for condition in raised:
        if not condition_holds(condition, after):
            del now_raised[condition]
            changes.append(_cleared(before, condition, at))
    for event in events:
        kind = event.kind
        if kind not in ALARM_KINDS:
            continue
        condition = _condition(kind, event.dedupe_key, after)
        if not condition_holds(condition, after):
            continue  # fired and ended in the same evaluation: nothing to keep open
        change: AlarmChangeKind = "updated" if condition in now_raised else "raised"
        now_raised.setdefault(condition, at)
        changes.append(_change(change, after, condition, at, params=event.params))
    if not changes:
        return raised, changes
    return now_raised, changes


_ON_THE_WAY = frozenset({"leaving", "returning"})


def first_sight(
    watch: MowerWatch, at: datetime, *, battery_low: bool, previous: MowerWatch | None = None
) -> tuple[dict[str, datetime], list[AlarmChange]]:
    """The alarms of a mower's first state: the conditions it shows, raised untold.

    ``battery_low`` is the rule's own judgement of the state (low and not charging).
    ``previous`` is the watch a move to another account replaces: its alarms clear.
    """
    changes: list[AlarmChange] = []
    if previous is not None:
        changes.extend(_cleared(previous, condition, at) for condition in previous.alarms)
    conditions: list[str] = []
    if watch.fault is not None:
        conditions.append(f"error:{watch.fault.code}")
    if battery_low:
        conditions.append("battery_low")
    if watch.offline is not None:
        conditions.append("mower_offline")
    if watch.escape is not None and watch.activity not in _ON_THE_WAY:
        # Leaving or returning, a mower crosses what lies between its station and its
        # areas: outside for a moment is no condition to open an alarm for.
        conditions.append("left_area")
    changes.extend(_change("raised", watch, condition, at) for condition in conditions)
    return dict.fromkeys(conditions, at), changes


def _change(
    change: AlarmChangeKind, watch: MowerWatch, condition: str, at: datetime, **extra: Any
) -> AlarmChange:
    kind = _kind_of(condition)
    return AlarmChange(
        change=change,
        mower_id=watch.mower_id,
        account_id=watch.account_id,
        condition=condition,
        kind=kind,
        severity=SEVERITY[kind],
        at=at,
        code=_code_of(condition),
        **extra,
    )


def _cleared(watch: MowerWatch, condition: str, at: datetime) -> AlarmChange:
    return _change("cleared", watch, condition, at, raised_at=watch.alarms[condition])


def _code_of(condition: str) -> str | None:
    return condition.removeprefix("error:") if condition.startswith("error:") else None


def _kind_of(condition: str) -> Kind:
    if condition.startswith("error:") or condition == "standstill":
        return "mower_stuck"
    if condition in ("battery_low", "left_area", "theft_suspected"):
        return condition  # type: ignore[return-value]  # these conditions are their kinds
    return "mower_offline"
