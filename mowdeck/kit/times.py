"""Times a client sends in a query: parsed one way, and held to a range Mowdeck can mean.

A time far outside that range is never a question about mowers, and it is dangerous:
asyncpg sends ``datetime.max`` as PostgreSQL's ``infinity`` (and ``datetime.min`` as
``-infinity``), so a range that ends there generates bins without end; a time whose offset
pushes it before year 1 cannot be sent at all. Every API checks its times here, before
any query.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

__all__ = ["EARLIEST", "FUTURE_ALLOWANCE", "TimeRefusal", "check_time", "parse_time", "query_range"]

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
"""The earliest time a query may name: the origin of the history's bins; nothing Mowdeck
stores is older."""
FUTURE_ALLOWANCE = timedelta(days=366)
"""How far past now a query may reach: a client asking "until the end of the season" is
answered; one asking until year 9999 is refused."""


class TimeRefusal(ValueError):
    """Why a query's time is refused; ``out_of_range`` tells a malformed time from one
    outside ``EARLIEST`` .. now + ``FUTURE_ALLOWANCE``."""

    def __init__(self, detail: str, *, out_of_range: bool, field: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.out_of_range = out_of_range
        self.field = field  # the query parameter refused, where one is (``query_range``)


def parse_time(name: str, text: str) -> datetime:
    """``text`` as a UTC datetime; raises ``TimeRefusal`` naming ``name``.

    RFC 3339 with its offset (``2026-05-01T00:00:00Z``, ``...+02:00``); a time without
    one is refused, since it would mean the server's time zone.
    """
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise TimeRefusal(
            f"`{name}` must be an RFC 3339 time with its offset, such as 2026-05-01T00:00:00Z",
            out_of_range=False,
        ) from None
    if value.tzinfo is None:
        raise TimeRefusal(
            f"`{name}` must carry its offset, such as 2026-05-01T00:00:00Z", out_of_range=False
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 lies before the first representable time
        raise TimeRefusal(_range_detail(name), out_of_range=True) from None


def check_time(name: str, value: datetime, now: datetime) -> datetime:
    """``value`` if it lies from ``EARLIEST`` to ``now + FUTURE_ALLOWANCE``; else a
    ``TimeRefusal`` naming ``name``."""
    if value < EARLIEST or value > now + FUTURE_ALLOWANCE:
        raise TimeRefusal(_range_detail(name), out_of_range=True)
    return value


def _range_detail(name: str) -> str:
    return (
        f"`{name}` must lie between 2000-01-01T00:00:00Z and one year from now"
        f" ({FUTURE_ALLOWANCE.days} days)"
    )


def query_range(
    params: Mapping[str, str], now: datetime, *, since: str = "from", until: str = "to"
) -> tuple[datetime | None, datetime | None]:
    """A query's optional ``from`` and ``to``: each a time a query may name, ``to`` after
    ``from``; else a ``TimeRefusal`` whose ``field`` names the parameter (the pair is
    refused as out of range: each of its times is well formed)."""
    times: list[datetime | None] = []
    for name in (since, until):
        raw = params.get(name)
        try:
            times.append(None if raw is None else check_time(name, parse_time(name, raw), now))
        except TimeRefusal as err:
            raise TimeRefusal(err.detail, out_of_range=err.out_of_range, field=name) from None
    first, last = times
    if first is not None and last is not None and last <= first:
        raise TimeRefusal(f"`{until}` must be after `{since}`", out_of_range=True, field=until)
    return first, last
