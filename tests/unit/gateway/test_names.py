"""Per-mower names, formatted once and bounded."""

from __future__ import annotations

import uuid

from contracts.v1.subjects import result_subject, telemetry_subject
from mowdeck.gateway.names import MowerNames


def test_names_are_the_subjects_and_the_key() -> None:
    names = MowerNames()
    mower = uuid.uuid4()
    assert names.key(mower) == str(mower)
    assert names.result_subject(mower) == result_subject(mower)
    assert names.telemetry_subject(mower) == telemetry_subject(mower)
    assert names.key(mower) is names.key(mower)  # formatted once


def test_past_the_limit_names_are_right_but_not_kept() -> None:
    names = MowerNames(limit=2)
    ids = [uuid.uuid4() for _ in range(5)]
    for mower in ids:
        assert names.key(mower) == str(mower)
    assert len(names._names) == 2
    assert names.result_subject(ids[4]) == result_subject(ids[4])
