"""The bus's errors, in a module of their own so every kit module can raise them."""

from __future__ import annotations

from mowdeck.errors import MowdeckError

__all__ = ["AckTimeoutError", "BusError", "ExpiredCommandError", "PublishRefusedError"]


class BusError(MowdeckError):
    """The bus refused or failed an operation."""


class ExpiredCommandError(BusError):
    """A publisher tried to send a command that has already expired (ADR 0009)."""


class PublishRefusedError(BusError):
    """The stream answered a publish with an error (or no stream took the subject).

    ``code`` and ``err_code`` are JetStream's (``503`` when no stream answered);
    ``description`` its words.
    """

    def __init__(self, description: str, *, code: int = 0, err_code: int = 0) -> None:
        super().__init__(description)
        self.description = description
        self.code = code
        self.err_code = err_code


class AckTimeoutError(BusError):
    """The stream's acknowledgement of a publish did not come within its deadline."""
