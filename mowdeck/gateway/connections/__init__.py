"""Connections from the gateway to mowers: one port, adapters found by connection kind."""

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
from mowdeck.gateway.connections.registry import ConnectionRegistry, UnknownConnectionKindError

__all__ = [
    "CommandOutcome",
    "CommandTimeoutError",
    "ConnectionError",
    "ConnectionEvents",
    "ConnectionFactory",
    "ConnectionRegistry",
    "LinkDownError",
    "LinkLostError",
    "MowerConnection",
    "UnknownConnectionKindError",
]
