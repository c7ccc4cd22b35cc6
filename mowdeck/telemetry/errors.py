"""The telemetry package's exceptions."""

from mowdeck.errors import MowdeckError

__all__ = ["QueryLimitError", "StoreError", "TelemetryError"]


class TelemetryError(MowdeckError):
    """Root of the telemetry package's errors."""


class StoreError(TelemetryError):
    """The telemetry store failed an operation."""


class QueryLimitError(TelemetryError):
    """A query asks for more than the configured limits allow."""
