"""The monthly request budget: counted per calendar month, shown, warned of once at 80 %."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from mowdeck.gateway.connections.automower.budget import BudgetMetrics, MonthlyBudget


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _remaining(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value(
        "mowdeck_gateway_automower_requests_remaining", {"credential": "garden"}
    )


def test_the_budget_counts_down_warns_once_at_80_percent_and_starts_again_each_month() -> None:
    registry = CollectorRegistry()
    clock = Clock(datetime(2026, 5, 31, 23, 0, tzinfo=UTC))
    budget = MonthlyBudget("garden", BudgetMetrics(registry), limit=10, clock=clock)
    assert _remaining(registry) == 10
    with capture_logs() as logs:
        for _ in range(9):
            budget.spend()
    warnings = [e for e in logs if e["event"] == "automower monthly request budget mostly spent"]
    assert [(w["used"], w["month"]) for w in warnings] == [(8, "2026-05")]
    assert (budget.remaining, _remaining(registry)) == (1, 1)
    budget.spend(5)
    assert budget.remaining == 0  # spent past the budget: none left, not a negative count
    clock.now = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
    budget.spend()
    assert (budget.used, _remaining(registry)) == (1, 9)
