"""Alarms as the watch decides them: raised when a rule tells a condition, updated by a
later telling of it, cleared when it ends. Scripts of states, link events and silence."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from mowdeck.notifications.rules.evaluate import Thresholds
from tests.unit.notifications.samples import METRE, L, Q, S, Step, at, run

THRESHOLDS = Thresholds()


def mow(seconds: float, **fields: Any) -> Step:
    """A mowing state, a metre further north every second (never a standstill)."""
    return S(seconds, activity="mowing", lat=52.5 + seconds * METRE, **fields)


def still(seconds: float, **fields: Any) -> Step:
    """A mowing state on the same spot."""
    return S(seconds, activity="mowing", **fields)


def error(seconds: float, code: str) -> Step:
    """A state in error ``code``."""
    return S(seconds, activity="error", error_code=code)


CASES: list[tuple[str, list[Step], list[str]]] = [
    ("nothing-wrong-opens-nothing", [mow(0), mow(10), S(20)], []),
    # Errors: one alarm per code, open while the mower stays in it.
    (
        "an-error-raises-and-its-end-clears",
        [mow(0), error(100, "E1"), error(110, "E1"), S(150)],
        ["raised:error:E1@100", "cleared:error:E1@150"],
    ),
    (
        "a-new-code-clears-the-old-alarm-and-opens-another-when-told",
        [mow(0), error(100, "E1"), error(200, "E2"), error(400, "E2"), S(450)],
        [
            "raised:error:E1@100",
            "cleared:error:E1@200",
            "raised:error:E2@400",
            "cleared:error:E2@450",
        ],
    ),
    (
        "an-error-held-by-the-cooldown-and-gone-opens-nothing",
        [mow(0), error(100, "E1"), S(150), error(200, "E1"), S(250), S(500)],
        ["raised:error:E1@100", "cleared:error:E1@150"],
    ),
    # A mower first seen in a condition: told to nobody (old news), its alarm opens.
    (
        "the-first-state-in-error-opens-its-alarm-untold",
        [error(0, "E1"), error(10, "E1"), S(20)],
        ["raised:error:E1@0", "cleared:error:E1@20"],
    ),
    (
        "the-first-state-on-a-low-battery-opens-its-alarm",
        [S(0, battery=10), S(10, battery=12), S(20, battery=30)],
        ["raised:battery_low@0", "cleared:battery_low@20"],
    ),
    (
        "the-first-state-charging-on-a-low-battery-opens-nothing",
        [S(0, battery=10, activity="charging", charging=True), S(10, battery=40)],
        [],
    ),
    (
        "the-first-state-offline-opens-its-alarm",
        [S(0, activity="offline"), S(10)],
        ["raised:mower_offline@0", "cleared:mower_offline@10"],
    ),
    # Standstill while mowing.
    (
        "a-standstill-raises-and-a-move-clears",
        [still(0), still(300), still(400), still(500, lat=52.5 + 2 * METRE)],
        ["raised:standstill@300", "cleared:standstill@500"],
    ),
    (
        "a-standstill-clears-when-mowing-stops",
        [still(0), still(300), S(350, activity="docked")],
        ["raised:standstill@300", "cleared:standstill@350"],
    ),
    # The battery: open until re-armed, not when it merely rises a little.
    (
        "a-low-battery-clears-at-the-re-arm-level",
        [S(0, battery=25), S(10, battery=19), S(20, battery=25), S(30, battery=30)],
        ["raised:battery_low@10", "cleared:battery_low@30"],
    ),
    # Offline: from silence, from the link, from an offline state; contact clears it.
    (
        "silence-raises-and-a-state-clears",
        [S(0), Q(120), S(200)],
        ["raised:mower_offline@120", "cleared:mower_offline@200"],
    ),
    (
        "a-lost-link-raises-after-the-grace",
        [S(0), L(10, "disconnected"), Q(40), S(60)],
        ["raised:mower_offline@40", "cleared:mower_offline@60"],
    ),
    (
        "a-link-back-alone-does-not-clear",  # only a newer state is contact
        [S(0), L(10, "disconnected"), Q(40), L(50, "connected")],
        ["raised:mower_offline@40"],
    ),
    (
        "an-offline-state-raises",
        [S(0), S(10, activity="offline"), S(20)],
        ["raised:mower_offline@10", "cleared:mower_offline@20"],
    ),
    # Several conditions at once are several alarms.
    (
        "an-error-on-a-low-battery-is-a-second-alarm",
        [
            S(0, battery=25),
            S(10, battery=19),
            S(20, activity="error", error_code="E7", battery=19),
            S(40, battery=35),
        ],
        [
            "raised:battery_low@10",
            "raised:error:E7@20",
            "cleared:battery_low@40",
            "cleared:error:E7@40",
        ],
    ),
]


@pytest.mark.parametrize(("steps", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_alarm_script(steps: list[Step], expected: list[str]) -> None:
    assert run(steps, THRESHOLDS).alarms == expected


def test_the_watch_keeps_what_is_open_and_when_it_was_raised() -> None:
    trace = run([mow(0), error(100, "E1"), S(110, battery=10)])
    assert trace.watch is not None
    assert set(trace.watch.alarms) == {"battery_low"}  # the error ended, the battery is low
    trace = run([mow(0), error(100, "E1"), error(130, "E1")])
    assert trace.watch is not None
    assert trace.watch.alarms == {"error:E1": trace.alarm_changes[0].at}


def test_a_change_carries_the_kind_severity_code_and_parameters() -> None:
    raised, cleared = run([mow(0), error(100, "E1"), S(150)]).alarm_changes
    assert (raised.kind, raised.severity, raised.code) == ("mower_stuck", "critical", "E1")
    assert raised.params == {"error_code": "E1"}
    assert (cleared.kind, cleared.code, cleared.params) == ("mower_stuck", "E1", {})
    low = run([S(0, battery=25), S(10, battery=19)]).alarm_changes[0]
    assert (low.kind, low.severity, low.params) == ("battery_low", "warning", {"battery": 19})


def test_a_condition_told_again_while_open_updates_its_alarm() -> None:
    # Each condition is told once until it ends, so the rules alone do not tell one twice;
    # a watch that holds the alarm open (stored by another release, say) is updated by
    # the next telling, and keeps the time it was raised.
    base = run([mow(0)]).watch
    assert base is not None
    watch = msgspec.structs.replace(base, alarms={"error:E1": at(50)})
    trace = run([error(100, "E1")], watch=watch)
    assert trace.alarms == ["updated:error:E1@100"]
    assert trace.watch is not None
    assert trace.watch.alarms == {"error:E1": at(50)}


def test_a_first_state_in_error_tells_nobody() -> None:
    trace = run([error(0, "E1"), error(10, "E1")])
    assert trace.events == []
    assert [c.change for c in trace.alarm_changes] == ["raised"]


def test_a_mower_moved_to_another_account_clears_the_old_account_s_alarms() -> None:
    other = uuid.uuid4()
    trace = run(
        [mow(0), error(100, "E1"), S(110, activity="error", error_code="E1", account_id=other)]
    )
    assert trace.alarms == ["raised:error:E1@100", "cleared:error:E1@110", "raised:error:E1@110"]
    cleared, raised = trace.alarm_changes[1:]
    assert cleared.account_id != other and raised.account_id == other
