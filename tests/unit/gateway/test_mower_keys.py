"""Per-mower keys, formatted once and bounded."""

from __future__ import annotations

import uuid

from mowdeck.gateway.mower_keys import MowerNames


def test_the_key_is_the_id_as_text_formatted_once() -> None:
    names = MowerNames()
    mower = uuid.uuid4()
    assert names.key(mower) == str(mower)
    assert names.key(mower) is names.key(mower)


def test_past_the_limit_keys_are_right_but_not_kept() -> None:
    names = MowerNames(limit=2)
    ids = [uuid.uuid4() for _ in range(5)]
    for mower in ids:
        assert names.key(mower) == str(mower)
    assert len(names._keys) == 2
