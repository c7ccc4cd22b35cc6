"""Sorting a batch of TELEMETRY deliveries into each mower's states."""

from __future__ import annotations

import uuid

from contracts.v1 import MowerState, encode
from contracts.v1.subjects import telemetry_subject
from mowdeck.kit.state_batches import StateSorter
from tests.support.fakes import FakeMsg
from tests.unit.notifications.samples import MOWER, OTHER_MOWER, state


def _delivery(s: MowerState, subject: str | None = None) -> FakeMsg:
    return FakeMsg(encode(s), subject=subject or telemetry_subject(s.mower_id))


def test_states_are_grouped_by_mower_in_arrival_order() -> None:
    msgs = [
        _delivery(state(0)),
        _delivery(state(1, mower_id=OTHER_MOWER)),
        _delivery(state(2)),
    ]
    batch = StateSorter().sort(msgs)
    assert list(batch.mowers) == [MOWER, OTHER_MOWER]
    mine = batch.mowers[MOWER]
    assert mine.msgs == [msgs[0], msgs[2]]
    assert [s.observed_at for s in mine.states] == [state(0).observed_at, state(2).observed_at]
    assert batch.rejected == [] and batch.foreign == []


def test_other_subjects_are_set_apart_unread() -> None:
    other = FakeMsg(b"not even json", subject=f"{telemetry_subject(MOWER)}.position")
    fleet = FakeMsg(b"{}", subject="telemetry.fleet")
    batch = StateSorter().sort([other, fleet])
    assert batch.foreign == [other, fleet]
    assert batch.mowers == {} and batch.rejected == []


def test_malformed_and_mismatched_are_rejected_with_their_reason() -> None:
    garbage = FakeMsg(b"{", subject=telemetry_subject(MOWER))
    bad_subject = FakeMsg(encode(state(0)), subject="telemetry.mower.not-a-uuid")
    foreign_mower = _delivery(state(0, mower_id=OTHER_MOWER), subject=telemetry_subject(MOWER))
    kept = _delivery(state(1))
    batch = StateSorter().sort([garbage, bad_subject, foreign_mower, kept])
    assert [(r.msg, r.reason) for r in batch.rejected] == [
        (garbage, "malformed"),
        (bad_subject, "malformed"),
        (foreign_mower, "subject-mismatch"),
    ]
    assert batch.rejected[2].detail == str(OTHER_MOWER)
    assert batch.mowers[MOWER].msgs == [kept]


def test_a_services_own_check_runs_after_the_kits() -> None:
    seen: list[uuid.UUID] = []

    def low_battery_refused(s: MowerState, data: bytes) -> tuple[str, str] | None:
        seen.append(s.mower_id)
        assert data == encode(s)
        return ("too-low", f"battery {s.battery}") if s.battery < 10 else None

    mismatched = _delivery(state(0, mower_id=OTHER_MOWER), subject=telemetry_subject(MOWER))
    low, fine = _delivery(state(1, battery=5)), _delivery(state(2))
    batch = StateSorter().sort([mismatched, low, fine], low_battery_refused)
    assert seen == [MOWER, MOWER]  # the mismatched one never reached the check
    assert [(r.msg, r.reason, r.detail) for r in batch.rejected] == [
        (mismatched, "subject-mismatch", str(OTHER_MOWER)),
        (low, "too-low", "battery 5"),
    ]
    assert batch.mowers[MOWER].msgs == [fine]


def test_remembered_subjects_are_bounded() -> None:
    sorter = StateSorter(subject_cache=1)
    one, two = _delivery(state(0)), _delivery(state(0, mower_id=OTHER_MOWER))
    for _ in range(2):  # remembered or not, each is still sorted right
        batch = sorter.sort([one, two])
        assert set(batch.mowers) == {MOWER, OTHER_MOWER}
    assert len(sorter._subjects) == 1


def test_the_actor_key_is_the_id_as_text_made_once() -> None:
    sorter = StateSorter()
    first = sorter.key(MOWER)
    assert first == str(MOWER)
    assert sorter.key(uuid.UUID(str(MOWER))) is first
