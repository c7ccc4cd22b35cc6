"""The in-memory alarm store against the alarm contract."""

from __future__ import annotations

from tests.unit.notifications.alarms.alarm_contract import AlarmContract


class TestInMemoryAlarms(AlarmContract):
    pass
