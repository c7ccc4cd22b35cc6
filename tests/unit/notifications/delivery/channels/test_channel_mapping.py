"""Pure parts of the channels: answers to results, headers, topics, payload, ntfy fields."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from mowdeck.notifications.delivery.channels.http import parse_retry_after
from mowdeck.notifications.delivery.channels.ntfy import ntfy_answer, ntfy_message
from mowdeck.notifications.delivery.channels.port import Delivery, DeliveryResult
from mowdeck.notifications.delivery.channels.webpush import push_headers, push_topic, webpush_answer
from mowdeck.notifications.delivery.targets import NtfyTarget

NOW = 1_800_000_000.0
KINDS = [
    "job_started",
    "mowing_finished",
    "mower_stuck",
    "battery_low",
    "mower_offline",
    "mower_online",
]


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (201, {}, DeliveryResult(status="sent", http_status=201)),
        (200, {}, DeliveryResult(status="sent", http_status=200)),
        (202, {}, DeliveryResult(status="sent", http_status=202)),
        (404, {}, DeliveryResult(status="gone", http_status=404, reason="subscription expired")),
        (410, {}, DeliveryResult(status="gone", http_status=410, reason="subscription expired")),
        (
            429,
            {"Retry-After": "120"},
            DeliveryResult(
                status="retry", http_status=429, retry_after=120.0, reason="rate limited"
            ),
        ),
        (429, {}, DeliveryResult(status="retry", http_status=429, reason="rate limited")),
        (500, {}, DeliveryResult(status="retry", http_status=500, reason="server error")),
        (
            503,
            {"Retry-After": "7"},
            DeliveryResult(status="retry", http_status=503, retry_after=7.0, reason="server error"),
        ),
        (413, {}, DeliveryResult(status="failed", http_status=413, reason="payload too large")),
        (
            403,
            {},
            DeliveryResult(status="failed", http_status=403, reason="VAPID authorization refused"),
        ),
        (
            400,
            {},
            DeliveryResult(
                status="failed", http_status=400, reason="push service refused the request"
            ),
        ),
        (418, {}, DeliveryResult(status="failed", http_status=418, reason="HTTP 418")),
        (301, {}, DeliveryResult(status="failed", http_status=301, reason="redirect not followed")),
    ],
    ids=[
        "201",
        "200",
        "202",
        "404",
        "410",
        "429-after",
        "429",
        "500",
        "503-after",
        "413",
        "403",
        "400",
        "418",
        "301",
    ],
)
def test_webpush_answers(status: int, headers: dict[str, str], expected: DeliveryResult) -> None:
    assert webpush_answer(status, headers, NOW) == expected


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


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("30", 30.0),
        (" 5 ", 5.0),
        (format_datetime(datetime.fromtimestamp(NOW + 90, UTC), usegmt=True), 90.0),
        (format_datetime(datetime.fromtimestamp(NOW - 90, UTC), usegmt=True), 0.0),
        ("999999999", 86400.0),
        ("soon", None),
        ("-5", None),
        (None, None),
        ("", None),
    ],
    ids=[
        "seconds",
        "spaces",
        "http-date",
        "date-past",
        "capped",
        "garbage",
        "negative",
        "absent",
        "empty",
    ],
)
def test_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_offline_and_online_share_one_topic_per_mower() -> None:
    assert push_topic("mower_offline", "m-1") == push_topic("mower_online", "m-1")
    assert push_topic("mower_offline", "m-1") != push_topic("mower_offline", "m-2")
    assert push_topic("battery_low", "m-1") != push_topic("mower_offline", "m-1")


@pytest.mark.parametrize("kind", KINDS)
def test_topics_are_short_and_url_safe(kind: str) -> None:
    for mower in ("m", "x" * 500, "ümlaut/mower?id=1"):
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,32}", push_topic(kind, mower))
    topics = {push_topic(kind, f"mower-{i}") for i in range(1000)}
    assert len(topics) == 1000


@pytest.mark.parametrize(
    ("severity", "ttl", "urgency"),
    [("critical", "86400", "high"), ("warning", "21600", "normal"), ("info", "3600", "low")],
    ids=["critical", "warning", "info"],
)
def test_ttl_and_urgency_by_severity(severity: str, ttl: str, urgency: str) -> None:
    headers = push_headers(severity, "battery_low", "m-1")  # type: ignore[arg-type]
    assert (headers["TTL"], headers["Urgency"]) == (ttl, urgency)
    assert headers["Content-Encoding"] == "aes128gcm"


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
