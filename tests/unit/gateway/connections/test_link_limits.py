"""A device link's frame budget: a burst, then the rate, and nothing saved beyond the burst."""

from __future__ import annotations

import pytest

from mowdeck.gateway.connections.link_limits import FrameBudget, LinkLimits, LinkViolation

LIMITS = LinkLimits(frames_per_second=10.0, frame_burst=5)


@pytest.mark.parametrize(
    ("times", "taken"),
    [
        pytest.param([0.0] * 5, [True] * 5, id="the-burst-at-once"),
        pytest.param([0.0] * 6, [True] * 5 + [False], id="one-more-than-the-burst"),
        pytest.param([0.0] * 5 + [0.1], [True] * 6, id="the-rate-refills-one-in-a-tenth"),
        pytest.param([i * 0.1 for i in range(50)], [True] * 50, id="steady-at-the-rate"),
        pytest.param([100.0] * 6, [True] * 5 + [False], id="idle-saves-no-more-than-the-burst"),
    ],
)
def test_the_budget_allows_the_burst_then_the_rate(times: list[float], taken: list[bool]) -> None:
    budget = FrameBudget(LIMITS, now=0.0)
    assert [budget.take(t) for t in times] == taken


def test_a_violation_names_its_kind_in_the_reason() -> None:
    violation = LinkViolation("foreign_mower", "a state of mower x")
    assert violation.kind == "foreign_mower"
    assert violation.reason == "protocol violation: foreign mower: a state of mower x"
