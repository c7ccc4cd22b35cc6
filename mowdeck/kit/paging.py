"""Pages of a list endpoint: ``limit`` and an opaque ``after`` cursor in, ``has_more`` out.

Every list endpoint reads ``?limit=&after=`` with ``page_params`` and answers its items
with ``next_after`` (the cursor of the next page, or null) and ``has_more``. A cursor is
the keyset position of the page's last item, JSON in URL-safe base64: clients pass it
back unchanged and must not build one; a cursor this API did not give out is a 400
problem naming ``after``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import msgspec

from mowdeck.kit.http import Problem

__all__ = ["Cursor", "PageParams", "cursor_of", "page_params", "read_cursor", "split_page"]

Cursor = Annotated[str, msgspec.Meta(min_length=1)]
"""``after`` as the documents describe it: never empty (an empty one is a 400)."""

T = TypeVar("T")
C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class PageParams:
    """The page asked for: at most ``limit`` items after the raw cursor ``after``."""

    limit: int
    after: str | None


def _bad(field: str, detail: str) -> Problem:
    return Problem(400, "Bad Request", detail, type_="bad-request", extra={"field": field})


def page_params(
    query: Mapping[str, str], *, default: int, maximum: int, cursor_names: Sequence[str] = ()
) -> PageParams:
    """``limit`` (1 to ``maximum``, ``default`` when absent) and ``after`` of ``query``.

    ``cursor_names`` are older names of ``after`` still read (``after`` wins).
    """
    raw = query.get("limit")
    if raw is None:
        limit = default
    elif raw.isascii() and raw.isdigit() and 1 <= int(raw) <= maximum:
        limit = int(raw)
    else:
        raise _bad("limit", f"`limit` must be a whole number from 1 to {maximum}")
    name = next((n for n in ("after", *cursor_names) if n in query), None)
    after = None if name is None else query[name]
    if after == "":
        raise _bad(name or "after", f"`{name}` is empty: leave it out for the first page")
    return PageParams(limit, after)


def cursor_of(position: Any) -> str:
    """The opaque cursor of a keyset ``position`` (any value msgspec encodes)."""
    return base64.urlsafe_b64encode(msgspec.json.encode(position)).decode().rstrip("=")


def read_cursor(raw: str, position_type: type[C], field: str = "after") -> C:
    """The keyset position a cursor of ``cursor_of`` holds; a 400 problem for any other."""
    try:
        doc = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        return msgspec.json.decode(doc, type=position_type)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise _bad(field, f"`{field}` is not a cursor this API gave out") from None


def split_page(rows: Sequence[T], limit: int) -> tuple[list[T], bool]:
    """The page of ``rows`` (read with ``limit + 1``) and whether more follow."""
    return list(rows[:limit]), len(rows) > limit
