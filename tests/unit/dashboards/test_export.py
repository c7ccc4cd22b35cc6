"""The committed dashboards are what the code makes, and show what the operators need."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mowdeck.dashboards import DASHBOARD_DIR, dashboards, stale_dashboards, write_dashboards


def _load() -> dict[str, dict[str, object]]:
    return {name: json.loads(text) for name, text in dashboards().items()}


def _exprs(board: dict[str, object]) -> list[str]:
    panels: list[dict[str, object]] = board["panels"]  # type: ignore[assignment]
    return [str(t["expr"]) for p in panels for t in p.get("targets", [])]  # type: ignore[attr-defined]


def test_the_committed_dashboards_are_current() -> None:
    assert stale_dashboards(DASHBOARD_DIR) == [], "run `mowdeck dashboards export`"


def test_a_changed_missing_or_extra_file_is_stale(tmp_path: Path) -> None:
    write_dashboards(tmp_path)
    assert stale_dashboards(tmp_path) == []
    (tmp_path / "gateway.json").write_text("{}\n")
    (tmp_path / "fleet.json").unlink()
    (tmp_path / "old.json").write_text("{}\n")
    assert stale_dashboards(tmp_path) == ["fleet.json", "gateway.json", "old.json"]


def test_every_panel_is_numbered_reads_the_chosen_data_source_and_has_plain_promql() -> None:
    for name, board in _load().items():
        panels: list[dict[str, object]] = board["panels"]  # type: ignore[assignment]
        ids = [p["id"] for p in panels]
        assert len(set(ids)) == len(ids) and 0 not in ids, name
        variables = [v["name"] for v in board["templating"]["list"]]  # type: ignore[index]
        assert variables == ["datasource"], name
        for panel in panels:
            if panel["type"] == "row":
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["description"], (name, panel["title"])
            targets: list[dict[str, str]] = panel["targets"]  # type: ignore[assignment]
            assert [t["refId"] for t in targets] == [chr(65 + i) for i in range(len(targets))]
            for target in targets:
                # Evaluated unchanged through Prometheus's API: no Grafana variables.
                assert "$" not in target["expr"], (name, panel["title"])
                assert target["expr"].count("(") == target["expr"].count(")")


def test_uids_and_titles_are_unique() -> None:
    boards = _load().values()
    assert len({b["uid"] for b in boards}) == len({b["title"] for b in boards}) == len(boards)


# What the operators asked each dashboard to show, as the metrics that show it.
SHOWN = {
    "overview.json": [
        "mowdeck_gateway_mowers_connected",
        "mowdeck_telemetry_states_received_total",
        "sum by (kind) (rate(mowdeck_gateway_commands_admitted_total",
        "sum by (status) (rate(mowdeck_gateway_results_total",
        "mowdeck_gateway_emergency_stop_seconds_bucket",
        "sum by (result) (rate(mowdeck_notifications_deliveries_total",
        "mowdeck_notifications_suppressed_total",
        "max by (stream, consumer) (mowdeck_consumer_pending_messages)",
        "mowdeck_dependency_up",
    ],
    "gateway.json": ["mowdeck_gateway_commands_in_flight", "mowdeck_gateway_commands_waiting"],
    "telemetry.json": [
        "mowdeck_telemetry_batch_size_states_bucket",
        "mowdeck_telemetry_commit_seconds_bucket",
    ],
    "notifications.json": [
        "sum by (kind) (rate(mowdeck_notifications_events_total",
        "sum by (reason) (rate(mowdeck_notifications_suppressed_total",
        "mowdeck_notifications_deliveries_due",
        "mowdeck_notifications_oldest_due_delivery_age_seconds",
        "sum by (channel, result) (rate(mowdeck_notifications_deliveries_total",
    ],
    "realtime.json": [
        "sum by (transport) (mowdeck_realtime_connections)",
        "mowdeck_realtime_events_delivered_total",
        "mowdeck_realtime_events_conflated_total",
        "mowdeck_realtime_resyncs_total",
    ],
    "fleet.json": ["mowdeck_fleet_events_relay_pending", "mowdeck_fleet_http_requests_total"],
}


@pytest.mark.parametrize(("name", "needles"), SHOWN.items(), ids=list(SHOWN))
def test_each_dashboard_shows_what_it_is_for(name: str, needles: list[str]) -> None:
    exprs = "\n".join(_exprs(_load()[name]))
    assert [n for n in needles if n not in exprs] == []


def test_every_metric_is_a_mowdeck_metric_or_prometheus_own() -> None:
    for board in _load().values():
        for expr in _exprs(board):
            names = set(re.findall(r"\b([a-z_]+(?:_total|_seconds|_bucket|_sum|_count)?)\b", expr))
            metrics = {n for n in names if n.startswith("mowdeck_")}
            assert metrics or "up" in names, expr
