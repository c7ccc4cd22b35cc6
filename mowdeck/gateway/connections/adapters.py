"""Connection adapters by kind, from the ``mowdeck.connections`` entry point group."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points

from mowdeck.errors import MowdeckError
from mowdeck.gateway.connections.port import ConnectionFactory

__all__ = ["ENTRY_POINT_GROUP", "ConnectionAdapters", "UnknownConnectionKindError"]

ENTRY_POINT_GROUP = "mowdeck.connections"


class UnknownConnectionKindError(MowdeckError):
    """No adapter is installed for a connection kind."""


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

    def factory(self, kind: str) -> ConnectionFactory:
        """The factory of ``kind``."""
        try:
            return self._factories[kind]
        except KeyError:
            installed = ", ".join(sorted(self._factories))
            raise UnknownConnectionKindError(
                f"no connection adapter for kind {kind!r} (installed: {installed})"
            ) from None
