"""The telemetry package's exceptions."""

from mowdeck.errors import MowdeckError

__all__ = [
    "QueryLimitError",
    "StoreConflictError",
    "StoreError",
    "StoreRejectedError",
    "StoreTimeoutError",
    "TelemetryError",
]


class TelemetryError(MowdeckError):
    """Root of the telemetry package's errors."""


class StoreError(TelemetryError):
    """The telemetry store failed an operation."""


class StoreRejectedError(StoreError):
    """The store refused the data itself (PostgreSQL's class 22): retrying cannot help."""


class StoreTimeoutError(StoreError):
    """PostgreSQL cancelled the statement: it ran past the statement timeout."""


class StoreConflictError(StoreError):
    """The transaction lost a race with another writer (a deadlock, a serialization
    failure) and was rolled back: the same work, tried again at once, goes through."""


class QueryLimitError(TelemetryError):
    """A query asks for more than the configured limits allow."""
