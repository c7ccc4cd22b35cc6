"""The ``log`` channel (development): the rendered message as one structured log line."""

from __future__ import annotations

import aiohttp
import structlog

from mowdeck.notifications.delivery.channels.port import Delivery, DeliveryResult
from mowdeck.notifications.delivery.channels.settings import ChannelSettings

__all__ = ["LogChannel", "create_log_channel"]


class LogChannel:
    """Logs every delivery and calls it sent; the target is not logged (it may hold a token)."""

    name = "log"

    def __init__(self, logger: structlog.stdlib.BoundLogger | None = None) -> None:
        self._log = logger or structlog.stdlib.get_logger(
            "mowdeck.notifications.delivery.channels.log"
        )

    async def send(self, delivery: Delivery) -> DeliveryResult:
        """Write the message; always sent."""
        self._log.info(
            "notification",
            delivery_id=delivery.delivery_id,
            user_id=delivery.user_id,
            kind=delivery.kind,
            mower_id=delivery.mower_id,
            severity=delivery.severity,
            title=delivery.title,
            body=delivery.body,
            occurred_at=delivery.occurred_at.isoformat(),
            dedupe_key=delivery.dedupe_key,
            attempt=delivery.attempt,
            url=delivery.console_url,
        )
        return DeliveryResult(status="sent")

    async def close(self) -> None:
        """Nothing to release."""


def create_log_channel(
    settings: ChannelSettings,  # noqa: ARG001 - the factory signature of every channel
    http_session: aiohttp.ClientSession,  # noqa: ARG001 - the log channel sends nothing
) -> LogChannel:
    """The ``log`` entry point."""
    return LogChannel()
