"""Logging: the renderers, and the bindings that say which service and message a line is about."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

import pytest
import structlog

from mowdeck.kit.logging import (
    bind,
    bound,
    configure_logging,
    ids_as_text,
    message_scope,
    service_context,
)


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def test_console_logs_into_a_file_carry_no_colour_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", "console")
    structlog.get_logger("t").warning("something happened", mower_id="m1")
    err = capsys.readouterr().err
    assert "something happened" in err
    assert "mower_id=m1" in err
    assert "\x1b[" not in err


def _now() -> dict[str, object]:
    return structlog.contextvars.get_contextvars()


async def _seen() -> dict[str, object]:
    return _now()


async def test_bound_values_reach_the_block_and_the_tasks_created_in_it_and_go_after() -> None:
    mower = uuid.uuid4()
    with bound(service="fleet"):
        with bound(mower_id=mower, service="inner"):
            inside = _now()
            task = asyncio.get_running_loop().create_task(_seen())
        after_inner = _now()
    assert inside == {"service": "inner", "mower_id": mower}
    assert await task == {"service": "inner", "mower_id": mower}
    assert after_inner == {"service": "fleet"}  # what was bound before is back
    assert _now() == {}


async def test_a_message_scope_hides_the_last_message_s_ids_and_drops_its_own_at_its_end() -> None:
    with bound(service="telemetry", mower_id="outer"):
        with message_scope():
            at_start = _now()
            bind(mower_id="m1", command_id="c1")
            bound_inside = _now()
        after = _now()
    assert at_start == {"service": "telemetry"}
    assert bound_inside == {"service": "telemetry", "mower_id": "m1", "command_id": "c1"}
    assert after == {"service": "telemetry", "mower_id": "outer"}


async def test_a_task_in_the_service_context_keeps_the_service_and_none_of_the_message() -> None:
    loop = asyncio.get_running_loop()
    with bound(service="fleet", mower_id="m1", command_id="c1", account_id="a1"):
        shared = loop.create_task(_seen(), context=service_context())
        inherited = loop.create_task(_seen())
    assert await shared == {"service": "fleet"}
    assert await inherited == {
        "service": "fleet",
        "mower_id": "m1",
        "command_id": "c1",
        "account_id": "a1",
    }


def test_a_json_line_carries_the_bindings_with_ids_as_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", "json")
    command = uuid.UUID("00000000-0000-4000-8000-0000000000c1")
    with bound(service="gateway", command_id=command):
        structlog.get_logger("t").info("command rejected", reason="unknown mower")
        logging.getLogger("nats").warning("a library's line")
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert (first["service"], first["command_id"]) == ("gateway", str(command))
    assert (second["service"], second["command_id"]) == ("gateway", str(command))


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        ("text", "text"),
        (7, 7),
        (None, None),
    ],
    ids=["uuid-as-text", "text-as-is", "number-as-is", "none-as-is"],
)
def test_ids_as_text(value: object, written: object) -> None:
    assert ids_as_text(None, "info", {"event": "e", "value": value}) == {
        "event": "e",
        "value": written,
    }
