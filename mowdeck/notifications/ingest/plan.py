"""What one watch transaction writes, from the watches it locked and what it handles.

These fold the rules over a batch, so the consumers only lock, plan and write:

```python
async with store.watches() as tx:
    watches = await tx.lock(mower_ids(states))
    plan = plan_states(watches, states, now, thresholds, consuming_since)
    await tx.write(plan.writes, plan.events, plan.alarms)
```
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from contracts.v1 import MowerState
from mowdeck.notifications.ingest.model import WatchWrite
from mowdeck.notifications.rules.evaluate import (
    Link,
    Thresholds,
    evaluate_link,
    evaluate_silence,
    evaluate_state,
    silence_due,
)
from mowdeck.notifications.rules.events import AlarmChange, Outcome, RuleEvent, Suppressed
from mowdeck.notifications.rules.geofence import Placement
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = [
    "LinkEvent",
    "Place",
    "Plan",
    "contact_only",
    "mower_ids",
    "plan_links",
    "plan_mower",
    "plan_silence",
    "plan_states",
]

_replace = msgspec.structs.replace

Place = Callable[[MowerState], Placement | None]
"""Where a state's position lies against its mower's site's areas (``Geofences.placement``):
the fact the geofence rules judge, found outside them."""


@dataclass(frozen=True, slots=True)
class LinkEvent:
    """A ``mower.connected`` or ``mower.disconnected`` with the time it occurred."""

    mower_id: uuid.UUID
    link: Link
    at: datetime


@dataclass(slots=True)
class Plan:
    """The watches to write, the events and alarm changes to store, what to count:
    suppressions, and states ignored by reason (``not_newer``, ``from_the_future``)."""

    writes: list[WatchWrite] = field(default_factory=list)
    events: list[RuleEvent] = field(default_factory=list)
    suppressed: list[Suppressed] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)
    alarms: list[AlarmChange] = field(default_factory=list)

    def _take(self, outcome: Outcome[MowerWatch] | Outcome[MowerWatch | None]) -> None:
        self.events.extend(outcome.events)
        self.suppressed.extend(outcome.suppressed)
        if outcome.alarms:
            self.alarms.extend(outcome.alarms)
        if outcome.ignored is not None:
            self.ignored[outcome.ignored] = self.ignored.get(outcome.ignored, 0) + 1


def mower_ids(items: Iterable[MowerState | LinkEvent]) -> list[uuid.UUID]:
    """The distinct mowers of a batch, in lock order."""
    return sorted({item.mower_id for item in items}, key=lambda m: m.int)


def plan_states(
    watches: Mapping[uuid.UUID, MowerWatch],
    states: Sequence[MowerState],
    now: datetime,
    thresholds: Thresholds,
    consuming_since: datetime | None = None,
    *,
    place: Place | None = None,
) -> Plan:
    """The rules over a batch of states, each mower's in arrival order.

    Only watches the states changed are written (a batch of stale heartbeats writes
    nothing); ``now`` is when the batch is handled.
    """
    plan = Plan()
    current: dict[uuid.UUID, MowerWatch | None] = {}
    for state in states:
        mower_id = state.mower_id
        watch = current[mower_id] if mower_id in current else watches.get(mower_id)
        placement = None if place is None else place(state)
        outcome = evaluate_state(watch, state, now, thresholds, placement)
        plan._take(outcome)
        current[mower_id] = outcome.watch
    for mower_id, watch in current.items():
        if watch is not None and watch is not watches.get(mower_id):
            plan.writes.append(WatchWrite(watch, silence_due(watch, thresholds, consuming_since)))
    return plan


def plan_mower(
    base: MowerWatch | None,
    states: Sequence[MowerState],
    now: datetime,
    thresholds: Thresholds,
    consuming_since: datetime | None = None,
    *,
    place: Place | None = None,
) -> Plan:
    """``plan_states`` for the states of one mower, whose watch is ``base``.

    The same plan, without a dict lookup by mower per state: the watch actors run it for
    every state (a ``uuid.UUID``'s hash is a Python call).
    """
    plan = Plan()
    watch = base
    for state in states:
        placement = None if place is None else place(state)
        outcome = evaluate_state(watch, state, now, thresholds, placement)
        plan._take(outcome)
        watch = outcome.watch
    if watch is not None and watch is not base:
        plan.writes.append(WatchWrite(watch, silence_due(watch, thresholds, consuming_since)))
    return plan


def plan_links(
    watches: Mapping[uuid.UUID, MowerWatch],
    links: Sequence[LinkEvent],
    thresholds: Thresholds,
    consuming_since: datetime | None = None,
) -> Plan:
    """Link events in arrival order; a mower without a watch has nothing to remember yet."""
    plan = Plan()
    current = dict(watches)
    for link in links:
        watch = current.get(link.mower_id)
        if watch is None:
            continue
        outcome = evaluate_link(watch, link.link, link.at)
        plan._take(outcome)
        current[link.mower_id] = outcome.watch
    for mower_id, watch in current.items():
        if watch is not watches.get(mower_id):
            plan.writes.append(WatchWrite(watch, silence_due(watch, thresholds, consuming_since)))
    return plan


def plan_silence(
    claimed: Sequence[MowerWatch],
    now: datetime,
    consuming_since: datetime,
    thresholds: Thresholds,
) -> Plan:
    """The offline timer over the watches a scan claimed.

    Every claimed watch is written back, changed or not: its stored due time was a lower
    bound, and the scan stores the exact one so it does not claim the watch again early.
    """
    plan = Plan()
    for watch in claimed:
        outcome = evaluate_silence(watch, now, consuming_since, thresholds)
        plan._take(outcome)
        due = silence_due(outcome.watch, thresholds, consuming_since)
        plan.writes.append(WatchWrite(outcome.watch, due, changed=outcome.watch is not watch))
    return plan


def contact_only(base: MowerWatch | None, plan: Plan) -> bool:
    """Whether ``plan`` (of one mower's states against ``base``) only moved the watch's
    contact: no event, nothing suppressed, and the written watch is ``base`` but for
    ``observed_at`` and ``contact_at``. Such a plan may be stored as a touch."""
    if base is None or plan.events or plan.suppressed or len(plan.writes) != 1:
        return False
    after = plan.writes[0].watch
    return after.observed_at >= base.observed_at and base == _replace(
        after, observed_at=base.observed_at, contact_at=base.contact_at
    )
