"""Short-lived caches for the command hot path: tokens, decisions and registrations.

Each cache is single-flight (``kit.singleflight``): concurrent misses of one key share one
lookup, so an expiry under load costs one query, not one per waiting request. Decisions
are kept by authz's ``DecisionCache``, which Notifications' fan-out shares.
"""

from __future__ import annotations

import base64
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from nats.aio.msg import Msg

from contracts.v1.subjects import MOWER_EVENT_FILTER
from mowdeck.authn import AuthSettings, Principal, TokenVerifier
from mowdeck.authz import Authorizer, DecisionCache, Tuple
from mowdeck.fleet.ports import MowerRecord, MowerRepository
from mowdeck.kit.bus import Bus
from mowdeck.kit.singleflight import SingleFlight

__all__ = [
    "GRANTS_CHANGED",
    "CacheInvalidation",
    "CachedAuthorizer",
    "CachedTokenVerifier",
    "RecordCache",
    "SingleFlight",
]

GRANTS_CHANGED = "event.identity.grants.changed"


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
        self._decisions = DecisionCache(inner, ttl, clock=clock)

    async def check(self, user: str, relation: str, object: str) -> bool:
        """Whether ``user`` has ``relation`` on ``object`` (cached)."""
        return await self._decisions.check(user, relation, object)

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


class CacheInvalidation:
    """Drops the cached answers when a mower or the grants changed anywhere.

    Another replica's registration, change or removal of a mower (its event) and every
    change of grants (``event.identity.grants.changed``) empty the decision and record
    caches; ``dropped`` counts it.
    """

    def __init__(
        self,
        bus: Bus,
        authorizer: CachedAuthorizer,
        records: RecordCache,
        dropped: Callable[[], object],
    ) -> None:
        self._bus = bus
        self._authorizer = authorizer
        self._records = records
        self._dropped = dropped
        self._subscriptions: list[Any] = []

    async def start(self) -> None:
        """Subscribe to both subjects."""
        for subject in (MOWER_EVENT_FILTER, GRANTS_CHANGED):
            self._subscriptions.append(await self._bus.nc.subscribe(subject, cb=self._changed))

    async def _changed(self, _: Msg) -> None:
        self._authorizer.invalidate()
        self._records.forget()
        self._dropped()

    async def stop(self) -> None:
        """Unsubscribe; from a connection already gone there is nothing left to undo."""
        while self._subscriptions:
            with contextlib.suppress(Exception):
                await self._subscriptions.pop().unsubscribe()
