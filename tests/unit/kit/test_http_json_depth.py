"""The request body's nesting limit: counted on brackets outside strings."""

from __future__ import annotations

import pytest

from mowdeck.kit.http import json_depth_exceeds


@pytest.mark.parametrize(
    ("body", "limit", "exceeds"),
    [
        (b'{"a": 1}', 1, False),
        (b'{"a": [1]}', 1, True),
        (b'{"a": [1]}', 2, False),
        (b"[" * 33 + b"]" * 33, 32, True),
        (b"[" * 32 + b"]" * 32, 32, False),
        (b"[[]," * 40 + b"[]" + b"]" * 40, 64, False),  # many brackets, never deep
        (b'{"a": "[[[[[[[[[[{{{{{{{{{{"}', 1, False),  # brackets in a string
        (b'{"a\\"[[[[[[": "x\\\\", "b": [[1]]}', 3, False),  # escapes end strings right
        (b'{"a\\"[[[[[[": "x\\\\", "b": [[1]]}', 2, True),
        (b"[[[", 2, True),  # malformed: still counted, the decoder refuses the rest
        (b"", 0, False),
    ],
    ids=[
        "flat",
        "one-too-deep",
        "at-limit",
        "33-arrays",
        "32-arrays",
        "wide-not-deep",
        "in-string",
        "escaped-quotes",
        "escaped-quotes-deep",
        "unclosed",
        "empty",
    ],
)
def test_depth(body: bytes, limit: int, exceeds: bool) -> None:
    assert json_depth_exceeds(body, limit) is exceeds
