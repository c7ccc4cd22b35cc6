"""Renamed metrics are exposed under their former names too, with the same values."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from mowdeck.kit.former_metric_names import FormerNames


def test_the_former_names_carry_the_new_metrics_values() -> None:
    registry = CollectorRegistry()
    sent = Counter("app_relay_sent_total", "Sent", ["kind"], registry=registry)
    lag = Gauge("app_relay_lag_seconds", "Lag", registry=registry)
    FormerNames([sent, lag], new="app_relay_", old="app_outbox_", registry=registry)
    sent.labels("a").inc(3)
    lag.set(2.5)
    value = registry.get_sample_value
    assert value("app_outbox_sent_total", {"kind": "a"}) == 3
    assert value("app_outbox_lag_seconds") == 2.5
    sent.labels("a").inc()  # read at each scrape, not copied once
    assert (
        value("app_outbox_sent_total", {"kind": "a"})
        == value("app_relay_sent_total", {"kind": "a"})
        == 4
    )
    text = generate_latest(registry).decode()
    assert "# HELP app_outbox_lag_seconds Lag (former name of app_relay_lag_seconds" in text
    assert "# TYPE app_outbox_sent_total counter" in text


def test_a_metric_outside_the_prefix_is_refused() -> None:
    registry = CollectorRegistry()
    other = Gauge("app_other", "Other", registry=registry)
    with pytest.raises(ValueError, match="app_other"):
        FormerNames([other], new="app_relay_", old="app_outbox_", registry=registry)
