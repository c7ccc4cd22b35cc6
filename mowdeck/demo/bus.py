"""The demo's bus: an embedded NATS with one user per service, or the configured one.

Without ``MOWDECK_NATS_URL`` the demo starts its own ``nats-server`` with the users and
permissions ``mowdeck nats-config`` writes (``kit/bus_permissions.py``), fresh random
passwords each run, and no anonymous access: every service connects on its own
connection as its own user, and the admin step (``mowdeck streams``) runs as ``admin``.
With ``MOWDECK_NATS_URL`` the demo keeps to one shared connection with the credentials
``MOWDECK_NATS_*`` name (that server's own users apply), and runs the admin step on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

from mowdeck.commands.nats_config import auth_config, fresh_passwords
from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.embedded import EmbeddedNats
from mowdeck.kit.ports import free_port
from mowdeck.kit.settings import BaseSettings, load_settings

__all__ = ["DemoBus", "start_demo_nats"]


@dataclass
class DemoBus:
    """Where the demo's services connect, and as whom."""

    url: str
    # Per user (embedded server); None: the configured server, one shared connection.
    passwords: dict[str, str] | None = None
    monitor_url: str | None = None
    shared: Bus | None = None

    def env(self, user: str) -> dict[str, str]:
        """The ``MOWDECK_NATS_*`` variables of the service running as ``user``."""
        if self.passwords is None:
            return {}
        return {"MOWDECK_NATS_USER": user, "MOWDECK_NATS_PASSWORD": self.passwords[user]}

    def credentials(self, user: str) -> NatsCredentials | None:
        """``user``'s credentials on the embedded server (None on a configured one)."""
        if self.passwords is None:
            return None
        return NatsCredentials(user=user, password=self.passwords[user])

    async def connect(
        self, stack: contextlib.AsyncExitStack, *, user: str, name: str, fast_path: bool
    ) -> Bus:
        """A connection of ``user``, closed with ``stack`` (a configured server: the shared one)."""
        if self.shared is not None:
            return self.shared
        bus = await Bus.connect(
            self.url,
            name=name,
            fast_path=fast_path,
            credentials=self.credentials(user),
            user=user,
        )
        stack.push_async_callback(bus.drain)
        return bus

    async def admin_step(
        self, stack: contextlib.AsyncExitStack, environ: Mapping[str, str], *, fast_path: bool
    ) -> None:
        """``mowdeck streams``: the streams and the deny-list bucket, before any service."""
        settings = load_settings(BaseSettings, environ)
        if self.passwords is None:
            # The configured server: one connection, shared by every service (as before).
            self.shared = await Bus.connect(
                self.url,
                name="demo",
                fast_path=fast_path,
                credentials=NatsCredentials.from_settings(settings),
            )
            stack.push_async_callback(self.shared.drain)
            await apply_all(self.shared, replicas=settings.stream_replicas)
            return
        admin = await Bus.connect(
            self.url, name="demo-streams", credentials=self.credentials("admin"), user="admin"
        )
        try:
            await apply_all(admin, replicas=settings.stream_replicas)
        finally:
            await admin.drain()


def start_demo_nats(stack: contextlib.ExitStack | contextlib.AsyncExitStack) -> DemoBus:
    """Start the embedded server with every service's user; removed when ``stack`` closes."""
    passwords = fresh_passwords()
    nats = EmbeddedNats(config=auth_config(passwords), monitor_port=free_port())
    stack.callback(nats.close)
    nats.start()
    return DemoBus(url=nats.url, passwords=passwords, monitor_url=nats.monitor_url)
