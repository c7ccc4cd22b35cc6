"""The inbox cursor: opaque, round-trips, and refuses what it did not make."""

from __future__ import annotations

import base64

import pytest

from mowdeck.notifications.inbox.model import CursorError, InboxCursor
from tests.unit.notifications.samples import MOWER, at


def test_a_cursor_round_trips_as_an_opaque_token() -> None:
    cursor = InboxCursor(at(0.000123), MOWER)
    token = cursor.encode()
    assert "=" not in token
    assert str(MOWER) not in token
    assert InboxCursor.decode(token) == cursor


def _token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not base64 at all!",
        _token("2026-05-01T12:00:00+00:00"),
        _token(f"yesterday|{MOWER}"),
        _token(f"2026-05-01T12:00:00|{MOWER}"),
        _token("2026-05-01T12:00:00+00:00|not-a-uuid"),
        "\u00e9\u00e9\u00e9\u00e9",
    ],
    ids=["empty", "not-base64", "no-id", "no-time", "naive-time", "bad-id", "not-ascii"],
)
def test_a_foreign_token_is_a_cursor_error(token: str) -> None:
    with pytest.raises(CursorError):
        InboxCursor.decode(token)
