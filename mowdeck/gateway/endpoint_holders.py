"""Which mower of the shard holds each device endpoint, and the registrations waiting for one.

One link per device endpoint: two links to one device replace each other there, for ever
(``docs/gateway.md``, amendment 3). Pure bookkeeping, keyed by ``EndpointPolicy.key``;
``registrations.py`` decides when a key is held and when it is freed.
"""

from __future__ import annotations

import uuid

from contracts.v1 import MowerRegistration

__all__ = ["EndpointHolders"]


class EndpointHolders:
    """Holders by endpoint key; refused registrations waiting for a key, first come first."""

    def __init__(self) -> None:
        self._holders: dict[str, uuid.UUID] = {}
        self._waiting: dict[str, dict[uuid.UUID, MowerRegistration]] = {}
        self._waits_for: dict[uuid.UUID, str] = {}

    def holder(self, key: str) -> uuid.UUID | None:
        """The mower holding ``key``, if any."""
        return self._holders.get(key)

    def hold(self, key: str, mower_id: uuid.UUID) -> None:
        """``mower_id`` holds ``key`` (free, or its own already)."""
        holder = self._holders.setdefault(key, mower_id)
        if holder != mower_id:
            raise ValueError(f"endpoint held by mower {holder}, not {mower_id}")

    def release(self, key: str, mower_id: uuid.UUID) -> MowerRegistration | None:
        """Free ``key`` if ``mower_id`` holds it; the registration that waited longest for
        it, no longer waiting, or None."""
        if self._holders.get(key) != mower_id:
            return None
        del self._holders[key]
        waiting = self._waiting.get(key)
        if not waiting:
            return None
        registration = waiting.pop(next(iter(waiting)))
        self._forget(registration.mower_id, key)
        return registration

    def wait(self, key: str, registration: MowerRegistration) -> None:
        """``registration`` waits for ``key`` (in place of what its mower waited with)."""
        self.stop_waiting(registration.mower_id)
        self._waiting.setdefault(key, {})[registration.mower_id] = registration
        self._waits_for[registration.mower_id] = key

    def stop_waiting(self, mower_id: uuid.UUID) -> None:
        """``mower_id`` no longer waits (removed, or registered anew)."""
        key = self._waits_for.get(mower_id)
        if key is not None:
            self._waiting[key].pop(mower_id, None)
            self._forget(mower_id, key)

    @property
    def waiting(self) -> int:
        """Registrations waiting for an endpoint."""
        return len(self._waits_for)

    def _forget(self, mower_id: uuid.UUID, key: str) -> None:
        del self._waits_for[mower_id]
        if not self._waiting.get(key):
            self._waiting.pop(key, None)
