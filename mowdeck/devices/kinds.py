"""Connection kinds: what Fleet and the gateway both know of a protocol, without its adapter.

A kind is declared once, as a ``ConnectionKind`` under the ``mowdeck.connection_kinds``
entry point group: its name, the connection option that names its device (a URL,
checked against ``MOWDECK_GATEWAY_DEVICE_HOSTS``, or a vendor's device id), the option
that tells devices behind one URL apart (an MQTT topic prefix), and the type its options
must convert to, so that Fleet answers a malformed registration with a 422 naming the
option rather than the gateway refusing it later. Fleet accepts
registrations of the declared kinds and checks their endpoints; the gateway dials them
through the adapter registered under the same name in ``mowdeck.connections``
(``mowdeck/gateway/connections/``), and refuses to start with an adapter whose kind is
not declared here, since it could not check where that adapter dials.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

import msgspec

from mowdeck.devices.automower import AutomowerOptions
from mowdeck.devices.endpoints import DeviceHosts, EndpointPolicy
from mowdeck.devices.openmower import OpenMowerOptions
from mowdeck.errors import MowdeckError

__all__ = [
    "AUTOMOWER",
    "ENTRY_POINT_GROUP",
    "OPENMOWER",
    "SIMULATOR",
    "ConnectionKind",
    "ConnectionKindError",
    "ConnectionKinds",
]

ENTRY_POINT_GROUP = "mowdeck.connection_kinds"


class ConnectionKindError(MowdeckError):
    """A connection kind is declared wrongly (not a ``ConnectionKind``, or under another name)."""


@dataclass(frozen=True, slots=True)
class ConnectionKind:
    """One protocol as Fleet and the gateway both see it."""

    name: str
    # The option holding the device's URL: checked against the device hosts, and the
    # device's endpoint key (one registration holds each).
    url_option: str | None = None
    # The option naming the device by a vendor's id, for kinds that reach it so.
    device_id_option: str | None = None
    # The option naming one device among several behind one URL (a broker's topic
    # prefix): part of the endpoint key, so one broker serves many mowers.
    scope_option: str | None = None
    # The struct the options must convert to (``msgspec.convert``); None: any object.
    options: type[msgspec.Struct] | None = None


# The device protocol of mowdeck-sim (docs/device-protocol.md), over a WebSocket.
SIMULATOR = ConnectionKind("simulator", url_option="url")
# OpenMower's MQTT interface (xbot_monitoring) through a broker (docs/adapters.md).
OPENMOWER = ConnectionKind(
    "openmower", url_option="broker", scope_option="prefix", options=OpenMowerOptions
)
# Husqvarna's Automower Connect cloud API: a mower named by the vendor's id (docs/adapters.md).
AUTOMOWER = ConnectionKind("automower", device_id_option="vendor_id", options=AutomowerOptions)


class ConnectionKinds:
    """The declared connection kinds, by name."""

    def __init__(self, kinds: Iterable[ConnectionKind]) -> None:
        self._kinds = {kind.name: kind for kind in kinds}

    @classmethod
    def from_entry_points(cls) -> ConnectionKinds:
        """Every kind declared in this environment."""
        found: list[ConnectionKind] = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            kind = ep.load()
            if not isinstance(kind, ConnectionKind) or kind.name != ep.name:
                raise ConnectionKindError(
                    f"entry point {ep.name!r} of {ENTRY_POINT_GROUP} ({ep.value}) is not "
                    f"the ConnectionKind named {ep.name!r}"
                )
            found.append(kind)
        return cls(found)

    @property
    def names(self) -> frozenset[str]:
        """The names of the kinds."""
        return frozenset(self._kinds)

    def policy(self, hosts: DeviceHosts) -> EndpointPolicy:
        """The endpoint policy of these kinds under ``hosts``."""
        kinds = self._kinds.values()
        return EndpointPolicy(
            hosts,
            {k.name: k.url_option for k in kinds if k.url_option is not None},
            {k.name: k.device_id_option for k in kinds if k.device_id_option is not None},
            scope_options={k.name: k.scope_option for k in kinds if k.scope_option is not None},
            option_types={k.name: k.options for k in kinds if k.options is not None},
        )
