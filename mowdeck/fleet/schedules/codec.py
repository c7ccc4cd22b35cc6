"""Rows of the schedule tables to and from the pure model (shared by the adapters)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

import msgspec

from mowdeck.fleet.schedules.plan import Decision, Due, Hold, Restriction, ScheduleState
from mowdeck.fleet.schedules.ports import Issued, StoredSchedule
from mowdeck.fleet.schedules.rules import TaskSpec, spec_of, tasks_of
from mowdeck.fleet.schedules.slots import Slot, Task

__all__ = ["TaskTexts", "row_state", "slot_columns", "stored_of", "tasks_text"]

_decode_specs = msgspec.json.Decoder(list[TaskSpec])
_START_STATES = frozenset({"started", "held", "skipped"})


def tasks_text(tasks: list[Task]) -> str:
    """Tasks as stored (the API's own shape)."""
    return msgspec.json.encode([spec_of(t) for t in tasks]).decode()


class TaskTexts:
    """Stored tasks by their text: many mowers share a schedule, decoded and checked once
    per distinct text (an adapter's own cache, bounded)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._known: dict[str, tuple[Task, ...]] = {}

    def __call__(self, text: str) -> list[Task]:
        """The tasks of ``text``."""
        found = self._known.get(text)
        if found is None:
            if len(self._known) >= self._size:
                self._known.clear()
            found = self._known[text] = tuple(tasks_of(_decode_specs.decode(text)))
        return list(found)


def stored_of(row: Mapping[str, Any], tasks: TaskTexts) -> StoredSchedule:
    """A schedule as set, from its row."""
    return StoredSchedule(
        row["mower_id"],
        row["account_id"],
        row["enabled"],
        tasks(row["tasks"]),
        row["timezone"],
        row["updated_at"],
    )


def row_state(row: Mapping[str, Any], tasks: TaskTexts) -> ScheduleState:
    """A schedule's state from the scheduler's query."""
    due = None
    if row["due_kind"] is not None:
        slot = Slot(row["slot_start"], row["slot_end"], row["slot_task"], row["slot_area"])
        due = Due(row["due_kind"], slot)
    hold = Hold(row["hold"], row["hold_until"]) if row["hold"] is not None else None
    restriction = None
    if row["restriction_id"] is not None:
        restriction = Restriction(
            row["restriction_id"],
            row["site_id"],
            row["reason"],
            row["until"],
            row["created_at"],
            row["created_by"],
        )
    return ScheduleState(
        row["mower_id"],
        row["account_id"],
        row["enabled"],
        tasks(row["tasks"]),
        ZoneInfo(row["tz"]),
        due,
        hold,
        restriction,
        row["decided"],
    )


Columns = list[list[Any]]


def slot_columns(
    decisions: Sequence[tuple[ScheduleState, Decision, Issued | None]],
) -> tuple[Columns, Columns, Columns]:
    """The decided slots' columns (starts, the rest) and the next dues' columns."""
    starts: Columns = [[] for _ in range(7)]
    ends: Columns = [[] for _ in range(7)]
    nexts: Columns = [[] for _ in range(9)]
    for state, decision, issued in decisions:
        command_id: uuid.UUID | None = issued.record.command_id if issued else None
        slot = decision.slot
        if slot is not None:
            target = starts if slot.state in _START_STATES else ends
            for column, value in zip(
                target,
                (state.mower_id, slot.start, slot.end, slot.task, slot.state, slot.reason),
                strict=False,
            ):
                column.append(value)
            target[6].append(command_id if slot.state in ("started", *_ENDING) else None)
        due, hold = decision.due, decision.hold
        values: tuple[Any, ...] = (
            state.mower_id,
            due.at if due else None,
            due.kind if due else None,
            due.slot.start if due else None,
            due.slot.end if due else None,
            due.slot.task if due else None,
            due.slot.work_area if due else None,
            hold.kind if hold else None,
            hold.until if hold else None,
        )
        for column, value in zip(nexts, values, strict=True):
            column.append(value)
    return starts, ends, nexts


_ENDING = ("ended", "parked", "interrupted")
