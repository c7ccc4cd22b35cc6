"""Fleet's command rate limits: per user on each replica, per account across replicas.

An emergency stop is never limited and never waits for a limiter: ``admit`` answers it
before any bucket is looked at. Ordinary commands take a token from the user's bucket
(this replica's memory), then from the account's (a row of ``fleet_rate_limits``, shared
by every replica, written once for all the account's commands that arrive together).
The user's comes first and lives in memory so that one token's flood is refused without
a round trip and without draining the account's bucket for the account's other users.
While the shared store fails or is slow, the account is limited by this replica alone
(``FallbackLimiter``): operators can still command their mowers whenever Fleet can
otherwise issue commands.
"""

from __future__ import annotations

import time

import asyncpg
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from contracts.v1 import Command
from mowdeck.authn import Principal
from mowdeck.fleet.settings import FleetSettings
from mowdeck.kit.periodic import Periodic
from mowdeck.kit.ratelimit import (
    BatchingLimiter,
    FallbackLimiter,
    Limit,
    LimiterUnavailableError,
    MemoryLimiter,
    PostgresLimiter,
    RateLimit,
    RateLimitMetrics,
)

__all__ = ["COMMAND_LIMITS", "TABLE", "CommandLimits", "command_limits"]

log = structlog.get_logger("mowdeck.fleet")
TABLE = "fleet_rate_limits"
# Buckets full again are deleted this often (a row per account active within a refill).
_EXPIRY_SECONDS = 60.0


class CommandLimits:
    """The two limits on ordinary commands, and the round that expires idle buckets."""

    def __init__(
        self,
        user: RateLimit,
        account: RateLimit,
        limiter: FallbackLimiter,
        store: BatchingLimiter | None = None,
    ) -> None:
        self.user = user
        self.account = account
        self._limiter = limiter
        self._store = store
        self._expiry = Periodic("fleet-rate-limit-expiry", _EXPIRY_SECONDS, self.expire)

    async def admit(self, who: Principal, command: Command) -> None:
        """Pass, or raise the 429 ``Problem`` of the first limit ``who`` is over."""
        if command.emergency:
            return
        await self.user.check(who.user_id)
        await self.account.check(str(who.account_id))

    async def expire(self) -> int:
        """Forget every bucket that is full again (here and in the shared table)."""
        try:
            return await self._limiter.expire(time.time())
        except LimiterUnavailableError as err:
            # The next round deletes them; the commands meanwhile fall back on their own.
            log.warning("idle rate limit buckets not deleted", error=str(err))
            return 0

    def start(self) -> None:
        """Expire idle buckets every minute."""
        self._expiry.start()

    async def stop(self) -> None:
        """Stop expiring, and the shared store's writes still in flight."""
        await self._expiry.stop()
        if self._store is not None:
            await self._store.close()


COMMAND_LIMITS = web.AppKey("fleet_command_limits", CommandLimits)


def command_limits(
    settings: FleetSettings, pool: asyncpg.Pool, registry: CollectorRegistry
) -> CommandLimits:
    """The limits of ``settings``, the account's kept in ``pool``'s ``fleet_rate_limits``."""
    s = settings
    metrics = RateLimitMetrics(registry, service="fleet")
    fallbacks = Counter(
        "mowdeck_fleet_rate_limit_fallbacks",
        "Account limit takes answered by this replica alone: the shared store failed or"
        " did not answer in time.",
        registry=registry,
    )
    local = MemoryLimiter()
    timeout = s.fleet_rate_limit_store_timeout_seconds
    store = BatchingLimiter(PostgresLimiter(pool, TABLE), timeout=timeout)
    shared = FallbackLimiter(store, local, timeout=None, fallbacks=fallbacks)
    user = RateLimit(
        "commands_per_user",
        Limit(s.fleet_commands_per_user_rate, s.fleet_commands_per_user_burst),
        local,
        metrics,
        what="commands from this user",
    )
    account = RateLimit(
        "commands_per_account",
        Limit(s.fleet_commands_per_account_rate, s.fleet_commands_per_account_burst),
        shared,
        metrics,
        what="commands for this account",
    )
    return CommandLimits(user, account, shared, store)
