"""The ``ntfy`` channel: a JSON publish to the server root, priority and tags by kind.

The access token goes into the ``Authorization`` header only: never into a log line, a
reason or a repr.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import msgspec

from mowdeck.notifications.delivery.channels.http import common_answer, post
from mowdeck.notifications.delivery.channels.port import Delivery, DeliveryResult, Severity
from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.delivery.targets import NtfyTarget, TargetPolicy, normalise_server

__all__ = ["NtfyChannel", "create_ntfy_channel", "ntfy_answer", "ntfy_message"]

# ntfy priorities: 1 min, 2 low, 3 default, 4 high, 5 max (urgent, bypasses Do Not Disturb).
PRIORITY: Mapping[Severity, int] = {"info": 3, "warning": 4, "critical": 5}
KIND_PRIORITY = {"job_started": 2}
# Tags that are emoji short codes show as emoji before the title.
KIND_TAGS = {
    "job_started": "arrow_forward",
    "mowing_finished": "white_check_mark",
    "mower_stuck": "sos",
    "battery_low": "battery",
    "mower_offline": "electric_plug",
    "mower_online": "signal_strength",
    "left_area": "round_pushpin",
    "theft_suspected": "lock",
}
SEVERITY_TAGS: Mapping[Severity, str] = {"critical": "rotating_light", "warning": "warning"}


def ntfy_message(target: NtfyTarget, delivery: Delivery, click: str | None) -> dict[str, Any]:
    """The JSON publish document of one delivery."""
    tags = (SEVERITY_TAGS.get(delivery.severity), KIND_TAGS.get(delivery.kind))
    message: dict[str, Any] = {
        "topic": target.topic,
        "title": delivery.title,
        "message": delivery.body,
        "priority": KIND_PRIORITY.get(delivery.kind, PRIORITY[delivery.severity]),
        "tags": [tag for tag in tags if tag],
    }
    if click:
        message["click"] = click
    return message


def ntfy_answer(status: int, headers: Mapping[str, str], now: float) -> DeliveryResult:
    """An ntfy server's answer as a result; a topic never disappears, so no ``gone``."""
    common = common_answer(status, headers, now=lambda: now)
    if common is not None:
        return common
    reasons = {401: "access token refused", 403: "access token refused", 413: "too large"}
    return DeliveryResult(
        status="failed", http_status=status, reason=reasons.get(status, f"HTTP {status}")
    )


class NtfyChannel:
    """Publishes to topics on allowed ntfy servers."""

    name = "ntfy"

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        policy: TargetPolicy,
        timeout: float,
        console_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._session = session
        self._policy = policy
        self._timeout = timeout
        self._console_url = console_url
        self._clock = clock

    async def send(self, delivery: Delivery) -> DeliveryResult:
        """Publish one delivery."""
        try:
            target = msgspec.convert(delivery.target, NtfyTarget)
        except msgspec.ValidationError:
            return DeliveryResult(status="failed", reason="not an ntfy target")
        server = normalise_server(target.server)
        if server not in self._policy.ntfy_servers:
            return DeliveryResult(status="failed", reason="server is not an allowed ntfy server")
        click = delivery.console_url or self._console_url
        headers = {"Content-Type": "application/json"}
        if target.token:
            headers["Authorization"] = f"Bearer {target.token}"
        return await post(
            self._session,
            server + "/",
            data=msgspec.json.encode(ntfy_message(target, delivery, click)),
            headers=headers,
            timeout=self._timeout,
            answer=lambda status, h: ntfy_answer(status, h, self._clock()),
        )

    async def close(self) -> None:
        """Nothing of its own to release; the session is shared."""


def create_ntfy_channel(
    settings: ChannelSettings, http_session: aiohttp.ClientSession
) -> NtfyChannel:
    """The ``ntfy`` entry point."""
    return NtfyChannel(
        http_session,
        policy=TargetPolicy.from_settings(settings),
        timeout=settings.notifications_send_timeout_seconds,
        console_url=settings.notifications_console_url,
    )
