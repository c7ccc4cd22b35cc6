"""Target validation: what a user may register, and every refusal named by field."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.delivery.targets import (
    ForbiddenAddressError,
    NtfyTarget,
    TargetPolicy,
    Violation,
    WebPushTarget,
    check_target_addresses,
    normalise_server,
    resolve_public,
    validate_target,
)
from tests.unit.notifications.delivery.channels.keys import AUTH, P256DH, b64url

DEFAULT = TargetPolicy.from_settings(ChannelSettings())
DEV = TargetPolicy.from_settings(
    ChannelSettings(
        notifications_push_hosts=["push.example.com:8443", "127.0.0.1", "*.push.apple.com"],
        notifications_ntfy_servers=["https://ntfy.sh", "http://127.0.0.1:8080/"],
        notifications_insecure_hosts=["127.0.0.1"],
    )
)


def push(endpoint: str, p256dh: str = P256DH, auth: str = AUTH) -> dict[str, Any]:
    return {
        "channel": "webpush",
        "subscription": {
            "endpoint": endpoint,
            "expirationTime": None,
            "keys": {"p256dh": p256dh, "auth": auth},
        },
    }


def fields(result: object) -> list[str]:
    assert isinstance(result, list), result
    return [p.field for p in result]


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://fcm.googleapis.com/fcm/send/abc:def",
        "https://updates.push.services.mozilla.com/wpush/v2/gAAA",
        "https://web.push.apple.com/QGz3",
        "https://wns2-db5p.notify.windows.com/w/?token=AQE",
        "https://FCM.googleapis.com/fcm/send/x",
    ],
    ids=["fcm", "mozilla", "apple", "windows", "host-case"],
)
def test_the_public_push_services_are_allowed_by_default(endpoint: str) -> None:
    target = validate_target(push(endpoint), DEFAULT)
    assert isinstance(target, WebPushTarget)
    assert target.subscription.endpoint == endpoint


REFUSED = [
    ("http://fcm.googleapis.com/fcm/send/x", DEFAULT, "must be an https URL"),
    ("https://127.0.0.1/push", DEFAULT, "not an allowed push service"),
    ("https://10.0.0.5/push", DEFAULT, "not an allowed push service"),
    ("https://evil.example.com/push", DEFAULT, "not an allowed push service"),
    ("https://push.apple.com/x", DEFAULT, "not an allowed push service"),
    ("https://push.apple.com.evil.com/x", DEFAULT, "not an allowed push service"),
    ("https://web.push.apple.com.evil.com/x", DEFAULT, "not an allowed push service"),
    ("https://evilpush.apple.com/x", DEFAULT, "not an allowed push service"),
    ("https://user:pw@fcm.googleapis.com/x", DEFAULT, "user information"),
    ("https://fcm.googleapis.com@evil.com/x", DEFAULT, "user information"),
    ("ftp://fcm.googleapis.com/x", DEFAULT, "must be an https URL"),
    ("https://push.example.com/x", DEV, "not an allowed push service"),
    ("https://push.example.com:9443/x", DEV, "not an allowed push service"),
    ("https://fcm.googleapis.com/a b", DEFAULT, "without spaces"),
    ("https:///x", DEFAULT, "no host"),
    ("not a url", DEFAULT, "ASCII URL"),
]


@pytest.mark.parametrize(
    ("endpoint", "policy", "why"),
    REFUSED,
    ids=[
        "http-not-insecure",
        "loopback-literal",
        "private-literal",
        "host-not-allowed",
        "suffix-itself",
        "suffix-as-prefix",
        "allowed-host-as-prefix",
        "suffix-without-dot",
        "userinfo",
        "userinfo-confusion",
        "scheme",
        "port-entry-default-port",
        "port-entry-wrong-port",
        "spaces",
        "no-host",
        "garbage",
    ],
)
def test_push_endpoints_outside_the_policy_are_refused(
    endpoint: str, policy: TargetPolicy, why: str
) -> None:
    result = validate_target(push(endpoint), policy)
    assert isinstance(result, list)
    assert [p.field for p in result] == ["subscription.endpoint"]
    assert why in result[0].reason


def test_a_host_port_entry_allows_that_port() -> None:
    assert isinstance(validate_target(push("https://push.example.com:8443/x"), DEV), WebPushTarget)


def test_the_insecure_list_allows_http_and_loopback() -> None:
    assert isinstance(validate_target(push("http://127.0.0.1:4000/push/a"), DEV), WebPushTarget)


def test_private_literals_are_refused_even_when_allowed_unless_insecure() -> None:
    policy = TargetPolicy.from_settings(
        ChannelSettings(notifications_push_hosts=["10.1.2.3", "[::1]", "169.254.169.254"])
    )
    for endpoint in ("https://10.1.2.3/x", "https://[::1]/x", "https://169.254.169.254/x"):
        result = validate_target(push(endpoint), policy)
        assert isinstance(result, list)
        assert "is not public" in result[0].reason, endpoint


@pytest.mark.parametrize(
    ("p256dh", "auth", "bad"),
    [
        ("", AUTH, ["subscription.keys.p256dh"]),
        (b64url(b"\x04" + b"\x01" * 64), AUTH, ["subscription.keys.p256dh"]),
        (b64url(b"\x02" + b"\x01" * 32), AUTH, ["subscription.keys.p256dh"]),
        ("not*base64", AUTH, ["subscription.keys.p256dh"]),
        (P256DH, b64url(b"\x00" * 15), ["subscription.keys.auth"]),
        (P256DH, "@@", ["subscription.keys.auth"]),
        ("x", "y", ["subscription.keys.p256dh", "subscription.keys.auth"]),
    ],
    ids=["empty", "not-on-curve", "compressed", "not-b64", "auth-15", "auth-not-b64", "both"],
)
def test_bad_subscription_keys_are_named(p256dh: str, auth: str, bad: list[str]) -> None:
    result = validate_target(push("https://fcm.googleapis.com/x", p256dh, auth), DEFAULT)
    assert fields(result) == bad


def test_padded_base64url_keys_are_accepted() -> None:
    padded = P256DH + "=" * (-len(P256DH) % 4)
    target = validate_target(push("https://fcm.googleapis.com/x", padded, AUTH + "=="), DEFAULT)
    assert isinstance(target, WebPushTarget)


@pytest.mark.parametrize(
    ("doc", "bad"),
    [
        ({}, ["channel"]),
        ({"channel": "carrier-pigeon"}, ["channel"]),
        ({"channel": "webpush"}, ["subscription"]),
        (
            {"channel": "webpush", "subscription": {"endpoint": 3, "keys": []}},
            ["subscription.endpoint", "subscription.keys"],
        ),
        ({"channel": "ntfy"}, ["server", "topic"]),
    ],
    ids=["no-channel", "unknown-channel", "no-subscription", "wrong-types", "empty-ntfy"],
)
def test_malformed_documents_name_every_field(doc: dict[str, Any], bad: list[str]) -> None:
    assert fields(validate_target(doc, DEFAULT)) == bad


def test_a_document_that_is_no_object() -> None:
    assert validate_target([1], DEFAULT) == [Violation("", "must be an object")]


def ntfy(server: str, topic: str = "mowers-alerts_1", token: str | None = None) -> dict[str, Any]:
    return {"channel": "ntfy", "server": server, "topic": topic, "token": token}


@pytest.mark.parametrize(
    "server",
    ["https://ntfy.sh", "https://NTFY.sh/", "https://ntfy.sh:443"],
    ids=["plain", "case-and-slash", "default-port"],
)
def test_allowed_ntfy_servers_compare_normalised(server: str) -> None:
    target = validate_target(ntfy(server, token="tk_abc"), DEFAULT)
    assert target == NtfyTarget("https://ntfy.sh", "mowers-alerts_1", "tk_abc")


@pytest.mark.parametrize(
    ("doc", "policy", "field", "why"),
    [
        (ntfy("https://ntfy.example.com"), DEFAULT, "server", "not an allowed ntfy server"),
        (ntfy("https://ntfy.sh/topic"), DEFAULT, "server", "without a path"),
        (ntfy("http://ntfy.sh"), DEFAULT, "server", "not an allowed ntfy server"),
        (ntfy("https://ntfy.sh:8443"), DEFAULT, "server", "not an allowed ntfy server"),
        (ntfy("https://me@ntfy.sh"), DEFAULT, "server", "user information"),
        (ntfy("https://ntfy.sh", topic="a/b"), DEFAULT, "topic", "1-64"),
        (ntfy("https://ntfy.sh", topic=""), DEFAULT, "topic", "1-64"),
        (ntfy("https://ntfy.sh", topic="x" * 65), DEFAULT, "topic", "1-64"),
        (ntfy("https://ntfy.sh", token="a b\r\nX: y"), DEFAULT, "token", "access token"),
    ],
    ids=[
        "not-listed",
        "path",
        "http",
        "other-port",
        "userinfo",
        "topic-slash",
        "topic-empty",
        "topic-long",
        "token-header-injection",
    ],
)
def test_ntfy_refusals(doc: dict[str, Any], policy: TargetPolicy, field: str, why: str) -> None:
    result = validate_target(doc, policy)
    assert isinstance(result, list)
    assert [p.field for p in result] == [field]
    assert why in result[0].reason


def test_ntfy_http_only_for_insecure_hosts() -> None:
    assert isinstance(validate_target(ntfy("http://127.0.0.1:8080"), DEV), NtfyTarget)
    listed_but_not_insecure = TargetPolicy.from_settings(
        ChannelSettings(notifications_ntfy_servers=["http://ntfy.internal"])
    )
    result = validate_target(ntfy("http://ntfy.internal"), listed_but_not_insecure)
    assert result == [Violation("server", "must be an https URL")]


def test_ntfy_token_is_not_in_the_repr() -> None:
    target = NtfyTarget("https://ntfy.sh", "t", "tk_secret_value")
    assert "tk_secret_value" not in repr(target)
    assert "tk_secret_value" not in str(target)


def test_normalise_server() -> None:
    assert normalise_server("HTTPS://Ntfy.SH:443/") == "https://ntfy.sh"
    assert normalise_server("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert normalise_server("http://host:80") == "http://host"


def answers(*addresses: str) -> Any:
    async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in addresses
        ]

    return getaddrinfo


@pytest.mark.parametrize(
    "addresses",
    [
        ("127.0.0.1",),
        ("10.0.0.1",),
        ("93.184.216.34", "192.168.1.1"),
        ("::1",),
        ("fe80::1%eth0",),
        ("::ffff:127.0.0.1",),
        ("100.64.0.1",),
        ("224.0.0.1",),
        ("0.0.0.0",),  # noqa: S104 - an address a name resolves to, not a bind
    ],
    ids=[
        "loopback",
        "private",
        "one-of-two",
        "v6-loopback",
        "link-local-scoped",
        "v4-mapped",
        "shared",
        "multicast",
        "unspecified",
    ],
)
async def test_names_resolving_to_internal_addresses_are_refused(addresses: tuple[str]) -> None:
    with pytest.raises(ForbiddenAddressError):
        await resolve_public("push.example.com", 443, DEFAULT, getaddrinfo=answers(*addresses))


async def test_public_answers_pass() -> None:
    infos = await resolve_public(
        "push.example.com", 443, DEFAULT, getaddrinfo=answers("93.184.216.34", "2606:4700::1")
    )
    assert len(infos) == 2


async def test_localhost_resolves_to_loopback_and_is_refused_unless_insecure() -> None:
    target = validate_target(
        ntfy("http://localhost:8080"),
        TargetPolicy.from_settings(
            ChannelSettings(
                notifications_ntfy_servers=["http://localhost:8080"],
                notifications_insecure_hosts=["localhost:8080"],
            )
        ),
    )
    assert isinstance(target, NtfyTarget)
    strict = TargetPolicy.from_settings(
        ChannelSettings(notifications_ntfy_servers=["http://localhost:8080"])
    )
    problems = await check_target_addresses(target, strict)
    assert [p.field for p in problems] == ["server"]
    assert "localhost resolves to" in problems[0].reason
    relaxed = TargetPolicy.from_settings(
        ChannelSettings(
            notifications_ntfy_servers=["http://localhost:8080"],
            notifications_insecure_hosts=["localhost"],
        )
    )
    assert await check_target_addresses(target, relaxed) == []


async def test_an_unresolvable_host_is_a_problem() -> None:
    async def fails(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    target = validate_target(push("https://fcm.googleapis.com/x"), DEFAULT)
    assert isinstance(target, WebPushTarget)
    problems = await check_target_addresses(target, DEFAULT, getaddrinfo=fails)
    assert [p.field for p in problems] == ["subscription.endpoint"]
    assert "cannot resolve fcm.googleapis.com" in problems[0].reason
