"""The chaos run's checker tells lost, doubled and late apart, as docs/reliability.md says."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.chaos.check import Findings, check_commands, check_notifications, check_states
from tests.chaos.driver import Driver, Induced, Issued

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MOWER = "00000000-0000-4000-8000-000000000001"


def _driver(*issued: Issued) -> Driver:
    d = Driver([], "", "", [MOWER], random.Random(1), 0.0)
    d.issued.extend(issued)
    return d


def _issued(cid: str, kind: str = "set_speed") -> Issued:
    return Issued(1.0, "0", MOWER, kind, 10, "load", http=202, command_id=cid)


def _status(status: str, source: str = "gateway") -> dict[str, Any]:
    return {"status": status, "source": source, "reason": None}


def test_one_final_lost_doubled_and_late_are_told_apart() -> None:
    trail = {
        "ok": {"statuses": [_status("accepted"), _status("executed")]},
        "lost": {"statuses": [_status("accepted")]},
        "two": {"statuses": [_status("executed"), _status("rejected")]},
        "late": {"statuses": [_status("failed", "fleet"), _status("executed")]},
    }
    f = Findings()
    check_commands(f, _driver(*(_issued(c) for c in trail)), trail, {}, [])
    assert (f.counts["one_final"], f.counts["lost"], f.counts["doubled"]) == (1, 1, 1)
    assert f.counts["late_results"] == 1
    assert any(line.startswith("doubled: two") for line in f.listed)


def test_an_emergency_stop_without_a_final_status_is_lost() -> None:
    trail = {"stop": {"statuses": [_status("accepted")]}}
    f = Findings()
    check_commands(f, _driver(_issued("stop", "emergency_stop")), trail, {}, [])
    assert f.counts["estops_lost"] == 1


def _state(at: datetime, activity: str) -> tuple[int, str, dict[str, Any]]:
    return (
        0,
        "telemetry.mower.x",
        {"mower_id": MOWER, "observed_at": at.isoformat(), "activity": activity},
    )


def test_a_change_recorded_with_a_later_state_is_late_and_one_never_recorded_is_lost() -> None:
    times = [T0 + timedelta(seconds=s) for s in range(5)]
    stream = [
        _state(times[0], "charging"),
        _state(times[1], "mowing"),  # the change: stored only with the next state
        _state(times[2], "mowing"),
        _state(times[3], "paused"),  # never stored
        _state(times[4], "mowing"),
    ]
    fp = {a: (a, None, None, None, None, None, None, None, None) for a in ("mowing", "paused")}
    history = {MOWER: [(times[2], fp["mowing"]), (times[4], fp["mowing"])]}
    f = Findings()
    check_states(f, stream, history)
    assert f.counts["significant_changes"] == 3
    assert f.counts["states_recorded_late"] == 1
    assert f.counts["states_lost"] == 1
    assert f.listed == [f"states_lost: mower {MOWER} observed {times[3].isoformat()}"]


def test_a_command_whose_answer_the_caller_lost_is_told_apart_the_same_way() -> None:
    # Fleet stored it, the caller never heard (a Fleet replica killed mid-answer).
    trail = {
        "late": {"statuses": [_status("failed", "fleet"), _status("executed")]},
        "two": {"statuses": [_status("executed"), _status("failed")]},
        "lost": {"statuses": [_status("accepted")]},
    }
    f = Findings()
    check_commands(f, _driver(), trail, {}, [])
    assert (f.counts["late_results"], f.counts["doubled"], f.counts["lost"]) == (1, 1, 1)


def _item(key: str, at: datetime) -> dict[str, Any]:
    return {"user_id": "u", "mower_id": MOWER, "kind": "mower_stuck", "occurred_at": at,
            "dedupe_key": key}  # fmt: skip


def _sent(key: str) -> dict[str, Any]:
    return {"user_id": "u", "dedupe_key": key, "state": "sent"}


def test_a_duplicate_is_one_occurrence_twice_and_another_occurrence_is_not() -> None:
    d = _driver()
    d.induced.append(Induced(1.0, MOWER, {"kind": "error"}, "mower_stuck", T0))
    later = T0 + timedelta(minutes=9)
    f = Findings()
    inbox = [_item("a", T0), _item("b", later)]
    check_notifications(f, d, "u", inbox, [_sent("a"), _sent("b")])
    assert (f.counts["duplicate_notifications"], f.counts["repeat_occurrences"]) == (0, 1)
    f = Findings()
    check_notifications(f, d, "u", [_item("a", T0)], [_sent("a"), _sent("a")])
    assert f.counts["duplicate_notifications"] == 1
    f = Findings()
    check_notifications(f, d, "u", [], [])
    assert f.counts["missing_notifications"] == 1
