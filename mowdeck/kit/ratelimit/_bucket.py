"""Token-bucket arithmetic, pure: every function takes ``now`` (seconds, one clock per key).

A bucket holds up to ``burst`` tokens and gains ``rate`` tokens a second; a request takes
one token, or is refused while less than one is left. A key with no bucket has a full
one, so a bucket that has refilled to full may be forgotten without changing any answer
(``Bucket.full_at``): that is how stores expire idle keys.

Clocks misbehave: a ``now`` earlier than the bucket's time refills nothing and keeps the
bucket's time (so the same seconds are never counted twice), and an idle gap of any size
refills to ``burst`` at most (the elapsed time is capped at a full refill, which also keeps
the product finite in SQL's floating point). The PostgreSQL adapter computes the same in
its statement; the contract tests hold both to these functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "ALLOWED",
    "EPSILON",
    "Bucket",
    "Limit",
    "Verdict",
    "refill",
    "refused",
    "take",
    "take_many",
]

EPSILON = 1e-9
"""Tolerance on "at least one token": ``0.1 * 10`` refilled must count as a whole token."""


@dataclass(frozen=True, slots=True)
class Limit:
    """``rate`` tokens a second (0: the limit is off), at most ``burst`` held at once."""

    rate: float
    burst: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate >= 0):
            raise ValueError(f"a rate is a finite number of tokens a second >= 0, not {self.rate}")
        if not (math.isfinite(self.burst) and self.burst >= 1):
            raise ValueError(f"a burst is a finite number of tokens >= 1, not {self.burst}")

    @property
    def off(self) -> bool:
        """True for a rate of 0: nothing is limited."""
        return self.rate == 0

    @property
    def refill_seconds(self) -> float:
        """How long an empty bucket takes to fill up."""
        return self.burst / self.rate


class Bucket(NamedTuple):
    """``tokens`` left at ``at`` (the latest ``now`` the bucket has seen)."""

    tokens: float
    at: float

    def full_at(self, limit: Limit) -> float:
        """From when on the bucket is full again, and so the same as no bucket at all."""
        return self.at + (limit.burst - self.tokens) / limit.rate


class Verdict(NamedTuple):
    """A take's answer; ``retry_after`` is the seconds until a token is back (refusals)."""

    allowed: bool
    retry_after: float = 0.0


ALLOWED = Verdict(allowed=True)
"""The answer of every take that passed."""


def refill(bucket: Bucket | None, limit: Limit, now: float) -> Bucket:
    """The bucket at ``now``, before anything is taken (a missing bucket is full)."""
    if bucket is None:
        return Bucket(limit.burst, now)
    elapsed = min(max(now - bucket.at, 0.0), limit.refill_seconds)
    tokens = min(limit.burst, bucket.tokens + elapsed * limit.rate)
    return Bucket(tokens, max(bucket.at, now))


def take_many(bucket: Bucket | None, limit: Limit, now: float, count: int) -> tuple[Bucket, int]:
    """``count`` takes at ``now`` at once: the bucket after them and how many passed.

    The same as ``count`` calls of ``take`` at ``now``: whole tokens pass, the rest are
    refused and take nothing (so every refusal sees the same tokens left).
    """
    if limit.off:
        return Bucket(limit.burst, now), count
    current = refill(bucket, limit, now)
    granted = min(count, math.floor(current.tokens + EPSILON))
    return Bucket(max(current.tokens - granted, 0.0), current.at), granted


def take(bucket: Bucket | None, limit: Limit, now: float) -> tuple[Bucket, Verdict]:
    """Take one token at ``now``: the bucket after it, and whether it was allowed."""
    after, granted = take_many(bucket, limit, now, 1)
    return after, (ALLOWED if granted else refused(after.tokens, limit))


def refused(tokens: float, limit: Limit) -> Verdict:
    """The refusal of a take that found ``tokens`` (less than one) in its bucket."""
    return Verdict(allowed=False, retry_after=(1 - tokens) / limit.rate)
