"""Values kept for a while, loaded once however many ask at the same time.

Single flight: concurrent misses of one key share one lookup, so an expiry under load
costs one query, not one per waiting request. Fleet's record cache and the authorization
decision cache (``mowdeck.authz.DecisionCache``) are built on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["MAX_ENTRIES", "SingleFlight"]

MAX_ENTRIES = 100_000
"""How many values a cache keeps at most, unless told otherwise."""
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """Values by key for ``ttl`` seconds, at most ``max_entries`` (all are dropped when
    one more comes); one lookup at a time per key."""

    def __init__(
        self,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._max_entries = max_entries
        # In insertion order, which is expiry order: a stored key is moved to the end.
        self._values: dict[K, tuple[float, V]] = {}
        self._inflight: dict[K, asyncio.Future[V]] = {}
        self._used: set[K] = set()  # hit since it was last stored
        self._generation = 0

    @property
    def generation(self) -> int:
        """Changes on every ``forget``; values loaded across a change are not kept."""
        return self._generation

    async def get(self, key: K, load: Callable[[], Awaitable[V]], keep: bool = True) -> V:
        """The cached value of ``key``, or ``load()``'s (stored when ``keep``)."""
        if self.ttl <= 0:
            return await load()
        hit = self._values.get(key)
        if hit is not None and hit[0] > self._clock():
            self._used.add(key)
            return hit[1]
        pending = self._inflight.get(key)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this request was cancelled
                return await load()  # the loading request was cancelled: load here
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        generation = self._generation
        try:
            value = await load()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as err:
            future.set_exception(err)
            future.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(value)
        # A value loaded across an invalidation may be stale: hand it out, don't keep it.
        if keep and generation == self._generation:
            self._store(key, value)
        return value

    def _store(self, key: K, value: V) -> None:
        if len(self._values) >= self._max_entries:
            self._values.clear()
            self._used.clear()
        self._values.pop(key, None)
        self._values[key] = (self._clock() + self.ttl, value)
        self._used.discard(key)

    def fresh(self, keys: Iterable[K]) -> dict[K, V]:
        """The values of those of ``keys`` that are stored and not expired (counted as hits)."""
        now = self._clock()
        found: dict[K, V] = {}
        for key in keys:
            hit = self._values.get(key)
            if hit is not None and hit[0] > now:
                self._used.add(key)
                found[key] = hit[1]
        return found

    def due(self, within: float, limit: int) -> list[K]:
        """Keys in use whose values expire within ``within`` seconds, soonest first.

        Expired values are dropped on the way; a key not hit since it was stored is not
        due (so refreshing stops when the key is no longer asked for).
        """
        now = self._clock()
        horizon = now + within
        found: list[K] = []
        expired: list[K] = []
        for key, (expires, _) in self._values.items():
            if expires > horizon or len(found) >= limit:
                break
            if expires <= now:
                expired.append(key)
            elif key in self._used and key not in self._inflight:
                found.append(key)
        for key in expired:
            del self._values[key]
            self._used.discard(key)
        return found

    def refresh(self, values: dict[K, V], generation: int) -> None:
        """Store values loaded since ``generation`` (dropped if something was forgotten)."""
        if generation == self._generation:
            for key, value in values.items():
                self._store(key, value)

    def forget(self, key: K | None = None) -> None:
        """Drop one key, or everything; loads in flight are handed out but not kept."""
        self._generation += 1
        if key is None:
            self._values.clear()
            self._used.clear()
        else:
            self._values.pop(key, None)
            self._inflight.pop(key, None)
            self._used.discard(key)
