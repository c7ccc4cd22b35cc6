"""The ``automower`` connection kind's options and cloud endpoints (docs/adapters.md).

Husqvarna's Automower Connect API is a cloud service: the gateway reaches no mower
directly but the vendor's REST API, WebSocket and OAuth2 token endpoint, with an
application's client id and secret. A mower is named by the API's own id
(``vendor_id``, the ``id`` of ``GET /mowers``), the kind's endpoint key: one registration
holds each. The endpoints are settings of the gateway (``MOWDECK_AUTOMOWER_TOKEN_URL``,
``_API_URL``, ``_WS_URL``), checked against ``MOWDECK_GATEWAY_DEVICE_HOSTS`` like any
device host; the defaults are the vendor's production ones.
"""

from __future__ import annotations

from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from mowdeck.devices.credentials import CredentialName

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_TOKEN_URL",
    "DEFAULT_WS_URL",
    "AutomowerEndpoints",
    "AutomowerOptions",
]

# The vendor's production endpoints (as the aioautomower client names them, const.py).
DEFAULT_TOKEN_URL = "https://api.authentication.husqvarnagroup.dev/v1/oauth2/token"  # noqa: S105
DEFAULT_API_URL = "https://api.amc.husqvarna.dev/v1"
DEFAULT_WS_URL = "wss://ws.openapi.husqvarna.dev/v1"

# The API's mower ids are UUIDs today; anything path-safe is taken, nothing that could
# leave ``/mowers/{id}``.
_VENDOR_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$"
# An IANA zone name: letters, digits, "_", "-", "+" in "/"-separated parts, no "..".
_ZONE = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9][A-Za-z0-9_+-]*)*$"


class AutomowerOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``connection.options`` of kind ``automower``; nothing secret belongs here.

    ``credentials`` names a file in ``MOWDECK_GATEWAY_CREDENTIALS_DIR`` holding the
    application's ``{"client_id": ..., "client_secret": ...}``; mowers naming the same
    credential share one account link (one token, one WebSocket, one request budget).
    """

    vendor_id: Annotated[str, msgspec.Meta(pattern=_VENDOR_ID)]
    credentials: CredentialName
    # The IANA zone of the mower's clock (``Europe/Berlin``): the API gives some times in
    # the mower's local time. Without it those times are kept as wall times only.
    time_zone: Annotated[str, msgspec.Meta(pattern=_ZONE, max_length=64)] | None = None
    # Whose calendar rules the mower. ``mowdeck`` (the default): Mowdeck's schedules, so
    # ``return_to_dock`` parks it until further notice and its own calendar never starts
    # it again; ``mower``: the calendar kept in the mower (``return_to_dock`` parks it
    # until its next scheduled start), for an account that schedules in the vendor's app.
    calendar: Literal["mowdeck", "mower"] = "mowdeck"

    def __post_init__(self) -> None:
        if self.time_zone is not None:
            try:
                ZoneInfo(self.time_zone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"time_zone: unknown time zone {self.time_zone!r}") from None

    @property
    def zone(self) -> ZoneInfo | None:
        """The mower's time zone, when the options name one."""
        return ZoneInfo(self.time_zone) if self.time_zone is not None else None


class AutomowerEndpoints(msgspec.Struct, frozen=True, kw_only=True):
    """Where the Automower Connect cloud is (the gateway's settings)."""

    token_url: str = DEFAULT_TOKEN_URL
    api_url: str = DEFAULT_API_URL  # the REST base, ending ``/v1``
    ws_url: str = DEFAULT_WS_URL

    def __post_init__(self) -> None:
        if not self.api_url.rstrip("/").endswith("/v1"):
            raise ValueError(f"MOWDECK_AUTOMOWER_API_URL must end in /v1 (got {self.api_url!r})")
        for name, url, schemes in (
            ("TOKEN_URL", self.token_url, ("https", "http")),
            ("API_URL", self.api_url, ("https", "http")),
            ("WS_URL", self.ws_url, ("wss", "ws")),
        ):
            if url.partition("://")[0] not in schemes:
                raise ValueError(
                    f"MOWDECK_AUTOMOWER_{name} must be a {' or '.join(schemes)} URL (got {url!r})"
                )

    @property
    def urls(self) -> tuple[str, str, str]:
        """The three URLs, to check against the device hosts."""
        return (self.token_url, self.api_url, self.ws_url)
