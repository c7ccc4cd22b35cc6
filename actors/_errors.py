"""The package's exceptions, under one root."""

from __future__ import annotations

__all__ = [
    "ActorsError",
    "DispatcherNotRunningError",
    "GaveUpError",
    "SupervisorClosedError",
    "SupervisorError",
]


class ActorsError(Exception):
    """Root of the actor runtime's errors."""


class DispatcherNotRunningError(ActorsError, RuntimeError):
    """An actor was started on a dispatcher that is not running."""


class SupervisorError(ActorsError):
    """Root of the supervisor's errors."""


class GaveUpError(SupervisorError):
    """The key's actor kept failing; the supervisor no longer starts it."""


class SupervisorClosedError(SupervisorError):
    """The supervisor has been stopped."""
