"""Connection adapters by kind, from the ``mowdeck.connections`` entry point group.

Which option of a kind names its device is the kind's declaration (``mowdeck/devices/
kinds.py``), read by Fleet too; an adapter only dials.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points

from mowdeck.devices.kinds import ConnectionKinds
from mowdeck.errors import MowdeckError
from mowdeck.gateway.connections.port import ConnectionFactory

__all__ = [
    "ENTRY_POINT_GROUP",
    "ConnectionAdapters",
    "UndeclaredConnectionKindError",
    "UnknownConnectionKindError",
]

ENTRY_POINT_GROUP = "mowdeck.connections"


class UnknownConnectionKindError(MowdeckError):
    """No adapter is installed for a connection kind."""


class UndeclaredConnectionKindError(MowdeckError):
    """An adapter is installed for a kind no ``ConnectionKind`` declares."""


class ConnectionAdapters:
    """The installed connection adapters; plug-ins add kinds through entry points."""

    def __init__(self, factories: Mapping[str, ConnectionFactory]) -> None:
        self._factories = dict(factories)

    @classmethod
    def from_entry_points(cls) -> ConnectionAdapters:
        """Every adapter installed in this environment."""
        found: dict[str, ConnectionFactory] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            found[ep.name] = ep.load()
        return cls(found)

    @property
    def kinds(self) -> frozenset[str]:
        """The connection kinds that can be used."""
        return frozenset(self._factories)

    def check_declared(self, kinds: ConnectionKinds) -> None:
        """Raise ``UndeclaredConnectionKindError`` for an adapter whose kind is not declared.

        The declaration says which option holds the device's URL: without it the device
        hosts could not be checked for that adapter's connections.
        """
        undeclared = sorted(self.kinds - kinds.names)
        if undeclared:
            raise UndeclaredConnectionKindError(
                f"connection adapters without a declared kind: {', '.join(undeclared)} "
                "(declare a ConnectionKind under the mowdeck.connection_kinds entry points)"
            )

    def factory(self, kind: str) -> ConnectionFactory:
        """The factory of ``kind``."""
        try:
            return self._factories[kind]
        except KeyError:
            installed = ", ".join(sorted(self._factories))
            raise UnknownConnectionKindError(
                f"no connection adapter for kind {kind!r} (installed: {installed})"
            ) from None
