"""Finding a NUL character, which PostgreSQL cannot store, in a decoded message."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mowdeck.kit.storable import may_hold_nul, nul_field


class Inner(msgspec.Struct):
    options: dict[str, Any]


class Message(msgspec.Struct):
    name: str
    tags: list[str]
    inner: Inner


def message(**overrides: Any) -> Message:
    values: dict[str, Any] = {"name": "m", "tags": ["a"], "inner": Inner(options={"k": "v"})}
    values.update(overrides)
    return Message(**values)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (message(name="a\x00"), "name"),
        (message(tags=["ok", "\x00"]), "tags"),
        (message(inner=Inner(options={"k": "v\x00"})), "inner.options.k"),
        (message(inner=Inner(options={"k\x00": "v"})), "inner.options"),
        (
            message(inner=Inner(options={"deep": {"list": [{"x": "\x00"}]}})),
            "inner.options.deep.list",
        ),
        (message(), None),
    ],
)
def test_the_field_holding_a_nul_is_named(value: Message, field: str | None) -> None:
    assert nul_field(value) == field
    data = msgspec.json.encode(value)
    assert may_hold_nul(data) == (field is not None)


def test_the_text_of_the_escape_is_not_a_nul() -> None:
    value = message(name="\\u0000")  # a backslash and five characters
    data = msgspec.json.encode(value)
    assert may_hold_nul(data)  # the cheap test cannot tell ...
    assert nul_field(value) is None  # ... the decoded value can
