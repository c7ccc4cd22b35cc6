"""Short-lived caches for the command hot path: tokens, decisions and registrations.

Each cache is single-flight: concurrent misses of one key share one lookup, so an expiry
under load costs one query, not one per waiting request.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

import msgspec

from mowdeck.authn import AuthSettings, Principal, TokenVerifier
from mowdeck.authz import Authorizer, Tuple
from mowdeck.fleet.ports import MowerRecord, MowerRepository

__all__ = ["CachedAuthorizer", "CachedTokenVerifier", "RecordCache", "SingleFlight"]

_MAX_ENTRIES = 100_000
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """Values by key for ``ttl`` seconds; one lookup at a time per key."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._values: dict[K, tuple[float, V]] = {}
        self._inflight: dict[K, asyncio.Future[V]] = {}
        self._generation = 0

    async def get(self, key: K, load: Callable[[], Awaitable[V]], keep: bool = True) -> V:
        """The cached value of ``key``, or ``load()``'s (stored when ``keep``)."""
        if self.ttl <= 0:
            return await load()
        hit = self._values.get(key)
        if hit is not None and hit[0] > self._clock():
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
            if len(self._values) >= _MAX_ENTRIES:
                self._values.clear()
            self._values[key] = (self._clock() + self.ttl, value)
        return value

    def forget(self, key: K | None = None) -> None:
        """Drop one key, or everything."""
        if key is None:
            self._values.clear()
            self._generation += 1
        else:
            self._values.pop(key, None)
            self._inflight.pop(key, None)


class CachedTokenVerifier(TokenVerifier):
    """A ``TokenVerifier`` that remembers valid tokens until they expire (``ttl`` at most)."""

    def __init__(self, settings: AuthSettings, ttl: float = 60.0) -> None:
        super().__init__(settings)
        self._ttl = ttl
        self._valid: dict[str, tuple[float, Principal]] = {}

    def verify(self, token: str) -> Principal:
        """The principal of a valid token; only successful verifications are cached."""
        now = time.time()
        hit = self._valid.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        found = super().verify(token)
        until = min(_expiry(token), now + self._ttl)
        if until > now:
            if len(self._valid) >= 10_000:
                self._valid.clear()
            self._valid[token] = (until, found)
        return found


def _expiry(token: str) -> float:
    # Read after a successful verification, so the payload is known to be well formed.
    try:
        segment = token.split(".")[1]
        claims = msgspec.json.decode(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
        return float(claims["exp"])
    except (IndexError, KeyError, TypeError, ValueError, msgspec.DecodeError):
        return 0.0


class CachedAuthorizer:
    """Reuses ``check`` answers for ``ttl`` seconds; any write or invalidation forgets all.

    Staleness is bounded by ``ttl`` across replicas and is zero for this instance's own
    writes; ``identity.grants.changed`` and Fleet's mower events also clear it.
    """

    def __init__(
        self, inner: Authorizer, ttl: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.inner = inner
        self._decisions: SingleFlight[tuple[str, str, str], bool] = SingleFlight(ttl, clock)

    async def check(self, user: str, relation: str, object: str) -> bool:
        """Whether ``user`` has ``relation`` on ``object`` (cached)."""
        return await self._decisions.get(
            (user, relation, object), lambda: self.inner.check(user, relation, object)
        )

    async def list_objects(self, user: str, relation: str, type: str) -> set[str]:
        """Objects of ``type`` with ``relation`` for ``user`` (not cached)."""
        return await self.inner.list_objects(user, relation, type)

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        """Write tuples and forget every cached decision."""
        try:
            await self.inner.write(writes, deletes)
        finally:
            self.invalidate()

    async def delete_object(self, object: str) -> int:
        """Remove an object's tuples and forget every cached decision."""
        try:
            return await self.inner.delete_object(object)
        finally:
            self.invalidate()

    def invalidate(self) -> None:
        """Forget every cached decision, here and in the wrapped authorizer."""
        self._decisions.forget()
        self.inner.invalidate()


class RecordCache:
    """Mower records (or their absence) by id for ``ttl`` seconds."""

    def __init__(
        self,
        repository: MowerRepository,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._repository = repository
        self._records: SingleFlight[uuid.UUID, MowerRecord | None] = SingleFlight(ttl, clock)

    async def get(self, mower_id: uuid.UUID) -> MowerRecord | None:
        """The record, from the cache while fresh."""
        return await self._records.get(mower_id, lambda: self._repository.get(mower_id))

    def forget(self, mower_id: uuid.UUID | None = None) -> None:
        """Drop one mower, or every mower."""
        self._records.forget(mower_id)
