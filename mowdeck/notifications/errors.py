"""The notifications package's exceptions, rooted in ``NotificationsError``."""

from __future__ import annotations

from mowdeck.errors import MowdeckError

__all__ = [
    "NotificationsError",
    "StoreConflictError",
    "StoreError",
    "StoreRejectedError",
    "TemplateError",
]


class NotificationsError(MowdeckError):
    """Root of the notifications package's errors."""


class StoreError(NotificationsError):
    """The notification store failed an operation."""


class StoreRejectedError(StoreError):
    """The store refused the data itself (PostgreSQL's class 22): retrying cannot help."""


class StoreConflictError(StoreError):
    """The transaction lost a race with another writer and was rolled back: the same work,
    planned again from freshly locked rows, goes through."""


class TemplateError(NotificationsError):
    """A message key, a locale or a parameter a template needs is missing or malformed."""
