"""The delivery worker's settings: the lease, concurrency, backoff, polling and retention.

``DeliverySettings`` extends ``ChannelSettings``, so ``NotificationsSettings`` can extend
it in turn and read everything with one ``load_settings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated

import msgspec

from mowdeck.kit.settings import load_settings
from mowdeck.notifications.delivery.channels.settings import ChannelSettings

__all__ = ["DeliverySettings", "load_delivery_settings"]


class DeliverySettings(ChannelSettings, frozen=True, kw_only=True):
    """How the delivery workers claim, send, retry and prune."""

    # A claimed delivery not recorded within this is claimed again (a worker died).
    notifications_lease_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    # Sends in flight per worker.
    notifications_delivery_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 64
    # Backoff of a transient failure: the first wait, doubled per attempt up to the cap.
    notifications_retry_initial_seconds: Annotated[float, msgspec.Meta(gt=0, le=86400)] = 30.0
    notifications_retry_max_seconds: Annotated[float, msgspec.Meta(gt=0, le=7 * 86400)] = 3600.0
    # Sends of one delivery before it fails for good.
    notifications_max_attempts: Annotated[int, msgspec.Meta(ge=1, le=100)] = 8
    # A worker looks for due rows at least this often (a lost NOTIFY, a retry coming due).
    notifications_delivery_poll_seconds: Annotated[float, msgspec.Meta(gt=0, le=300)] = 1.0
    # Finished deliveries are kept this long.
    notifications_delivery_retention_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] = 7

    def __post_init__(self) -> None:
        if self.notifications_retry_max_seconds < self.notifications_retry_initial_seconds:
            raise ValueError(
                "MOWDECK_NOTIFICATIONS_RETRY_MAX_SECONDS must not be below"
                " MOWDECK_NOTIFICATIONS_RETRY_INITIAL_SECONDS"
            )

    @property
    def lease(self) -> timedelta:
        """``notifications_lease_seconds`` as a timedelta."""
        return timedelta(seconds=self.notifications_lease_seconds)

    @property
    def delivery_retention(self) -> timedelta:
        """``notifications_delivery_retention_days`` as a timedelta."""
        return timedelta(days=self.notifications_delivery_retention_days)


def load_delivery_settings(environ: Mapping[str, str] | None = None) -> DeliverySettings:
    """``DeliverySettings`` from ``MOWDECK_*`` variables."""
    return load_settings(DeliverySettings, environ)
