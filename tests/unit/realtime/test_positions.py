"""Event ids: a position triple written and read back, and what is not one."""

from __future__ import annotations

import pytest

from mowdeck.realtime.positions import Position, format_position, parse_position


def test_an_id_names_each_streams_sequence() -> None:
    assert format_position(Position(812, 77, 5)) == "t812.c77.e5"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("t812.c77.e5", Position(812, 77, 5)),
        ("t0.c0.e0", Position(0, 0, 0)),
        (" t1.c2.e3 ", Position(1, 2, 3)),
        ("c1.t2.e3", None),
        ("t1.c2", None),
        ("t1.c2.e3.x4", None),
        ("t-1.c2.e3", None),
        ("t.c2.e3", None),
        ("t\uff11.c2.e3", None),  # a fullwidth digit one
        ("", None),
    ],
    ids=[
        "example",
        "zeros",
        "spaces",
        "order",
        "short",
        "long",
        "negative",
        "empty-number",
        "non-ascii-digit",
        "empty",
    ],
)
def test_parse(text: str, expected: Position | None) -> None:
    assert parse_position(text) == expected
