"""From bus events to what a client sees: alarms (the other kinds are held by the hub's,
the replay's and the streams' tests)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import msgspec

from contracts.v1 import AlarmChanged, EventEnvelope, NotificationSent
from mowdeck.realtime.translate import WATCHED_EVENTS, alarm_item

MOWER = uuid.UUID(int=7)
AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _changed() -> AlarmChanged:
    return AlarmChanged(
        alarm_id=uuid.UUID(int=1),
        mower_id=MOWER,
        condition="error:E42",
        kind="mower_stuck",
        severity="critical",
        state="active",
        change="raised",
        first_at=AT,
        latest_at=AT,
        code="E42",
    )


def test_an_alarm_change_is_an_alarm_event_for_every_viewer_of_its_mower() -> None:
    assert "notifications.alarm_changed" in WATCHED_EVENTS
    event = EventEnvelope.new(
        "notifications.alarm_changed", _changed(), producer="notifications", now=AT
    )
    item = alarm_item(event)
    assert item is not None
    assert (item.type, item.mower_id, item.user_id) == ("alarm", MOWER, None)
    body = msgspec.json.decode(item.data)
    assert (body["alarm_id"], body["condition"], body["change"], body["code"]) == (
        str(uuid.UUID(int=1)),
        "error:E42",
        "raised",
        "E42",
    )


def test_another_event_is_no_alarm() -> None:
    sent = NotificationSent(
        notification_id=uuid.UUID(int=2),
        user_id="u",
        mower_id=MOWER,
        kind="battery_low",
        severity="warning",
        dedupe_key="k",
    )
    event = EventEnvelope.new("notifications.sent", sent, producer="notifications", now=AT)
    assert alarm_item(event) is None
