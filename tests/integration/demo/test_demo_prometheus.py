"""The demo under load, scraped by a real Prometheus.

Every service's ``/metrics`` passes ``promtool check metrics``; every recording rule and
alert expression of ``deploy/prometheus/rules/`` and every dashboard expression (of
``deploy/grafana/``, or the former ``docs/dashboards/mowdeck.json`` while none is there)
parses and evaluates through Prometheus's HTTP API; every dashboard expression returns
data. The few that are empty in a healthy system are listed below with the reason, and
provoked once: then they too must return data.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from contracts.v1 import CommandEnvelope, SetBladeHeight
from mowdeck import demo
from mowdeck.demo.prometheus import scrape_targets, start_prometheus
from mowdeck.kit.bus import Bus
from tests.support.eventually import eventually
from tests.support.prometheus import (
    DEPLOY,
    dashboard_expressions,
    dashboard_files,
    query,
    require_prometheus,
    run_promtool,
    runnable_expression,
)

pytestmark = [pytest.mark.slow]

log = structlog.get_logger("tests.prometheus")

GROWING = {"mower", "mower_id", "command", "command_id", "user", "user_id", "account", "account_id"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# Scrapes and rule evaluations every 0.5 s: a few seconds of load give every rate() its
# two samples.
INTERVAL_S = 0.5


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")  # outside the checkout
    return parser.parse_args(["--port", "0", "--mowers", "4", "--state-dir", str(state)])


@pytest.fixture
async def running(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[demo.Demo]:
    """The demo on its embedded servers."""
    for name in ("MOWDECK_NATS_URL", "MOWDECK_DATABASE_URL", "MOWDECK_JWT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    async with demo.running_demo(_args()) as started:
        yield started


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body) as answer:
        result: dict[str, Any] = await answer.json(content_type=None)
        assert answer.status in (200, 202), (url, result)
        return result


async def _load(running: demo.Demo) -> None:
    """Traffic through every service: commands of several kinds with an emergency stop,
    queries, a live stream read for a moment, and a fault that makes a notification."""
    headers = {"Authorization": f"Bearer {running.token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        for mower in running.mowers:
            url = f"{running.fleet_url}/v1/mowers/{mower}/commands?wait=10"
            await _post(http, url, {"command": {"kind": "set_blade_height", "height_mm": 40}})
            await _post(http, url, {"command": {"kind": "emergency_stop"}})
            async with http.get(f"{running.telemetry_url}/v1/mowers/{mower}/state") as r:
                assert r.status in (200, 404)
        async with http.get(f"{running.fleet_url}/v1/mowers") as r:
            assert r.status == 200
        # A fault the notification rules report at once (mower_error), sent on the log
        # channel of the demo user.
        faulty = running.mowers[-1]
        async with http.post(
            f"{running.sim_url}/sim/mowers/{faulty}/faults", json={"kind": "error", "code": "E7"}
        ) as r:
            assert r.status == 200, await r.text()
        async with http.get(f"{running.realtime_url}/v1/stream") as stream:
            assert stream.status == 200
            await asyncio.wait_for(stream.content.readany(), 10)


async def _exposition(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as r:
        assert r.status == 200, url
        return await r.text()


async def test_every_service_s_exposition_passes_promtool(running: demo.Demo) -> None:
    await _load(running)
    checked = {}
    for job, url in running.metrics_urls().items():
        text = await _exposition(url)
        result = run_promtool("check", "metrics", stdin=text)
        checked[job] = (result.returncode, result.stdout + result.stderr)
        assert "mowdeck_" in text, job
        # No label names a mower, command, user or account, nor holds one's id.
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                assert not GROWING.intersection(sample.labels), (job, sample)
                assert not any(UUID.search(v) for v in sample.labels.values()), (job, sample)
    assert checked == dict.fromkeys(running.metrics_urls(), (0, "")), checked


async def test_a_broken_exposition_fails_promtool() -> None:
    # The check can fail: a counter without _total and a name with a unit that is not a
    # base unit.
    text = (
        "# HELP mowdeck_x_requests Requests.\n# TYPE mowdeck_x_requests counter\n"
        "mowdeck_x_requests 1\n"
        "# HELP mowdeck_x_wait_milliseconds Waits.\n# TYPE mowdeck_x_wait_milliseconds gauge\n"
        "mowdeck_x_wait_milliseconds 1\n"
    )
    result = run_promtool("check", "metrics", stdin=text)
    assert result.returncode != 0
    assert "_total" in result.stdout + result.stderr
    assert "base unit" in result.stdout + result.stderr


async def _publish_unknown_mower_command(running: demo.Demo) -> None:
    # Fleet refuses a command for a mower it does not know before any gateway sees it;
    # on the bus (as Fleet's user) it reaches the gateway, which refuses it.
    assert running.nats is not None
    bus = await Bus.connect(
        running.nats.url,
        name="test-fleet",
        credentials=running.nats.credentials("fleet"),
        user="fleet",
    )
    try:
        now = datetime.now(UTC)
        envelope = CommandEnvelope.issue(
            mower_id=uuid.uuid4(),
            account_id=uuid.uuid4(),
            command=SetBladeHeight(height_mm=30),
            issued_by="user:test",
            now=now,
        )
        await bus.publish_command(envelope, now=now)
    finally:
        await bus.drain()


async def _resume_from_an_unknown_position(running: demo.Demo) -> None:
    # A client resuming from a position the streams cannot serve gets a resync and a
    # snapshot.
    headers = {"Authorization": f"Bearer {running.token}", "Last-Event-ID": "no-such-position"}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.get(f"{running.realtime_url}/v1/stream") as stream,
    ):
        assert stream.status == 200
        first = await asyncio.wait_for(stream.content.readuntil(b"\n\n"), 10)
        assert b"event: resync" in first, first


# Read by the alert rules and absent here: the demo's streams and JetStream account have no
# size limit (only an age), and the figures are shown only for a limit that exists.
UNLIMITED = {
    "mowdeck_stream_max_bytes",
    "mowdeck_stream_max_messages",
    "mowdeck_jetstream_max_storage_bytes",
}


# Dashboard expressions that show nothing in a healthy system, no series or only zeros:
# what they count does not happen there. Matched by the metric they read. Each is
# provoked once, after which its expression must show more than zero.
QUIET_WHEN_HEALTHY: dict[str, tuple[str, Callable[[demo.Demo], Awaitable[None]]]] = {
    "mowdeck_gateway_commands_refused_total": (
        "no command is refused while every command names a known mower",
        _publish_unknown_mower_command,
    ),
    "mowdeck_realtime_resyncs_total": (
        "no client resumes from a position the streams no longer hold",
        _resume_from_an_unknown_position,
    ),
}


def _quiet_metric(expr: str) -> str | None:
    for metric in QUIET_WHEN_HEALTHY:
        if re.search(rf"\b{metric}\b", expr):
            return metric
    return None


def _shows_more_than_zero(answer: dict[str, Any]) -> bool:
    return any(float(s["value"][1]) > 0 for s in answer["data"]["result"])


async def _rules(http: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with http.get(f"{url}/api/v1/rules") as r:
        body = await r.json()
    return [rule for group in body["data"]["groups"] for rule in group["rules"]]


@pytest.mark.timeout(300)
async def test_rules_and_dashboards_evaluate_on_a_real_prometheus(running: demo.Demo) -> None:
    require_prometheus()
    rules_files = sorted((DEPLOY / "rules").glob("*.yml"))
    assert rules_files
    targets = scrape_targets(running.metrics_urls())
    async with (
        start_prometheus(targets, rules=rules_files, scrape_interval_s=INTERVAL_S) as prom,
        aiohttp.ClientSession() as http,
    ):
        await _load(running)

        async def every_target_up() -> bool:
            answer = await query(http, prom.url, "count(up == 1)")
            result = answer["data"]["result"]
            return bool(result) and float(result[0]["value"][1]) == len(targets)

        await eventually(every_target_up, timeout=30, interval=0.5, what="every target up")

        async def notified() -> bool:
            sent = 'sum(mowdeck_notifications_deliveries_total{result="sent"}) > 0'
            return bool((await query(http, prom.url, sent))["data"]["result"])

        await eventually(notified, timeout=60, interval=0.5, what="a notification delivered")
        await asyncio.sleep(10 * INTERVAL_S)  # every rate() has samples to go on

        # Every rule Prometheus loaded was evaluated without error, and its expression
        # evaluates through the API.
        rules = await _rules(http, prom.url)
        records = [r for r in rules if r["type"] == "recording"]
        alerts = [r for r in rules if r["type"] == "alerting"]
        assert records and alerts
        broken = {
            r["name"]: r.get("lastError")
            for r in rules
            if r["health"] != "ok" or r.get("lastError")
        }
        assert broken == {}, prom.log
        for rule in rules:
            answer = await query(http, prom.url, rule["query"])
            assert answer["status"] == "success", (rule["name"], answer)

        # Every dashboard expression evaluates and returns data, once provoked where a
        # healthy system has none.
        expressions = [
            (path.name, title, expr)
            for path in dashboard_files()
            for title, expr in dashboard_expressions(path)
        ]
        assert expressions
        empty = []
        quiet = []
        for name, title, expr in expressions:
            answer = await query(http, prom.url, runnable_expression(expr))
            assert answer["status"] == "success", (name, title, expr, answer)
            if _quiet_metric(expr) is not None:
                quiet.append((name, title, expr))
            elif not answer["data"]["result"]:
                empty.append((name, title, expr))
        assert empty == [], f"empty in a healthy system, with no reason listed: {empty}"

        for metric in sorted({m for e in quiet if (m := _quiet_metric(e[2])) is not None}):
            await QUIET_WHEN_HEALTHY[metric][1](running)
        for name, title, expr in quiet:

            async def shows(expr: str = expr) -> bool:
                return _shows_more_than_zero(await query(http, prom.url, runnable_expression(expr)))

            await eventually(shows, timeout=20, interval=0.5, what=f"{name}: {title} provoked")
        log.info(
            "evaluated on prometheus",
            recording_rules=len(records),
            alert_expressions=len(alerts),
            dashboard_expressions=len(expressions),
            provoked=[(title, expr) for _, title, expr in quiet],
        )
        print(
            f"evaluated on a real Prometheus: {len(records)} recording rules,"
            f" {len(alerts)} alert expressions, {len(expressions)} dashboard expressions;"
            f" provoked: {[(t, e) for _, t, e in quiet]}"
        )
