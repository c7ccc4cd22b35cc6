"""The ``openmower`` connection kind's options, read alike by Fleet (a 422) and the gateway.

OpenMower (open_mower_ros) speaks MQTT through its ``xbot_monitoring`` node: the mower
publishes to a broker, usually a Mosquitto beside it, under an optional topic prefix
(``external_mqtt_topic_prefix``, to which xbot_monitoring appends ``/``). One broker may
serve several mowers, each under its own prefix: the broker and the prefix together name
the device (the kind's endpoint key). See docs/adapters.md.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from mowdeck.devices.credentials import CredentialName

__all__ = ["Datum", "OpenMowerOptions", "normalised_prefix"]

# No MQTT wildcard, no NUL, no leading slash (xbot_monitoring's topics start with the
# prefix itself): a prefix is plain topic levels.
_PREFIX = r"^([^+#/\u0000][^+#\u0000]*)?$"
# A broker with its port (MQTT has no default a URL parser knows, and the endpoint key must
# read one broker one way); no user information, which would be a secret in the options.
_BROKER = r"^mqtts?://[^/?#@]+:[0-9]{1,5}/?$"


class Datum(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The WGS84 point OpenMower's map origin is at (its ``OM_DATUM_LAT``/``OM_DATUM_LONG``)."""

    lat: Annotated[float, msgspec.Meta(ge=-90.0, le=90.0)]
    lon: Annotated[float, msgspec.Meta(ge=-180.0, le=180.0)]


class OpenMowerOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``connection.options`` of kind ``openmower``; nothing secret belongs here.

    ``broker`` is the option the kind declares as its device's URL (checked against
    ``MOWDECK_GATEWAY_DEVICE_HOSTS``); ``credentials`` names a file in the gateway's
    ``MOWDECK_GATEWAY_CREDENTIALS_DIR`` holding the broker's username and password.
    """

    broker: Annotated[str, msgspec.Meta(pattern=_BROKER, max_length=300)]
    prefix: Annotated[str, msgspec.Meta(pattern=_PREFIX, max_length=200)] = ""
    credentials: CredentialName | None = None
    datum: Datum | None = None
    # robot_state comes several times a second; nothing for this long: the link is down.
    stale_seconds: Annotated[float, msgspec.Meta(ge=1, le=600)] = 10.0
    connect_timeout_seconds: Annotated[float, msgspec.Meta(ge=0.5, le=300)] = 5.0
    backoff_initial_seconds: Annotated[float, msgspec.Meta(ge=0.05, le=300)] = 0.5
    backoff_max_seconds: Annotated[float, msgspec.Meta(ge=0.5, le=3600)] = 30.0

    def __post_init__(self) -> None:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must not be below backoff_initial_seconds")

    @property
    def topic_prefix(self) -> str:
        """The prefix as xbot_monitoring writes it before each topic."""
        return normalised_prefix(self.prefix)


def normalised_prefix(prefix: str) -> str:
    """``prefix`` as topics carry it: empty, or ending in exactly one ``/``."""
    stripped = prefix.strip().rstrip("/")
    return f"{stripped}/" if stripped else ""
