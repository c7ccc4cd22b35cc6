"""The ntfy channel's pure parts: answers, priority and tags, the click; a delivery's repr."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mowdeck.notifications.delivery.channels.ntfy import ntfy_answer, ntfy_message
from mowdeck.notifications.delivery.channels.port import Delivery
from mowdeck.notifications.delivery.targets import NtfyTarget

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("status", "result_status"),
    [
        (200, "sent"),
        (404, "failed"),
        (410, "failed"),
        (401, "failed"),
        (403, "failed"),
        (413, "failed"),
        (429, "retry"),
        (502, "retry"),
        (302, "failed"),
    ],
    ids=["200", "404", "410", "401", "403", "413", "429", "502", "302"],
)
def test_ntfy_answers_never_say_gone(status: int, result_status: str) -> None:
    assert ntfy_answer(status, {}, NOW).status == result_status


def test_ntfy_token_refusal_is_named() -> None:
    assert ntfy_answer(401, {}, NOW).reason == "access token refused"


def delivery(kind: str = "mower_stuck", severity: str = "critical", **extra: object) -> Delivery:
    fields: dict[str, object] = {
        "delivery_id": "d-1",
        "user_id": "u-1",
        "channel": "ntfy",
        "target": {
            "channel": "ntfy",
            "server": "https://ntfy.sh",
            "topic": "t",
            "token": "tk_secret",
        },
        "kind": kind,
        "mower_id": "m-1",
        "severity": severity,
        "title": "Stuck",
        "body": "Mower 1 is stuck",
        "occurred_at": datetime(2026, 6, 1, 12, tzinfo=UTC),
        "dedupe_key": "mower_stuck:m-1:1",
    }
    return Delivery(**{**fields, **extra})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "severity", "priority", "tags"),
    [
        ("mower_stuck", "critical", 5, ["rotating_light", "sos"]),
        ("battery_low", "warning", 4, ["warning", "battery"]),
        ("mower_offline", "warning", 4, ["warning", "electric_plug"]),
        ("mowing_finished", "info", 3, ["white_check_mark"]),
        ("mower_online", "info", 3, ["signal_strength"]),
        ("job_started", "info", 2, ["arrow_forward"]),
        ("some_new_kind", "info", 3, []),
    ],
    ids=["stuck", "battery", "offline", "finished", "online", "started", "unknown"],
)
def test_ntfy_priority_and_tags(kind: str, severity: str, priority: int, tags: list[str]) -> None:
    target = NtfyTarget("https://ntfy.sh", "mowers")
    message = ntfy_message(target, delivery(kind, severity), None)
    assert message == {
        "topic": "mowers",
        "title": "Stuck",
        "message": "Mower 1 is stuck",
        "priority": priority,
        "tags": tags,
    }


def test_ntfy_click_when_a_console_url_is_known() -> None:
    message = ntfy_message(NtfyTarget("https://ntfy.sh", "t"), delivery(), "https://c/m/1")
    assert message["click"] == "https://c/m/1"


def test_a_delivery_repr_shows_no_target_secrets() -> None:
    assert "tk_secret" not in repr(delivery())
    assert "d-1" in repr(delivery())
