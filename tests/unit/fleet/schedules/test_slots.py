"""The pure slot logic: daylight-saving time, midnight, missed slots, holds, overlaps."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from mowdeck.fleet.errors import InvalidRequestError
from mowdeck.fleet.schedules.plan import (
    Due,
    Hold,
    Restriction,
    ScheduleState,
    decide_due,
    decide_park,
    first_due,
    next_start,
)
from mowdeck.fleet.schedules.rules import TaskSpec, tasks_of
from mowdeck.fleet.schedules.slots import Task, local_start, slots_from

BERLIN = ZoneInfo("Europe/Berlin")
EVERY_DAY = frozenset(range(7))


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("day", "at", "expected"),
    [
        ("2026-03-29", "02:30", "2026-03-29T01:00"),  # skipped hour: first valid minute, 03:00 CEST
        ("2026-03-29", "02:00", "2026-03-29T01:00"),
        ("2026-03-29", "03:00", "2026-03-29T01:00"),  # the same instant: the gap's end
        ("2026-03-29", "01:59", "2026-03-29T00:59"),
        ("2026-10-25", "02:30", "2026-10-25T00:30"),  # repeated hour: its first occurrence
        ("2026-10-25", "03:00", "2026-10-25T02:00"),
        ("2026-07-01", "08:30", "2026-07-01T06:30"),
        ("2026-01-01", "08:30", "2026-01-01T07:30"),
    ],
    ids=[
        "gap-0230",
        "gap-0200",
        "after-gap",
        "before-gap",
        "fold-0230",
        "after-fold",
        "summer",
        "winter",
    ],
)
def test_local_start_across_daylight_saving(day: str, at: str, expected: str) -> None:
    start = local_start(datetime.fromisoformat(day).date(), time.fromisoformat(at), BERLIN)
    assert start == utc(expected)


def test_a_start_in_the_repeated_hour_runs_once() -> None:
    task = Task(time(2, 30), 20, EVERY_DAY)
    slots = list(slots_from([task], BERLIN, utc("2026-10-24T12:00"), days=3))
    on_the_day = [s for s in slots if s.start.astimezone(BERLIN).date().isoformat() == "2026-10-25"]
    assert [s.start for s in on_the_day] == [utc("2026-10-25T00:30")]


def test_a_slot_across_midnight_ends_the_next_day() -> None:
    task = Task(time(23, 30), 90, frozenset({0}))  # Monday 23:30 for 90 minutes
    due = first_due([task], BERLIN, utc("2026-07-06T20:00"))  # a Monday
    assert due is not None
    assert (due.slot.start, due.slot.end) == (utc("2026-07-06T21:30"), utc("2026-07-06T23:00"))


def _specs(*tasks: tuple[str, int, list[str]]) -> list[TaskSpec]:
    return [TaskSpec(start=s, duration_minutes=d, days=days) for s, d, days in tasks]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tasks", "field"),
    [
        (_specs(("08:00", 60, ["mon"]), ("08:30", 60, ["mon"])), "tasks.1"),
        (_specs(("23:00", 120, ["mon"]), ("00:30", 30, ["tue"])), "tasks.1"),  # across midnight
        (_specs(("23:00", 120, ["sun"]), ("00:30", 30, ["mon"])), "tasks.1"),  # across the week
        (_specs(("08:00", 60, ["mon"]), ("09:00", 60, ["mon"]), ("08:59", 2, ["tue"])), None),
        (_specs(("08:00", 60, ["mon", "mon"])), "tasks.0.days"),
    ],
    ids=["same-day", "midnight", "sunday-monday", "touching", "repeated-day"],
)
def test_overlapping_tasks_are_refused_naming_both(
    tasks: list[TaskSpec], field: str | None
) -> None:
    if field is None:
        assert len(tasks_of(tasks)) == len(tasks)
        return
    with pytest.raises(InvalidRequestError) as caught:
        tasks_of(tasks)
    assert caught.value.field == field
    if field == "tasks.1":
        assert "`tasks[0]` and `tasks[1]`" in caught.value.detail


def _state(task: Task, due: Due | None, **changes: object) -> ScheduleState:
    values: dict[str, object] = {
        "mower_id": uuid.uuid4(),
        "account_id": uuid.uuid4(),
        "enabled": True,
        "tasks": [task],
        "zone": BERLIN,
        "due": due,
    }
    values.update(changes)
    return ScheduleState(**values)  # type: ignore[arg-type]


DAILY_8 = Task(time(8, 0), 90, EVERY_DAY, "front")
SLOT_NOW = first_due([DAILY_8], BERLIN, utc("2026-07-01T05:00"))
assert SLOT_NOW is not None
START = SLOT_NOW.slot.start  # 06:00 UTC
RAIN = Restriction(uuid.uuid4(), uuid.uuid4(), "rain", START + timedelta(hours=3), START, "user:a")


@pytest.mark.parametrize(
    ("now", "changes", "state", "order", "minutes", "next_kind"),
    [
        (START, {}, "started", "start_mow", 90, "end"),
        (START + timedelta(seconds=2), {}, "started", "start_mow", 90, "end"),
        (START + timedelta(minutes=60), {}, "started", "start_mow", 30, "end"),  # missed: late
        (START + timedelta(minutes=81), {}, "skipped", None, None, "start"),  # < 10 min left
        (START + timedelta(days=3), {}, "skipped", None, None, "start"),  # long outage
        (START, {"restriction": RAIN}, "held", None, None, "start"),
        (START, {"hold": Hold("park_until_further_notice")}, "held", None, None, "start"),
        (
            START,
            {"hold": Hold("park_until_next_schedule", START + timedelta(days=1))},
            "held",
            None,
            None,
            "start",
        ),
        (
            START,
            {"hold": Hold("park_until_next_schedule", START)},
            "started",
            "start_mow",
            90,
            "end",
        ),
        (START, {"decided": "started"}, None, None, None, "end"),  # never a second start
        (START, {"decided": "held"}, None, None, None, "start"),
    ],
    ids=[
        "on-time",
        "seconds-late",
        "missed-late-start",
        "missed-skipped",
        "outage",
        "restricted",
        "parked-further",
        "parked-next",
        "park-ended",
        "decided-started",
        "decided-held",
    ],
)
def test_a_due_start(  # noqa: PLR0917 - one per column of the table
    now: datetime,
    changes: dict[str, object],
    state: str | None,
    order: str | None,
    minutes: int | None,
    next_kind: str,
) -> None:
    decision = decide_due(_state(DAILY_8, SLOT_NOW, **changes), now)
    assert (decision.slot.state if decision.slot else None) == state
    assert (decision.order.kind if decision.order else None) == order
    if decision.order is not None:
        assert (decision.order.duration_min, decision.order.work_area) == (minutes, "front")
    assert decision.due is not None
    assert decision.due.kind == next_kind
    assert decision.due.at > START or decision.due.kind == "end"


def test_the_end_docks_and_moves_to_the_next_slot() -> None:
    assert SLOT_NOW is not None
    decision = decide_due(_state(DAILY_8, Due("end", SLOT_NOW.slot)), SLOT_NOW.slot.end)
    assert decision.order is not None and decision.order.kind == "return_to_dock"
    assert decision.due == Due(
        "start",
        SLOT_NOW.slot.__class__(
            START + timedelta(days=1), START + timedelta(days=1, minutes=90), 0, "front"
        ),
    )


def test_a_park_in_a_slot_docks_and_holds_until_the_next_start() -> None:
    assert SLOT_NOW is not None
    state = _state(DAILY_8, Due("end", SLOT_NOW.slot))
    decision = decide_park(state, "park_until_next_schedule", START + timedelta(minutes=5))
    assert decision.order is not None and decision.order.kind == "return_to_dock"
    assert decision.slot is not None and decision.slot.state == "parked"
    assert decision.hold == Hold("park_until_next_schedule", START + timedelta(days=1))


def test_next_start_skips_what_a_restriction_holds_back() -> None:
    long_rain = Restriction(
        uuid.uuid4(), uuid.uuid4(), "frost", START + timedelta(days=1, hours=1), START, "u"
    )
    state = _state(DAILY_8, SLOT_NOW, restriction=long_rain)
    assert next_start(state, START - timedelta(hours=1)) == START + timedelta(days=2)
    assert next_start(_state(DAILY_8, SLOT_NOW), START - timedelta(hours=1)) == START
    parked = _state(DAILY_8, SLOT_NOW, hold=Hold("park_until_further_notice"))
    assert next_start(parked, START) is None
