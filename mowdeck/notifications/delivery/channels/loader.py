"""The installed channels, from the ``mowdeck.notification_channels`` entry point group.

``Channels`` is the delivery worker's: the settings' channels with the HTTP session they
share, loaded when it starts and closed when it stops.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import aiohttp

from mowdeck.errors import MowdeckError
from mowdeck.notifications.delivery.channels.http import open_channel_session
from mowdeck.notifications.delivery.channels.port import NotificationChannel
from mowdeck.notifications.delivery.channels.settings import ChannelSettings

__all__ = [
    "ENTRY_POINT_GROUP",
    "ChannelLoadError",
    "ChannelLookup",
    "Channels",
    "NotificationChannels",
    "load_channels",
]

ENTRY_POINT_GROUP = "mowdeck.notification_channels"

EntryPoints = Callable[..., Iterable[importlib.metadata.EntryPoint]]


class ChannelLoadError(MowdeckError):
    """One or more enabled channels could not be created; the message names each one."""

    def __init__(self, failures: Mapping[str, str]) -> None:
        super().__init__(
            "notification channels failed to load: "
            + "; ".join(f"{name}: {why}" for name, why in sorted(failures.items()))
        )
        self.failures = dict(failures)


class ChannelLookup(Protocol):
    """Where a sender finds a channel by name."""

    def get(self, name: str) -> NotificationChannel | None:
        """The channel called ``name``, if it was started."""
        ...


class NotificationChannels:
    """The started channels by name."""

    def __init__(self, channels: Mapping[str, NotificationChannel]) -> None:
        self._channels = dict(channels)

    @property
    def names(self) -> frozenset[str]:
        """The channel names deliveries may carry."""
        return frozenset(self._channels)

    def get(self, name: str) -> NotificationChannel | None:
        """The channel called ``name``, if it was started."""
        return self._channels.get(name)

    async def close(self) -> None:
        """Close every channel (the shared session is the caller's)."""
        for channel in self._channels.values():
            await channel.close()


async def load_channels(
    settings: ChannelSettings,
    http_session: aiohttp.ClientSession,
    *,
    entry_points: EntryPoints = importlib.metadata.entry_points,
) -> NotificationChannels:
    """Create every channel of ``notifications_channels``; raise naming each that fails."""
    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    started: dict[str, NotificationChannel] = {}
    failures: dict[str, str] = {}
    for name in dict.fromkeys(settings.notifications_channels):
        ep = found.get(name)
        if ep is None:
            installed = ", ".join(sorted(found)) or "none"
            failures[name] = f"no entry point in {ENTRY_POINT_GROUP} (installed: {installed})"
            continue
        try:
            channel = ep.load()(settings, http_session)
        except Exception as err:
            failures[name] = f"entry point {ep.value} raised {type(err).__name__}: {err}"
            continue
        if channel.name != name:
            failures[name] = f"entry point {ep.value} made a channel named {channel.name!r}"
            await channel.close()
            continue
        started[name] = channel
    if failures:
        for channel in started.values():
            await channel.close()
        raise ChannelLoadError(failures)
    return NotificationChannels(started)


class Channels:
    """The channels of ``settings`` and the HTTP session they share: none before
    ``start()`` (a send then answers retry), all closed by ``stop()``."""

    def __init__(self, settings: ChannelSettings) -> None:
        self._settings = settings
        self._started = NotificationChannels({})
        self._session: aiohttp.ClientSession | None = None

    def get(self, name: str) -> NotificationChannel | None:
        """The channel called ``name``, if it was started."""
        return self._started.get(name)

    @property
    def application_server_key(self) -> str | None:
        """The VAPID public key of the ``webpush`` channel, if it was started."""
        key: str | None = getattr(self.get("webpush"), "application_server_key", None)
        return key

    async def start(self) -> None:
        """Open the session and create every channel of the settings (raising as
        ``load_channels`` does, with the session closed again)."""
        self._session = session = open_channel_session(self._settings)
        try:
            self._started = await load_channels(self._settings, session)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close the channels, then their session."""
        started, self._started = self._started, NotificationChannels({})
        await started.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
