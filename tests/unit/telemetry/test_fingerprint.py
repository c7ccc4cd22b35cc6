"""The storage rules, as tables with fixed times."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest

from contracts.v1 import MowerState
from mowdeck.telemetry.fingerprint import Rules, decide, decide_all, state_fingerprint
from mowdeck.telemetry.model import Memory, TrackPoint
from tests.unit.telemetry.samples import ACCOUNT, OTHER_ACCOUNT, at, state

RULES = Rules(heartbeat=timedelta(seconds=300))
# One centimetre north is about 9e-8 degrees of latitude.
CM = 0.01 / 111_195


def remembered(seconds: float = 0, *, history: float | None = 0, **fields: object) -> Memory:
    """The memory left by ``state(seconds, **fields)`` with history written at ``history``."""
    base = state(seconds, **fields)  # type: ignore[arg-type]
    assert base.position is not None
    return Memory(
        account_id=ACCOUNT,
        observed_at=base.observed_at,
        history_at=None if history is None else at(history),
        state_fp=state_fingerprint(base),
        track=TrackPoint(base.position.lat, base.position.lon, base.rtk_fix),
    )


CASES = [
    # (memory, new state, latest, history, position, drop)
    (None, state(0), True, True, True, None),
    (None, state(0, lat=None), True, True, False, None),
    (remembered(0), state(10), True, False, False, None),
    (remembered(0), state(299), True, False, False, None),
    (remembered(0), state(300), True, True, False, None),
    (remembered(0, history=None), state(10), True, True, False, None),
    (remembered(0), state(10, battery=79), True, True, False, None),
    (remembered(0), state(10, activity="mowing"), True, True, False, None),
    (remembered(0), state(10, charging=True), True, True, False, None),
    (remembered(0), state(10, rtk_source="ntrip:b"), True, True, False, None),
    (remembered(0), state(10, connection="lte"), True, True, False, None),
    (remembered(0), state(10, blade_height_mm=40), True, True, False, None),
    (remembered(0), state(10, speed_mps=0.5), True, True, False, None),
    (remembered(0), state(10, error_code="E1"), True, True, False, None),
    (remembered(0), state(10, rtk_fix="float"), True, True, True, None),
    (remembered(0), state(10, lat=52.5 + 2 * CM), True, False, True, None),
    (remembered(0), state(10, lat=52.5 + 0.5 * CM), True, False, False, None),
    (remembered(0), state(10, lat=None), True, False, False, None),
    (remembered(0), state(10, raw={"fw": "2"}), True, False, False, None),
    (remembered(100), state(100), False, False, False, "duplicate"),
    (remembered(100), state(50), False, False, False, None),
    (remembered(100), state(50, battery=10), False, True, False, None),
    (remembered(100), state(50, lat=52.6), False, False, True, None),
    (
        remembered(0),
        state(10, account_id=OTHER_ACCOUNT),
        False,
        False,
        False,
        "account-mismatch-stored",
    ),
]
IDS = [
    "first-state-writes-everything",
    "first-state-without-position",
    "unchanged-heartbeat-skipped",
    "unchanged-just-under-interval",
    "unchanged-at-interval-written",
    "no-history-yet-written",
    "battery-changed",
    "activity-changed",
    "charging-changed",
    "rtk-source-changed",
    "connection-changed",
    "blade-height-changed",
    "speed-changed",
    "error-code-changed",
    "rtk-fix-changed-moves-track",
    "moved-two-centimetres",
    "moved-half-a-centimetre",
    "no-position-keeps-track",
    "raw-is-not-significant",
    "redelivery-is-a-no-op",
    "older-unchanged-writes-nothing",
    "older-changed-writes-history-only",
    "older-moved-writes-track-only",
    "foreign-account-dropped",
]


@pytest.mark.parametrize(("memory", "new", "latest", "history", "position", "drop"), CASES, ids=IDS)
def test_rules(  # noqa: PLR0917 - one parameter per column of the table
    memory: Memory | None,
    new: MowerState,
    latest: bool,
    history: bool,
    position: bool,
    drop: str | None,
) -> None:
    decision, _ = decide(memory, new, RULES)
    assert (decision.latest, decision.history, decision.position, decision.drop) == (
        latest,
        history,
        position,
        drop,
    )


def test_memory_follows_what_was_written() -> None:
    _, memory = decide(remembered(0), state(10, lat=52.6), RULES)
    assert memory is not None
    assert memory.observed_at == at(10)
    assert memory.history_at == at(0)  # unchanged fields: no history row
    assert memory.track == TrackPoint(52.6, 13.4, "fixed")


def test_older_unchanged_state_leaves_memory_alone() -> None:
    before = remembered(100, history=0)
    decision, after = decide(before, state(50, lat=52.7), RULES)
    assert not decision.reassert
    assert after == before


def test_older_changed_state_has_the_latest_state_written_after_it() -> None:
    # Its history row would otherwise be the history's last word: the mower "back" at an
    # older value it no longer reports. The latest state is written again after it, and
    # the memory says so (its history row is now at the latest state's time).
    before = remembered(100, history=0)
    decision, after = decide(before, state(50, battery=1, lat=52.7), RULES)
    assert (decision.history, decision.reassert) == (True, True)
    assert after == msgspec.structs.replace(before, history_at=at(100))


def test_a_newer_state_after_an_older_one_in_one_batch_is_the_one_reasserted() -> None:
    states = [state(50, battery=1), state(110)]
    decisions, memory = decide_all(remembered(100, history=0), states, RULES)
    assert [(d.latest, d.history, d.reassert) for d in decisions] == [
        (False, True, True),
        (True, False, False),
    ]
    assert memory is not None
    assert (memory.observed_at, memory.history_at) == (at(110), at(110))


def test_idle_mower_writes_one_history_row_per_interval() -> None:
    states = [state(10 * i) for i in range(8640)]  # a day of 10 s heartbeats
    decisions, _ = decide_all(None, states, RULES)
    assert sum(d.history for d in decisions) == 288
    assert sum(d.latest for d in decisions) == 8640
    assert sum(d.position for d in decisions) == 1


def test_fingerprint_is_stable_and_ignores_position_and_raw() -> None:
    assert state_fingerprint(state(0)) == state_fingerprint(state(5, lat=1.0, raw={"x": 1}))
    assert state_fingerprint(state(0)) != state_fingerprint(state(0, battery=81))
    assert 0 <= state_fingerprint(state(0)) < 2**63


def test_the_fingerprint_memo_belongs_to_the_rules_and_answers_what_the_digest_would() -> None:
    rules, other = Rules(), Rules()
    decide_all(None, [state(0), state(10, battery=79)], rules)
    assert len(rules.digests) == 2
    assert other.digests == {}  # two services in one process share nothing
    assert rules == other  # the memo is no parameter of the rules
    for encoded, fp in rules.digests.items():
        assert fp in {state_fingerprint(state(0)), state_fingerprint(state(10, battery=79))}
        assert encoded
