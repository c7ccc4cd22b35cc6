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

    @property
    def url_options(self) -> dict[str, str]:
        """The option holding the device URL, by kind, of adapters that declare one.

        An adapter declares it as the class attribute ``url_option``; its value is checked
        against ``MOWDECK_GATEWAY_DEVICE_HOSTS`` (``mowdeck/devices/endpoints.py``) by Fleet
        and the gateway.
        """
        found = {kind: getattr(f, "url_option", None) for kind, f in self._factories.items()}
        return {kind: option for kind, option in found.items() if isinstance(option, str)}

    @property
    def device_id_options(self) -> dict[str, str]:
        """The option naming the device by a vendor id, by kind, of adapters that declare one.

        An adapter of a kind that reaches its device by id rather than by URL declares it as
        the class attribute ``device_id_option``: one registration holds each id
        (``endpoints.endpoint_key``).
        """
        found = {kind: getattr(f, "device_id_option", None) for kind, f in self._factories.items()}
        return {kind: option for kind, option in found.items() if isinstance(option, str)}

    def factory(self, kind: str) -> ConnectionFactory:
        """The factory of ``kind``."""
        try:
            return self._factories[kind]
        except KeyError:
            installed = ", ".join(sorted(self._factories))
            raise UnknownConnectionKindError(
                f"no connection adapter for kind {kind!r} (installed: {installed})"
            ) from None
