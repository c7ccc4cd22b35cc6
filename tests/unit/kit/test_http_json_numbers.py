"""Bodies read as JSON Schema reads numbers: a whole float is an integer, nothing else moves."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mowdeck.kit.http import decode_as_json_schema


class Body(msgspec.Struct, frozen=True):
    count: int
    speed: float
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


def test_a_whole_float_is_an_integer_and_an_integer_a_float() -> None:
    got = decode_as_json_schema(b'{"count": 9251.0, "speed": 2, "extra": {"n": 1.5}}', Body)
    assert got == Body(count=9251, speed=2.0, extra={"n": 1.5})
    assert type(got.count) is int


@pytest.mark.parametrize(
    "data",
    [b'{"count": 1.5, "speed": 1}', b'{"count": "1", "speed": 1}', b'{"count": true, "speed": 1}'],
    ids=["fraction", "string", "bool"],
)
def test_anything_else_is_refused_naming_the_field(data: bytes) -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.count"):
        decode_as_json_schema(data, Body)
