"""Pure delivery decisions: the backoff schedule, what a send's result records, and when a
quiet-hours summary is due."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from mowdeck.notifications.delivery.channels.port import DeliveryResult
from mowdeck.notifications.delivery.model import ClaimedDelivery, DeliveryOutcome
from mowdeck.notifications.rules.quiet import QuietHours, quiet_hours_end

__all__ = ["Backoff", "outcome_of", "summary_due"]


class Backoff:
    """``initial`` doubled per attempt up to ``maximum``; a longer Retry-After wins."""

    def __init__(self, initial: float, maximum: float, max_attempts: int) -> None:
        self.initial = initial
        self.maximum = maximum
        self.max_attempts = max_attempts

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``attempt``-th send failed transiently (from 1)."""
        # 2 ** 60 is far past any cap; the exponent is bounded so the float stays finite.
        backoff = min(self.initial * 2.0 ** min(attempt - 1, 60), self.maximum)
        return max(backoff, retry_after or 0.0)


def outcome_of(
    claimed: ClaimedDelivery, result: DeliveryResult, now: datetime, backoff: Backoff
) -> DeliveryOutcome:
    """What to record for ``result``: a retry becomes a failure after the last attempt."""
    reason = result.reason or (f"HTTP {result.http_status}" if result.http_status else "")
    outcome = DeliveryOutcome(
        id=claimed.id,
        attempts=claimed.attempts,
        target_id=claimed.target_id,
        outcome=result.status,
        error="" if result.status == "sent" else reason,
    )
    if result.status != "retry":
        return outcome
    if claimed.attempts >= backoff.max_attempts:
        error = f"gave up after {claimed.attempts} attempts: {reason}"
        return msgspec.structs.replace(outcome, outcome="failed", error=error)
    wait = timedelta(seconds=backoff.delay(claimed.attempts, result.retry_after))
    return msgspec.structs.replace(outcome, next_attempt_at=now + wait)


def summary_due(
    quiet: QuietHours | None, timezone: str, occurred_at: datetime, now: datetime
) -> datetime:
    """When the summary of an item held by quiet hours is due: when those hours end.

    The fan-out may have judged the item by its own clock rather than by when it
    occurred, so the quiet hours ``now`` falls in count too; failing both, at once.
    """
    return (
        quiet_hours_end(quiet, timezone, occurred_at)
        or quiet_hours_end(quiet, timezone, now)
        or now
    )
