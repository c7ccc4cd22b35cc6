"""Fleet's settings: the events relay's, under their names and, for one release, the old."""

from __future__ import annotations

import pytest

from mowdeck.fleet.settings import load_fleet_settings

RENAMED = [
    (
        "FLEET_EVENTS_RELAY_POLL_SECONDS",
        "FLEET_OUTBOX_POLL_SECONDS",
        "fleet_events_relay_poll_seconds",
        2.5,
    ),
    ("FLEET_EVENTS_RELAY_BATCH", "FLEET_OUTBOX_BATCH", "fleet_events_relay_batch", 42),
    (
        "FLEET_EVENTS_RELAY_RETENTION_DAYS",
        "FLEET_OUTBOX_RETENTION_DAYS",
        "fleet_events_relay_retention_days",
        3.0,
    ),
]


@pytest.mark.parametrize(("new", "old", "field", "value"), RENAMED, ids=[r[2] for r in RENAMED])
def test_the_old_variable_is_read_with_a_warning_naming_the_new(
    caplog: pytest.LogCaptureFixture, new: str, old: str, field: str, value: float
) -> None:
    with caplog.at_level("WARNING", logger="mowdeck.settings"):
        settings = load_fleet_settings({f"MOWDECK_{old}": str(value)})
    assert getattr(settings, field) == value
    assert [r.getMessage() for r in caplog.records] == [
        f"MOWDECK_{old} is deprecated and read for one more release: set MOWDECK_{new} instead"
    ]
    assert getattr(load_fleet_settings({f"MOWDECK_{new}": str(value)}), field) == value


def test_the_defaults() -> None:
    s = load_fleet_settings({})
    assert (
        s.fleet_events_relay_poll_seconds,
        s.fleet_events_relay_batch,
        s.fleet_events_relay_retention_days,
    ) == (1.0, 500, 1.0)
