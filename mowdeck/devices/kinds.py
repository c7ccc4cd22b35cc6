"""The connection kinds Fleet accepts: those of the installed gateway adapters."""

from __future__ import annotations

from importlib.metadata import entry_points

import structlog

from mowdeck.gateway.connections.adapters import ENTRY_POINT_GROUP, ConnectionAdapters

__all__ = ["installed_connection_kinds", "installed_device_id_options", "installed_url_options"]

log = structlog.get_logger("mowdeck.fleet")


def installed_connection_kinds() -> frozenset[str]:
    """The connection kinds of the installed gateway adapters (entry points)."""
    try:
        return ConnectionAdapters.from_entry_points().kinds
    except Exception:
        # An adapter that fails to import is still declared; Fleet only stores the kind.
        log.warning("a connection adapter failed to load; using declared kinds", exc_info=True)
        return frozenset(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def installed_url_options() -> dict[str, str]:
    """The option holding the device URL, by kind, of the installed adapters."""
    try:
        return ConnectionAdapters.from_entry_points().url_options
    except Exception:
        # Without the adapter Fleet cannot know which option dials: the gateway's own
        # check at apply still refuses a URL it does not allow.
        log.warning("a connection adapter failed to load; its URLs go unchecked", exc_info=True)
        return {}


def installed_device_id_options() -> dict[str, str]:
    """The option naming the device by id, by kind, of the installed adapters."""
    try:
        return ConnectionAdapters.from_entry_points().device_id_options
    except Exception:
        # The gateway still holds one link per device id at apply.
        log.warning(
            "a connection adapter failed to load; its device ids go unchecked", exc_info=True
        )
        return {}
