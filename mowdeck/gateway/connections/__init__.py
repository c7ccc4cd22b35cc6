"""Connections from the gateway to mowers: one port, adapters found by connection kind."""

from mowdeck.gateway.connections.adapters import (
    ConnectionAdapters,
    UndeclaredConnectionKindError,
    UnknownConnectionKindError,
)
from mowdeck.gateway.connections.port import (
    CommandOutcome,
    CommandTimeoutError,
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
    "ConnectionError",
    "ConnectionEvents",
    "ConnectionFactory",
    "LinkDownError",
    "LinkLostError",
    "MowerConnection",
    "UndeclaredConnectionKindError",
    "UnknownConnectionKindError",
]
