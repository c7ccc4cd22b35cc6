"""The demo's Prometheus: its targets, its configuration, its rule files, no binary."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from mowdeck.demo import cli
from mowdeck.demo.prometheus import (
    PrometheusError,
    prometheus_binary,
    prometheus_config,
    rule_files,
    scrape_targets,
    start_prometheus,
)
from mowdeck.demo.running import Demo

ROOT = Path(__file__).resolve().parents[3]


def test_each_service_is_a_job_with_its_host_and_port() -> None:
    targets = scrape_targets(
        {"fleet": "http://127.0.0.1:8080", "gateway": "http://[::1]:8082", "sim": "http://h:1"}
    )
    assert targets == {"fleet": ["127.0.0.1:8080"], "gateway": ["[::1]:8082"], "sim": ["h:1"]}


def test_the_configuration_scrapes_every_job_and_loads_the_rules() -> None:
    config = json.loads(
        prometheus_config(
            {"fleet": ["127.0.0.1:8080"], "gateway": ["127.0.0.1:8082", "127.0.0.1:8092"]},
            [Path("/r/alerts.yml")],
            scrape_interval_s=0.5,
        )
    )
    assert config["global"]["scrape_interval"] == "500ms"
    assert config["rule_files"] == ["/r/alerts.yml"]
    assert config["scrape_configs"] == [
        {"job_name": "fleet", "static_configs": [{"targets": ["127.0.0.1:8080"]}]},
        {
            "job_name": "gateway",
            "static_configs": [{"targets": ["127.0.0.1:8082", "127.0.0.1:8092"]}],
        },
    ]


def test_the_rules_are_the_checkout_s_or_a_folder_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MOWDECK_PROMETHEUS_RULES_DIR", raising=False)
    assert [p.relative_to(ROOT).as_posix() for p in rule_files()] == [
        "deploy/prometheus/rules/alerts.yml",
        "deploy/prometheus/rules/slos.yml",
    ]
    (tmp_path / "mine.yml").write_text("groups: []\n")
    monkeypatch.setenv("MOWDECK_PROMETHEUS_RULES_DIR", str(tmp_path))
    assert rule_files() == [tmp_path / "mine.yml"]
    monkeypatch.setenv("MOWDECK_PROMETHEUS_RULES_DIR", str(tmp_path / "none"))
    assert rule_files() == []


async def test_without_a_binary_it_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOWDECK_PROMETHEUS", "/nonexistent/prometheus")
    assert prometheus_binary() is None
    with pytest.raises(PrometheusError, match="apt-get install prometheus"):
        async with start_prometheus({"fleet": ["127.0.0.1:1"]}, rules=[]):
            pass


async def test_a_prometheus_that_exits_at_once_is_reported_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "prometheus"
    fake.write_text("#!/bin/sh\necho 'err=\"bad flag\"' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(PrometheusError, match=r"exited with status 3: .*bad flag"):
        async with start_prometheus({"fleet": ["127.0.0.1:1"]}, rules=[], binary=str(fake)):
            pass


async def test_demo_without_a_binary_says_so_and_runs_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOWDECK_PROMETHEUS", "/nonexistent/prometheus")
    url = "http://127.0.0.1:1"
    running = Demo("t", url, url, url, url, url, mowers=[], realtime_url=url)
    async with contextlib.AsyncExitStack() as stack:
        await cli._prometheus(running, "127.0.0.1", stack)
    err = capsys.readouterr().err
    assert "--prometheus: no prometheus binary on the PATH" in err
    assert "apt-get install prometheus" in err
    assert running.prometheus_url == ""
