"""What the tests of a device connection share: the hosts they may dial, a recorder of
what the link reports, a command for a registered mower."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contracts.v1 import Command, CommandEnvelope, MowerRegistration, MowerState
from mowdeck.devices.endpoints import DeviceHosts

__all__ = ["HOSTS", "Recorder", "envelope"]

# The test servers (simulators, stand-in clouds, brokers) listen on 127.0.0.1, any port.
HOSTS = DeviceHosts(["127.0.0.1"])


class Recorder:
    """ConnectionEvents that remembers everything."""

    def __init__(self) -> None:
        self.states: list[MowerState] = []
        self.links: list[tuple[bool, str | None]] = []

    def on_state(self, state: MowerState) -> None:
        self.states.append(state)

    def on_link(self, up: bool, reason: str | None) -> None:
        self.links.append((up, reason))


def envelope(reg: MowerRegistration, command: Command, ttl: float = 30) -> CommandEnvelope:
    """``command`` for ``reg``'s mower, issued now, expiring in ``ttl`` seconds."""
    return CommandEnvelope.issue(
        mower_id=reg.mower_id,
        account_id=reg.account_id,
        command=command,
        issued_by="test",
        now=datetime.now(UTC),
        ttl=timedelta(seconds=ttl),
    )
