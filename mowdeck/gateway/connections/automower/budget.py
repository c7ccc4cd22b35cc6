"""The monthly request budget of an Automower Connect application key.

Besides about one request a second, the vendor allows each application key a number of
requests a calendar month (10,000). The adapter spends them only on one snapshot per
account link and reconnect and on commands (states come from the event stream), and
counts what it spends: ``mowdeck_gateway_automower_requests_remaining{credential}`` is
what is left this month (UTC), and crossing 80 % of the budget logs a warning once a
month. The count is this shard's since it started: a restart within a month starts from
zero, and shards that share a credential each count their own (docs/adapters.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import structlog
from prometheus_client import CollectorRegistry, Gauge

__all__ = ["MONTHLY_REQUESTS", "WARN_SHARE", "BudgetMetrics", "MonthlyBudget"]

log = structlog.get_logger("mowdeck.gateway.automower")

MONTHLY_REQUESTS = 10_000
WARN_SHARE = 0.8


def _now() -> datetime:
    return datetime.now(UTC)


class BudgetMetrics:
    """The budgets' gauge, one series per credential (an operator's few application keys)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.remaining = Gauge(
            "mowdeck_gateway_automower_requests_remaining",
            "Requests left this calendar month (UTC) of an Automower Connect application"
            " key, as this shard counted them since it started.",
            ["credential"],
            registry=registry,
        )


class MonthlyBudget:
    """Counts the requests of one application key in the current calendar month."""

    def __init__(
        self,
        credential: str,
        metrics: BudgetMetrics | None = None,
        *,
        limit: int = MONTHLY_REQUESTS,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.credential = credential
        self.limit = limit
        self._metrics = metrics
        self._clock = clock
        self._month = self._month_of(clock())
        self.used = 0
        self._warned = False
        self._show()

    @staticmethod
    def _month_of(at: datetime) -> tuple[int, int]:
        at = at.astimezone(UTC)
        return at.year, at.month

    @property
    def remaining(self) -> int:
        """Requests left this month (never below zero)."""
        return max(self.limit - self.used, 0)

    def spend(self, requests: int = 1) -> None:
        """Count ``requests`` made now; a new month starts the count again."""
        month = self._month_of(self._clock())
        if month != self._month:
            self._month, self.used, self._warned = month, 0, False
        self.used += requests
        if not self._warned and self.used >= self.limit * WARN_SHARE:
            self._warned = True
            log.warning(
                "automower monthly request budget mostly spent",
                credential=self.credential,
                used=self.used,
                limit=self.limit,
                month=f"{month[0]}-{month[1]:02d}",
            )
        self._show()

    def _show(self) -> None:
        if self._metrics is not None:
            self._metrics.remaining.labels(credential=self.credential).set(self.remaining)
