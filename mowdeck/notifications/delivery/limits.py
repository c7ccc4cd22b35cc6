"""Notifications' rate limit: new channel targets per user, on each replica.

Registering a target resolves its host (ntfy) and stores a row every later notification
of the user is delivered to; a user adds a handful in a lifetime. Listing and deleting
targets, preferences and marking items read change one row of the caller's own and
reach nothing outside: they are not limited. (Notifications has no test send.)
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from mowdeck.authn import principal
from mowdeck.kit.ratelimit import Limit, MemoryLimiter, RateLimit, RateLimitMetrics, RequestLimit
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["target_creations"]


def target_creations(settings: NotificationsSettings, registry: CollectorRegistry) -> RequestLimit:
    """The limit on ``POST /v1/notifications/targets`` per user, refusals on ``registry``."""
    s = settings
    limit = RateLimit(
        "targets_per_user",
        Limit(s.notifications_targets_per_user_rate, s.notifications_targets_per_user_burst),
        MemoryLimiter(),
        RateLimitMetrics(registry, service="notifications"),
        what="new targets from this user",
    )
    return RequestLimit(limit, lambda request: principal(request).user_id)
