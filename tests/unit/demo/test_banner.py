"""The demo's banner: where every service's metrics are, and the Prometheus when started."""

from __future__ import annotations

import uuid

from mowdeck.demo.banner import banner
from mowdeck.demo.running import Demo


def _demo(**extra: object) -> Demo:
    return Demo(
        token="t",
        fleet_url="http://127.0.0.1:8080",
        telemetry_url="http://127.0.0.1:8081",
        gateway_url="http://127.0.0.1:8082",
        notifications_url="http://127.0.0.1:8083",
        realtime_url="http://127.0.0.1:8084",
        sim_url="http://127.0.0.1:8090",
        mowers=[uuid.uuid4()],
        **extra,  # type: ignore[arg-type]
    )


def test_the_banner_lists_every_service_s_metrics() -> None:
    text = banner(_demo())
    for line in (
        "fleet          http://127.0.0.1:8080/metrics",
        "telemetry      http://127.0.0.1:8081/metrics",
        "gateway        http://127.0.0.1:8082/metrics",
        "notifications  http://127.0.0.1:8083/metrics",
        "realtime       http://127.0.0.1:8084/metrics",
        "simulator      http://127.0.0.1:8090/metrics",
    ):
        assert line in text
    assert "mowdeck demo --prometheus starts a Prometheus" in text


def test_with_prometheus_the_banner_gives_its_url() -> None:
    text = banner(_demo(prometheus_url="http://127.0.0.1:9999", prometheus_rules=2))
    assert "Prometheus     http://127.0.0.1:9999" in text
    assert "2 rule files loaded: http://127.0.0.1:9999/alerts" in text
    assert "--prometheus starts" not in text


def test_a_fleet_of_mowdeck_s_own_mowers_says_so() -> None:
    text = banner(_demo())
    assert "Mowers by brand (1 Mowdeck):" in text
    assert "theirs is a pause" not in text
    # The console stays the first thing a person reads.
    assert text.strip().splitlines()[2].strip().startswith("Console")
