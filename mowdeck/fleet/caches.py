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
        if len(self._values) >= _MAX_ENTRIES:
            self._values.clear()
            self._used.clear()
        self._values.pop(key, None)
        self._values[key] = (self._clock() + self.ttl, value)
        self._used.discard(key)

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

    async def read(self, *, relation: str, object: str) -> list[Tuple]:
        """The stored tuples of ``object`` with ``relation`` (not cached)."""
        return await self.inner.read(relation=relation, object=object)

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
    """Mower records (or their absence) by id for ``ttl`` seconds.

    A miss also reloads, in the same query, every record in use that would expire within
    half the ``ttl``: a busy replica reads its working set in a few queries per ``ttl``
    instead of one query per mower. Every value is still at most ``ttl`` old.
    """

    def __init__(
        self,
        repository: MowerRepository,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        bulk: int = 500,
    ) -> None:
        self._repository = repository
        self._bulk = bulk
        self._records: SingleFlight[uuid.UUID, MowerRecord | None] = SingleFlight(ttl, clock)

    async def get(self, mower_id: uuid.UUID) -> MowerRecord | None:
        """The record, from the cache while fresh."""
        return await self._records.get(mower_id, lambda: self._load(mower_id))

    async def _load(self, mower_id: uuid.UUID) -> MowerRecord | None:
        generation = self._records.generation
        due = [k for k in self._records.due(self._records.ttl / 2, self._bulk) if k != mower_id]
        if not due:
            return await self._repository.get(mower_id)
        found = {
            r.registration.mower_id: r for r in await self._repository.get_many([mower_id, *due])
        }
        self._records.refresh({k: found.get(k) for k in due}, generation)
        return found.get(mower_id)

    def forget(self, mower_id: uuid.UUID | None = None) -> None:
        """Drop one mower, or every mower."""
        self._records.forget(mower_id)
