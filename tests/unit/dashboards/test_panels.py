"""The panel helpers: queries numbered A, B..., ranges written out."""

from __future__ import annotations

import pytest

from mowdeck.dashboards._panels import Board, Query, quantile, rate


@pytest.mark.parametrize("count", [0, 27], ids=["none", "more-than-letters"])
def test_a_panel_takes_one_to_twenty_six_queries(count: int) -> None:
    board = Board("u", "t", "d")
    with pytest.raises(ValueError, match="1 to 26 queries"):
        board.timeseries("p", "d", [Query("up")] * count)


@pytest.mark.parametrize(
    ("made", "expected"),
    [
        (rate("m_total"), "sum (rate(m_total[5m]))"),
        (rate("m_total", "kind", '{a="b"}'), 'sum by (kind) (rate(m_total{a="b"}[5m]))'),
        (
            quantile(0.99, "h_seconds", "route, job"),
            "histogram_quantile(0.99, sum by (le, route, job) (rate(h_seconds_bucket[5m])))",
        ),
    ],
    ids=["rate", "rate-by-selector", "quantile-by"],
)
def test_expressions(made: str, expected: str) -> None:
    assert made == expected
