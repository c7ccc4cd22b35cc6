"""The realtime package's exceptions."""

from mowdeck.errors import MowdeckError

__all__ = ["RealtimeError", "StatesUnavailableError", "TicketError"]


class RealtimeError(MowdeckError):
    """Root of the realtime package's errors."""


class TicketError(RealtimeError):
    """A stream ticket is unknown, expired or used already; ``reason`` is a short code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class StatesUnavailableError(RealtimeError):
    """Telemetry's latest states could not be read."""
