"""Planning a watch transaction: the rules folded over a batch, and what is written back."""

from __future__ import annotations

import pytest

from mowdeck.notifications.ingest.plan import (
    LinkEvent,
    contact_only,
    mower_ids,
    plan_links,
    plan_mower,
    plan_silence,
    plan_states,
)
from mowdeck.notifications.rules.evaluate import evaluate_state, silence_due
from mowdeck.notifications.rules.watch import MowerWatch
from tests.unit.notifications.samples import MOWER, OTHER_MOWER, THRESHOLDS, at, first_watch, state


def test_mowers_come_in_lock_order_once() -> None:
    batch = [state(0, mower_id=OTHER_MOWER), state(1), state(2, mower_id=OTHER_MOWER)]
    assert mower_ids(batch) == [MOWER, OTHER_MOWER]


def test_a_batch_folds_each_mowers_states_in_arrival_order() -> None:
    batch = [
        state(0, battery=25),
        state(0, mower_id=OTHER_MOWER),
        state(10, battery=19),
        state(20, battery=18),
    ]
    plan = plan_states({}, batch, at(30), THRESHOLDS)
    assert [(e.kind, e.mower_id) for e in plan.events] == [("battery_low", MOWER)]
    assert {w.watch.mower_id: w.watch.observed_at for w in plan.writes} == {
        MOWER: at(20),
        OTHER_MOWER: at(0),
    }
    assert {w.silence_due_at for w in plan.writes} == {at(150)}


def test_a_batch_of_stale_states_writes_nothing() -> None:
    watch = first_watch(100)
    plan = plan_states({MOWER: watch}, [state(50), state(100), state(900)], at(200), THRESHOLDS)
    assert plan.writes == []
    assert plan.events == []
    assert plan.ignored == {"not_newer": 2, "from_the_future": 1}


@pytest.mark.parametrize(
    "base",
    [None, first_watch(0), first_watch(100)],
    ids=["no-watch", "watch-older", "watch-newer-than-some"],
)
def test_one_mowers_plan_is_the_batch_plan_of_its_states(base: MowerWatch | None) -> None:
    states = [state(10, battery=25), state(50), state(60, battery=18), state(900), state(120)]
    watches = {} if base is None else {MOWER: base}
    assert plan_mower(base, states, at(200), THRESHOLDS, at(5)) == plan_states(
        watches, states, at(200), THRESHOLDS, at(5)
    )


def test_an_unchanged_watch_is_written_nothing_of_it() -> None:
    plan = plan_mower(first_watch(100), [state(50)], at(200), THRESHOLDS)
    assert plan.writes == []


def test_evaluating_leaves_the_watchs_cooldown_memory_alone() -> None:
    # The rules share a watch's dicts with the next watch until they change them: a
    # change must go to a copy, never into the watch evaluated.
    base = evaluate_state(first_watch(0), state(10, battery=18), at(10), THRESHOLDS).watch
    assert base is not None
    assert base.last_sent == {"battery_low": at(10)}
    sent = dict(base.last_sent)
    after = evaluate_state(base, state(20, activity="mowing"), at(20), THRESHOLDS).watch
    assert after is not None
    assert "job_started" in after.last_sent
    assert base.last_sent == sent


def test_the_first_state_is_reported_suppressed() -> None:
    plan = plan_states({}, [state(0, activity="mowing")], at(0), THRESHOLDS)
    assert [(s.kind, s.reason) for s in plan.suppressed] == [("job_started", "first_state")]


def test_links_of_mowers_without_a_watch_are_skipped() -> None:
    watch = first_watch(0)
    links = [LinkEvent(MOWER, "disconnected", at(5)), LinkEvent(OTHER_MOWER, "connected", at(5))]
    plan = plan_links({MOWER: watch}, links, THRESHOLDS)
    [write] = plan.writes
    assert write.watch.disconnected_at == at(5)
    assert write.silence_due_at == at(35)


def test_the_scan_writes_back_every_claimed_watch_with_its_exact_due_time() -> None:
    quiet = first_watch(0, now=100)
    silent = first_watch(0, mower_id=OTHER_MOWER)
    plan = plan_silence([quiet, silent], at(150), at(-3600), THRESHOLDS)
    assert [e.mower_id for e in plan.events] == [OTHER_MOWER]
    assert [(w.watch.mower_id, w.silence_due_at) for w in plan.writes] == [
        (MOWER, at(220)),
        (OTHER_MOWER, None),
    ]
    assert plan.writes[0].watch is quiet


def test_the_scan_after_a_restart_postpones_instead_of_sending() -> None:
    watch = first_watch(0)
    plan = plan_silence([watch], at(1000), at(990), THRESHOLDS)
    assert plan.events == []
    assert plan.writes[0].silence_due_at == at(1110)
    assert silence_due(watch, THRESHOLDS) == at(120)


def test_a_heartbeat_only_moves_the_contact() -> None:
    watch = first_watch(0)
    heartbeat = plan_states({MOWER: watch}, [state(10)], at(10), THRESHOLDS)
    assert contact_only(watch, heartbeat)


def test_a_change_an_event_or_a_first_state_is_more_than_contact() -> None:
    watch = first_watch(0, battery=25)
    cases = {
        "battery moved": plan_states({MOWER: watch}, [state(10, battery=24)], at(10), THRESHOLDS),
        "battery_low": plan_states({MOWER: watch}, [state(10, battery=19)], at(10), THRESHOLDS),
        "job started": plan_states(
            {MOWER: watch}, [state(10, battery=25, activity="mowing")], at(10), THRESHOLDS
        ),
        "not newer": plan_states({MOWER: watch}, [state(0, battery=25)], at(10), THRESHOLDS),
    }
    assert {name: contact_only(watch, plan) for name, plan in cases.items()} == dict.fromkeys(
        cases, False
    )
    first = plan_states({}, [state(0)], at(0), THRESHOLDS)
    assert not contact_only(None, first)


def test_the_scan_marks_a_watch_it_did_not_change() -> None:
    quiet = first_watch(0, now=100)
    silent = first_watch(0, mower_id=OTHER_MOWER)
    plan = plan_silence([quiet, silent], at(150), at(-3600), THRESHOLDS)
    assert [(w.watch.mower_id, w.changed) for w in plan.writes] == [
        (MOWER, False),
        (OTHER_MOWER, True),
    ]
