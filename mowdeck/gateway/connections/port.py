"""The connection port: how the gateway reaches one mower, whatever protocol it speaks."""

from __future__ import annotations

from typing import Literal, Protocol, TypeVar

import msgspec
from prometheus_client import CollectorRegistry

from contracts.v1 import CommandEnvelope, MowerRegistration, MowerState
from mowdeck.devices.automower import AutomowerEndpoints
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.errors import MowdeckError
from mowdeck.gateway.connections.credentials import Credentials
from mowdeck.gateway.connections.device_session import DeviceSessions
from mowdeck.gateway.connections.link_limits import LinkLimits, LinkViolations
from mowdeck.kit.background import BackgroundTasks

__all__ = [
    "CommandOutcome",
    "CommandTimeoutError",
    "ConnectionDeps",
    "ConnectionError",
    "ConnectionEvents",
    "ConnectionFactory",
    "LinkDownError",
    "MowerConnection",
    "connection_options",
]


Options = TypeVar("Options")


class ConnectionError(MowdeckError):
    """A command could not be delivered to, or answered by, the mower."""


def connection_options(registration: MowerRegistration, model: type[Options]) -> Options:
    """The registration's connection options as ``model``; a ``ConnectionError`` naming
    the kind and what is wrong (Fleet checked them, but a stored one may be older)."""
    try:
        return msgspec.convert(registration.connection.options, model)
    except msgspec.ValidationError as err:
        kind = registration.connection.kind
        raise ConnectionError(f"invalid {kind} connection options: {err}") from err


class LinkDownError(ConnectionError):
    """The link to the mower is down; nothing was sent."""


class CommandTimeoutError(ConnectionError):
    """The mower did not answer within the timeout; it may or may not have acted."""


class LinkLostError(CommandTimeoutError):
    """The link dropped after the command was sent; the mower may or may not have acted."""


class CommandOutcome(msgspec.Struct, frozen=True):
    """What the mower said about one command.

    ``rejected``: the adapter did not send it, since its protocol cannot do that kind (the
    reason names the kind and the protocol).
    """

    status: Literal["executed", "failed", "rejected"]
    reason: str | None = None


class ConnectionEvents(Protocol):
    """What a connection reports; called on the event loop, must not block."""

    def on_state(self, state: MowerState) -> None:
        """The mower reported a state."""

    def on_link(self, up: bool, reason: str | None) -> None:
        """The link came up (``up``) or went down, with a reason."""


class MowerConnection(Protocol):
    """One mower's link. Reconnects by itself with backoff until ``close()``."""

    @property
    def connected(self) -> bool:
        """True while the link is up."""

    async def open(self) -> None:
        """Start connecting (returns at once; link changes go to ``on_link``)."""

    async def send(self, envelope: CommandEnvelope, *, timeout: float) -> CommandOutcome:
        """Send a command and wait for the mower's outcome.

        Raises ``LinkDownError`` when not connected and ``CommandTimeoutError`` when the
        mower does not answer within ``timeout`` seconds.
        """

    async def close(self) -> None:
        """Close the link for good."""


class ConnectionDeps:
    """What the device links of one gateway share, owned by the gateway's composition.

    The hosts they may dial (``MOWDECK_GATEWAY_DEVICE_HOSTS``), the HTTP session they
    dial through (checked against those hosts, no redirects), the credentials they log in
    with (``MOWDECK_GATEWAY_CREDENTIALS_DIR``), and the tasks their pings and closes run
    in. Nothing of it lives at module level: two gateways in one process
    (the tests', the demo's) share nothing, and one's stop ends only its own.
    ``automower``: the Automower Connect cloud's endpoints (``MOWDECK_AUTOMOWER_*``);
    ``shared``: what the links of one kind share, by kind (the automower account links);
    ``registry``: the gateway's metrics registry, for what an adapter counts of its own;
    ``limits``: what a device may send on its link (``link_limits``), and ``violations``
    counts the links closed for breaking them.
    """

    __slots__ = (
        "automower",
        "background",
        "credentials",
        "hosts",
        "limits",
        "registry",
        "sessions",
        "shared",
        "violations",
    )

    def __init__(
        self,
        hosts: DeviceHosts,
        credentials: Credentials | None = None,
        *,
        automower: AutomowerEndpoints | None = None,
        registry: CollectorRegistry | None = None,
        limits: LinkLimits | None = None,
    ) -> None:
        self.hosts = hosts
        self.limits = limits or LinkLimits()
        self.violations = LinkViolations(registry)
        self.registry = registry  # the gateway's: adapters' metrics of their own
        self.credentials = credentials or Credentials(None)
        self.automower = automower or AutomowerEndpoints()
        self.shared: dict[str, object] = {}
        self.sessions = DeviceSessions(hosts)
        self.background = BackgroundTasks()

    async def close(self, timeout: float = 5.0) -> None:
        """After the links are closed: end their background work, then the session."""
        await self.background.finish(timeout=timeout)
        await self.sessions.close()


class ConnectionFactory(Protocol):
    """Builds a connection for a registration; registered under a connection kind.

    A connection requests only what ``deps.hosts`` (``MOWDECK_GATEWAY_DEVICE_HOSTS``)
    allows, every time it connects, and follows no redirect: an allowed endpoint must not
    be able to send the gateway elsewhere (``deps.sessions`` does both for HTTP).
    """

    def __call__(
        self,
        registration: MowerRegistration,
        events: ConnectionEvents,
        *,
        deps: ConnectionDeps,
    ) -> MowerConnection:
        """A new, not yet opened connection."""
