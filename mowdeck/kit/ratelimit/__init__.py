"""Rate limits: token buckets per principal, kept in this process or in a shared store.

``take`` is the arithmetic (pure); ``Limiter`` the port, with ``MemoryLimiter`` (this
process), ``PostgresLimiter`` (every replica, one statement per write),
``BatchingLimiter`` (concurrent takes of a key in one write) and ``FallbackLimiter``
(the shared one, or the local one while the store fails); ``RateLimit`` and
``RequestLimit`` apply a limit to requests with a 429 and a metric.
"""

from mowdeck.kit.ratelimit._batching import BatchingLimiter
from mowdeck.kit.ratelimit._bucket import (
    ALLOWED,
    EPSILON,
    Bucket,
    Limit,
    Verdict,
    refill,
    refused,
    take,
    take_many,
)
from mowdeck.kit.ratelimit._fallback import FallbackLimiter
from mowdeck.kit.ratelimit._http import RateLimit, RateLimitMetrics, RequestLimit, rate_limited
from mowdeck.kit.ratelimit._memory import MemoryLimiter
from mowdeck.kit.ratelimit._ports import Limiter, LimiterUnavailableError, TokenStore
from mowdeck.kit.ratelimit._postgres import TABLE_SQL, PostgresLimiter

__all__ = [
    "ALLOWED",
    "EPSILON",
    "TABLE_SQL",
    "BatchingLimiter",
    "Bucket",
    "FallbackLimiter",
    "Limit",
    "Limiter",
    "LimiterUnavailableError",
    "MemoryLimiter",
    "PostgresLimiter",
    "RateLimit",
    "RateLimitMetrics",
    "RequestLimit",
    "TokenStore",
    "Verdict",
    "rate_limited",
    "refill",
    "refused",
    "take",
    "take_many",
]
