"""How the channels read an HTTP answer: Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from mowdeck.notifications.delivery.channels.http import parse_retry_after

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("30", 30.0),
        (" 5 ", 5.0),
        (format_datetime(datetime.fromtimestamp(NOW + 90, UTC), usegmt=True), 90.0),
        (format_datetime(datetime.fromtimestamp(NOW - 90, UTC), usegmt=True), 0.0),
        ("999999999", 86400.0),
        ("soon", None),
        ("-5", None),
        (None, None),
        ("", None),
    ],
    ids=[
        "seconds",
        "spaces",
        "http-date",
        "date-past",
        "capped",
        "garbage",
        "negative",
        "absent",
        "empty",
    ],
)
def test_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected
