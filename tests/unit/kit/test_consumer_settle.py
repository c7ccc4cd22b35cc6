"""``settle``: each message in a logging scope of its own."""

from __future__ import annotations

from nats.aio.msg import Msg
from structlog.contextvars import get_contextvars, merge_contextvars
from structlog.testing import capture_logs

from mowdeck.kit.consumer import DropMessage, settle
from mowdeck.kit.logging import bind, bound
from tests.support.fakes import FakeMsg


async def _mismatched(msg: Msg) -> None:
    bind(mower_id="m1", command_id="c1")  # decoded, then found wanting
    raise DropMessage("subject-mismatch")


async def _anonymous(msg: Msg) -> None:
    """A message naming no mower."""


async def test_what_a_handler_binds_is_on_its_settling_line_and_not_on_the_next_message() -> None:
    first, second = FakeMsg(b"a", "command.result.mower.x"), FakeMsg(b"b", "event.mower.connected")
    with bound(service="telemetry"), capture_logs(processors=[merge_contextvars]) as logs:
        assert await settle(first, _mismatched, consumer="telemetry-results") == "term"
        assert await settle(second, _anonymous, consumer="telemetry-directory") == "ack"
        left = get_contextvars()
    terminated, handled = logs
    assert (terminated["event"], terminated["mower_id"], terminated["command_id"]) == (
        "message terminated",
        "m1",
        "c1",
    )
    assert terminated["service"] == "telemetry"
    assert handled["event"] == "message handled"
    assert "mower_id" not in handled
    assert "command_id" not in handled
    assert left == {"service": "telemetry"}
