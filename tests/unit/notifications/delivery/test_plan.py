"""The backoff schedule, what a result records, when a summary is due, the settings."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from mowdeck.kit.settings import SettingsError
from mowdeck.notifications.delivery.channels import DeliveryResult
from mowdeck.notifications.delivery.model import ClaimedDelivery
from mowdeck.notifications.delivery.plan import Backoff, outcome_of, summary_due
from mowdeck.notifications.delivery.settings import DeliverySettings, load_delivery_settings
from mowdeck.notifications.rules.quiet import QuietHours

BACKOFF = Backoff(30, 3600, 8)
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("attempt", "retry_after", "delay"),
    [
        (1, None, 30),
        (2, None, 60),
        (3, None, 120),
        (7, None, 1920),
        (8, None, 3600),
        (20, None, 3600),
        (1, 600, 600),
        (2, 5, 60),
        (8, 86400, 86400),
    ],
    ids=[
        "first",
        "doubled",
        "again",
        "seventh",
        "capped",
        "far-capped",
        "longer-retry-after",
        "shorter-retry-after",
        "retry-after-over-cap",
    ],
)
def test_backoff(attempt: int, retry_after: float | None, delay: float) -> None:
    assert BACKOFF.delay(attempt, retry_after) == delay


def claimed(attempts: int) -> ClaimedDelivery:
    return ClaimedDelivery(
        id=7,
        target_id=uuid.UUID(int=1),
        user_id="ann",
        channel="webpush",
        target={},
        kind="battery_low",
        mower_id=None,
        severity="warning",
        dedupe_key="k",
        message_key="battery_low",
        params={},
        occurred_at=NOW,
        attempts=attempts,
    )


@pytest.mark.parametrize(
    ("result", "attempts", "outcome", "wait"),
    [
        (DeliveryResult(status="sent", http_status=201), 1, "sent", None),
        (DeliveryResult(status="retry", http_status=503), 1, "retry", 30),
        (DeliveryResult(status="retry", retry_after=900), 2, "retry", 900),
        (DeliveryResult(status="retry", http_status=503), 8, "failed", None),
        (DeliveryResult(status="gone", http_status=410), 1, "gone", None),
        (DeliveryResult(status="failed", http_status=400), 1, "failed", None),
    ],
    ids=["sent", "retry", "retry-after", "last-attempt", "gone", "failed"],
)
def test_outcome_of(
    result: DeliveryResult, attempts: int, outcome: str, wait: float | None
) -> None:
    found = outcome_of(claimed(attempts), result, NOW, BACKOFF)
    assert (found.id, found.attempts, found.outcome) == (7, attempts, outcome)
    expected = None if wait is None else NOW + timedelta(seconds=wait)
    assert found.next_attempt_at == expected


QUIET = QuietHours(start="22:00", end="07:00", allow_critical=True)


@pytest.mark.parametrize(
    ("occurred", "now", "due"),
    [
        ("2026-06-01T23:00+00:00", "2026-06-01T23:00+00:00", "2026-06-02T05:00+00:00"),
        ("2026-06-01T21:59+00:00", "2026-06-01T22:30+00:00", "2026-06-02T05:00+00:00"),
        ("2026-06-01T12:00+00:00", "2026-06-01T12:00+00:00", "2026-06-01T12:00+00:00"),
    ],
    ids=["in-quiet", "judged-by-the-fan-outs-clock", "not-quiet-at-once"],
)
def test_summary_due_in_berlin(occurred: str, now: str, due: str) -> None:
    found = summary_due(
        QUIET, "Europe/Berlin", datetime.fromisoformat(occurred), datetime.fromisoformat(now)
    )
    assert found == datetime.fromisoformat(due)


def test_settings_defaults_and_refusals() -> None:
    s = load_delivery_settings({})
    assert (s.lease, s.notifications_delivery_concurrency, s.notifications_max_attempts) == (
        timedelta(seconds=60),
        64,
        8,
    )
    assert (s.notifications_retry_initial_seconds, s.notifications_retry_max_seconds) == (30, 3600)
    assert (s.notifications_delivery_poll_seconds, s.delivery_retention) == (1, timedelta(days=7))
    with pytest.raises(SettingsError, match="MOWDECK_NOTIFICATIONS_LEASE_SECONDS"):
        load_delivery_settings({"MOWDECK_NOTIFICATIONS_LEASE_SECONDS": "0"})
    with pytest.raises(ValueError, match="RETRY_MAX_SECONDS"):
        DeliverySettings(notifications_retry_max_seconds=10)
