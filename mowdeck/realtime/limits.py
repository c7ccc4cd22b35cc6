"""Realtime's rate limits: stream tickets per user, sign-in codes per client address.

Both are kept on each replica (a ticket costs a key-value write, a sign-in attempt a
lookup; neither is worth a shared store): with several replicas behind a balancer a
caller may get up to that many times the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from mowdeck.authn import principal
from mowdeck.kit.client_address import TrustedProxies
from mowdeck.kit.ratelimit import Limit, MemoryLimiter, RateLimit, RateLimitMetrics, RequestLimit
from mowdeck.realtime.settings import RealtimeSettings

__all__ = ["RealtimeLimits", "realtime_limits"]


@dataclass(frozen=True)
class RealtimeLimits:
    """The limits the routes apply."""

    tickets: RequestLimit
    sign_ins: RequestLimit


def realtime_limits(settings: RealtimeSettings, registry: CollectorRegistry) -> RealtimeLimits:
    """The limits of ``settings``, refusals counted on ``registry``."""
    s = settings
    metrics = RateLimitMetrics(registry, service="realtime")
    buckets = MemoryLimiter()
    tickets = RateLimit(
        "tickets_per_user",
        Limit(s.realtime_tickets_per_user_rate, s.realtime_tickets_per_user_burst),
        buckets,
        metrics,
        what="stream tickets for this user",
    )
    sign_ins = RateLimit(
        "sign_ins_per_address",
        Limit(s.realtime_sign_ins_per_address_rate, s.realtime_sign_ins_per_address_burst),
        buckets,
        metrics,
        what="sign-in attempts from this address",
    )
    proxies = TrustedProxies(s.realtime_trusted_proxies)
    return RealtimeLimits(
        tickets=RequestLimit(tickets, lambda request: principal(request).user_id),
        sign_ins=RequestLimit(sign_ins, proxies.of),
    )
