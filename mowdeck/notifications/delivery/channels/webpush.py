"""The ``webpush`` channel: VAPID, aes128gcm payloads, TTL/Urgency/Topic, kept-alive POSTs.

Encryption is ``ece.encrypt_push`` (aes128gcm with a fresh ECDH key and salt per message,
as RFC 8291 requires; the subscription's keys decoded once); the VAPID JWT is signed
once per push service. Sending goes through the channel's own ``pushhttp.PushClient``
(a pool of kept-alive HTTP/1.1 connections per push service, a timeout per send, no
redirect followed), which costs a fraction of the shared aiohttp session per push; ntfy
keeps the session.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import msgspec
import structlog
import yarl
from py_vapid import Vapid02

from mowdeck.notifications.delivery.channels.ece import encrypt_push, subscription_keys
from mowdeck.notifications.delivery.channels.http import common_answer, failure_of
from mowdeck.notifications.delivery.channels.port import Delivery, DeliveryResult, Severity
from mowdeck.notifications.delivery.channels.pushhttp import PushClient, PushURL, parse_push_url
from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.delivery.channels.vapid import (
    VapidSigner,
    application_server_key,
    load_vapid,
    validate_subject,
)
from mowdeck.notifications.delivery.targets import (
    TargetPolicy,
    WebPushTarget,
    check_url,
)

__all__ = [
    "MAX_PLAINTEXT",
    "PUSH_OPTIONS",
    "PushOptions",
    "WebPushChannel",
    "create_webpush_channel",
    "push_headers",
    "push_topic",
    "webpush_answer",
]

log = structlog.get_logger(__name__)


class PushOptions(msgspec.Struct, frozen=True):
    """How long a push service keeps a message for an offline device, and its urgency."""

    ttl: int
    urgency: str


# critical (stuck): wake the device now, keep it a day. warning (battery, offline): normal
# delivery, worth it for 6 h. info (finished, started, back online): low urgency (the
# device may wait until it is on power or Wi-Fi), stale after an hour.
PUSH_OPTIONS: Mapping[Severity, PushOptions] = {
    "critical": PushOptions(ttl=86400, urgency="high"),
    "warning": PushOptions(ttl=6 * 3600, urgency="normal"),
    "info": PushOptions(ttl=3600, urgency="low"),
}
# A newer message of the same family replaces an undelivered older one on the device:
# "back online" replaces "offline".
TOPIC_FAMILY = {"mower_offline": "link", "mower_online": "link"}
# One aes128gcm record of 4096 bytes: 86 header + 16 tag + 1 delimiter leaves 3993.
MAX_PLAINTEXT = 3993


# Built once per severity; each push copies one and adds its Topic.
_BASE_HEADERS: Mapping[Severity, Mapping[str, str]] = {
    severity: {
        "TTL": str(options.ttl),
        "Urgency": options.urgency,
        "Content-Encoding": "aes128gcm",
        "Content-Type": "application/octet-stream",
    }
    for severity, options in PUSH_OPTIONS.items()
}


# What a channel keeps per subscription (decoded keys, which hold its auth secret; the
# endpoint, a capability URL, parsed and checked) and per kind and mower (the Topic), at
# most so many each: the state is the channel's, and goes with it.
SUBSCRIPTIONS_KEPT = 4096
TOPICS_KEPT = 8192


def push_topic(kind: str, mower_id: str) -> str:
    """The ``Topic`` of a kind and mower: 24 URL-safe characters (at most 32 allowed)."""
    family = TOPIC_FAMILY.get(kind, kind)
    digest = hashlib.blake2b(f"{family}\x00{mower_id}".encode(), digest_size=18).digest()
    return base64.urlsafe_b64encode(digest).decode()


def push_headers(severity: Severity, kind: str, mower_id: str) -> dict[str, str]:
    """``TTL``, ``Urgency``, ``Topic`` and ``Content-Encoding`` of one push."""
    return _headers(severity, push_topic(kind, mower_id))


def _headers(severity: Severity, topic: str) -> dict[str, str]:
    return {**_BASE_HEADERS[severity], "Topic": topic}


def webpush_answer(status: int, headers: Mapping[str, str], now: float) -> DeliveryResult:
    """A push service's answer as a result (RFC 8030 and what the services do)."""
    common = common_answer(status, headers, now=lambda: now)
    if common is not None:
        return common
    if status in (404, 410):
        return DeliveryResult(status="gone", http_status=status, reason="subscription expired")
    reasons = {
        400: "push service refused the request",
        401: "VAPID authorization refused",
        403: "VAPID authorization refused",
        413: "payload too large",
    }
    return DeliveryResult(
        status="failed", http_status=status, reason=reasons.get(status, f"HTTP {status}")
    )


def _payload(delivery: Delivery, topic: str, url: str | None) -> bytes:
    message: dict[str, Any] = {
        "title": delivery.title,
        "body": delivery.body,
        "kind": delivery.kind,
        "mower_id": delivery.mower_id,
        "severity": delivery.severity,
        "tag": topic,
        "url": url,
    }
    data = msgspec.json.encode(message)
    while len(data) > MAX_PLAINTEXT and message["body"]:
        # Shorten the body (never the title) until the record fits.
        excess = len(data) - MAX_PLAINTEXT
        message["body"] = message["body"][: max(len(message["body"]) - excess - 1, 0)] + "…"
        data = msgspec.json.encode(message)
    return data


def _refusal(policy: TargetPolicy, endpoint: str) -> str | None:
    return check_url(endpoint, policy.push_hosts, policy)


def _endpoint(endpoint: str) -> tuple[PushURL, str]:
    # The URL parsed for the client, and its origin, the VAPID audience.
    return parse_push_url(endpoint), str(yarl.URL(endpoint).origin())


class WebPushChannel:
    """Sends Web Push messages to browsers' push services."""

    name = "webpush"

    def __init__(
        self,
        client: PushClient,
        vapid: Vapid02,
        *,
        subject: str,
        policy: TargetPolicy,
        timeout: float,
        console_url: str | None = None,
        clock: Callable[[], float] = time.time,
        subscriptions_kept: int = SUBSCRIPTIONS_KEPT,
    ) -> None:
        self._client = client
        self._signer = VapidSigner(vapid, subject, clock=clock)
        self._policy = policy
        self._timeout = timeout
        self._console_url = console_url
        self._clock = clock
        self.application_server_key = application_server_key(vapid)
        kept = functools.lru_cache(maxsize=subscriptions_kept)
        self._keys = kept(subscription_keys)
        self._endpoints = kept(_endpoint)
        self._refusals = kept(functools.partial(_refusal, policy))
        self._topics = functools.lru_cache(maxsize=TOPICS_KEPT)(push_topic)

    @property
    def subscriptions_held(self) -> int:
        """Subscriptions whose decoded keys this channel holds now."""
        return self._keys.cache_info().currsize

    @property
    def signatures(self) -> int:
        """VAPID JWTs signed so far (one per push service and 11 h)."""
        return self._signer.signatures

    async def send(self, delivery: Delivery) -> DeliveryResult:
        """Encrypt and push one delivery."""
        try:
            target = msgspec.convert(delivery.target, WebPushTarget)
        except msgspec.ValidationError as err:
            return DeliveryResult(status="failed", reason=f"not a webpush target: {err}")
        endpoint = target.subscription.endpoint
        refused = self._refusals(endpoint)
        if refused is not None:
            return DeliveryResult(status="failed", reason=f"endpoint {refused}")
        try:
            url, audience = self._endpoints(endpoint)
        except ValueError as err:
            return DeliveryResult(status="failed", reason=f"endpoint cannot be sent to: {err}")
        headers = _headers(delivery.severity, self._topics(delivery.kind, delivery.mower_id))
        data = _payload(delivery, headers["Topic"], delivery.console_url or self._console_url)
        keys = target.subscription.keys
        try:
            body = encrypt_push(self._keys(keys.p256dh, keys.auth), data)
        except ValueError as err:
            return DeliveryResult(status="failed", reason=str(err))
        headers["Authorization"] = self._signer.authorization(audience)
        try:
            response = await self._client.post(url, body, headers, self._timeout)
        except (OSError, TimeoutError) as err:
            return failure_of(err, self._timeout)
        return webpush_answer(response.status, response.headers, self._clock())

    async def close(self) -> None:
        """Close the channel's connections to the push services; forget the subscriptions."""
        for kept in (self._keys, self._endpoints, self._refusals, self._topics):
            kept.cache_clear()
        await self._client.close()


def create_webpush_channel(
    settings: ChannelSettings,
    http_session: aiohttp.ClientSession,  # noqa: ARG001 - Web Push has its own client
) -> WebPushChannel:
    """The ``webpush`` entry point: the VAPID key from the settings, its own push client."""
    vapid = load_vapid(settings)
    policy = TargetPolicy.from_settings(settings)
    channel = WebPushChannel(
        PushClient(policy, limit=settings.notifications_http_connections),
        vapid,
        subject=validate_subject(settings.notifications_vapid_subject),
        policy=policy,
        timeout=settings.notifications_send_timeout_seconds,
        console_url=settings.notifications_console_url,
    )
    log.info("webpush_ready", application_server_key=channel.application_server_key)
    return channel
