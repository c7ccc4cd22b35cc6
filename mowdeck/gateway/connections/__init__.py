"""Connections from the gateway to mowers: one port, adapters found by connection kind."""

from mowdeck.gateway.connections.adapters import (
    ConnectionAdapters,
    UndeclaredConnectionKindError,
    UnknownConnectionKindError,
)
from mowdeck.gateway.connections.port import (
    CommandOutcome,
    CommandTimeoutError,
    ConnectionDeps,
    ConnectionError,
    ConnectionEvents,
    ConnectionFactory,
    LinkDownError,
    LinkLostError,
    MowerConnection,
)

__all__ = [
    "CommandOutcome",
    "CommandTimeoutError",
    "ConnectionAdapters",
    "ConnectionDeps",
    "ConnectionError",
    "ConnectionEvents",
    "ConnectionFactory",
    "LinkDownError",
    "LinkLostError",
    "MowerConnection",
    "UndeclaredConnectionKindError",
    "UnknownConnectionKindError",
]
