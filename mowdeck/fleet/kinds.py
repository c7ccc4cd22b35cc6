"""The connection kinds Fleet accepts: those of the installed gateway adapters."""

from __future__ import annotations

from importlib.metadata import entry_points

import structlog

from mowdeck.gateway.connections.adapters import ENTRY_POINT_GROUP, ConnectionAdapters

__all__ = ["installed_connection_kinds"]

log = structlog.get_logger("mowdeck.fleet")


def installed_connection_kinds() -> frozenset[str]:
    """The connection kinds of the installed gateway adapters (entry points)."""
    try:
        return ConnectionAdapters.from_entry_points().kinds
    except Exception:
        # An adapter that fails to import is still declared; Fleet only stores the kind.
        log.warning("a connection adapter failed to load; using declared kinds", exc_info=True)
        return frozenset(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
