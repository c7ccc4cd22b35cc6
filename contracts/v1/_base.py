"""Shared pieces of the v1 models: the error type, timestamp rules and constrained types."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

import msgspec
from msgspec.structs import force_setattr

__all__ = [
    "AwareDatetime",
    "ContractError",
    "Priority",
    "Struct",
    "ensure_utc",
    "utc_field",
]

AwareDatetime = Annotated[datetime, msgspec.Meta(tz=True)]
"""A timezone-aware timestamp; a naive one fails to decode."""

Priority = Literal["normal", "emergency"]


class ContractError(ValueError):
    """A message breaks a v1 contract rule; the text names the offending field."""


class Struct(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Base of every v1 model: immutable, tolerant of unknown fields.

    Instances are not tracked by the garbage collector (``gc=False``): a model is a tree
    of data that can take part in no reference cycle (it is frozen, and what it holds is
    decoded or built from plain values), so refcounting frees it. Under load thousands
    of messages are in flight at once, and every tracked one is walked again by each
    young collection, with the event loop (and the emergency lane) stopped.
    """


def ensure_utc(field: str, value: datetime) -> datetime:
    """Return ``value`` in UTC, refusing naive timestamps with a field-naming error."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ContractError(f"`{field}` must be timezone-aware (UTC), got a naive timestamp")
    if value.tzinfo is UTC:
        return value
    return value.astimezone(UTC)


def utc_field(obj: msgspec.Struct, field: str) -> None:
    """Normalise ``obj.field`` (a datetime or None) to UTC in place."""
    value = getattr(obj, field)
    if value is None:
        return
    normalised = ensure_utc(field, value)
    if normalised is not value:
        force_setattr(obj, field, normalised)
