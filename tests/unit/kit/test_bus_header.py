"""Reading a header whichever shape nats-py gives it."""

from __future__ import annotations

from typing import Any

from nats.aio.msg import Msg

from mowdeck.kit.bus import header


def _msg(headers: dict[str, Any] | None) -> Msg:
    return Msg(_client=None, subject="s", reply="", data=b"", headers=headers)  # type: ignore[arg-type]


def test_a_string_value() -> None:
    assert header(_msg({"Mowdeck-Priority": "emergency"}), "Mowdeck-Priority") == "emergency"


def test_a_list_value_as_the_optional_fast_parser_gives_it() -> None:
    msg = _msg({"Mowdeck-Priority": ["emergency"]})
    assert header(msg, "Mowdeck-Priority") == "emergency"
    assert header(_msg({"Mowdeck-Priority": []}), "Mowdeck-Priority") is None


def test_absent() -> None:
    assert header(_msg(None), "Mowdeck-Priority") is None
    assert header(_msg({}), "Mowdeck-Priority") is None
    assert header(_msg({"Other": "x"}), "Mowdeck-Priority") is None
