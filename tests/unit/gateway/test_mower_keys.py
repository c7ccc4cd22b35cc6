"""Per-mower keys, formatted once and bounded."""

from __future__ import annotations

import uuid

from mowdeck.gateway.mower_keys import MowerKeys


def test_the_key_is_the_id_as_text_formatted_once() -> None:
    keys = MowerKeys()
    mower = uuid.uuid4()
    assert keys.key(mower) == str(mower)
    assert keys.key(mower) is keys.key(mower)


def test_past_the_limit_keys_are_right_but_not_kept() -> None:
    keys = MowerKeys(limit=2)
    ids = [uuid.uuid4() for _ in range(5)]
    for mower in ids:
        assert keys.key(mower) == str(mower)
    assert len(keys._keys) == 2
