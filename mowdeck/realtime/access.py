"""Which mowers a reader may see: ``list_objects(can_view)`` at connect, and again later,
narrowed by the hub to the mowers of the reader's token's account.

Asked again for the clients an event concerns (``identity.grants.changed``,
``mower.registered``, ``mower.removed``) as soon as it arrives, and for every client at
least every ``realtime_authz_refresh_seconds``: a revoked grant stops the mower's events
within that time even when no event says so. One lookup per user, not per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable

import structlog

from mowdeck.authz import Authorizer, AuthzUnavailableError, user_ref
from mowdeck.kit.periodic import Periodic
from mowdeck.realtime.client import Client
from mowdeck.realtime.hub import Hub
from mowdeck.realtime.metrics import RealtimeMetrics

__all__ = ["Access", "mower_ids"]

log = structlog.get_logger("mowdeck.realtime.access")


def mower_ids(objects: Iterable[str]) -> set[uuid.UUID]:
    """The mower ids of ``mower:<id>`` objects (others, which name no mower, skipped)."""
    ids: set[uuid.UUID] = set()
    for ref in objects:
        with contextlib.suppress(ValueError):
            ids.add(uuid.UUID(ref.partition(":")[2]))
    return ids


class Access:
    """Looks up visible mowers and keeps every client's set fresh."""

    def __init__(
        self, authorizer: Authorizer, hub: Hub, metrics: RealtimeMetrics, *, refresh: float
    ) -> None:
        self._authorizer = authorizer
        self._hub = hub
        self._metrics = metrics
        self.refresh_seconds = refresh
        self._dirty: set[Client] = set()
        self._everyone = False
        self._due = 0.0  # when everyone's sets are looked at again (set at start)
        # Woken at once for the clients an event concerns; everyone at least every
        # ``refresh`` seconds.
        self._timer = Periodic("realtime-authz", refresh, self._round)
        hub.on_refresh = self.request

    async def visible(self, user_id: str, account_id: uuid.UUID) -> frozenset[uuid.UUID]:
        """The mowers of ``account_id`` that ``user_id`` may view; raises
        ``AuthzUnavailableError``."""
        return self._hub.scoped(await self._viewable(user_id), account_id)

    async def _viewable(self, user_id: str) -> frozenset[uuid.UUID]:
        """Every mower ``user_id`` may view, in any account."""
        objects = await self._authorizer.list_objects(user_ref(user_id), "can_view", "mower")
        return frozenset(mower_ids(objects))

    def request(self, clients: Iterable[Client] | None) -> None:
        """Look again soon for ``clients`` (None: everyone, after forgetting cached decisions)."""
        if clients is None:
            self._authorizer.invalidate()
            self._everyone = True
        else:
            self._dirty.update(clients)
        self._timer.wake()

    def start(self) -> None:
        """Start the refresh loop."""
        self._due = asyncio.get_running_loop().time() + self.refresh_seconds
        self._timer.start()

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The refresh loop's task (for a ``/healthz`` watch)."""
        return self._timer.task

    async def stop(self) -> None:
        """Stop the refresh loop."""
        await self._timer.stop()

    async def _round(self) -> None:
        # Woken for the clients an event concerns, or due: everyone.
        now = asyncio.get_running_loop().time()
        if now >= self._due:
            self._everyone = True
            self._due = now + self.refresh_seconds
        if self._everyone:
            clients, self._everyone = set(self._hub.clients), False
            self._dirty.clear()
        else:
            clients, self._dirty = self._dirty, set()
        try:
            await self.refresh(clients)
        except Exception:
            log.exception("visibility refresh failed")

    async def refresh(self, clients: Iterable[Client]) -> None:
        """Look up the visible mowers of ``clients``' users and apply them."""
        by_user: dict[str, list[Client]] = {}
        for client in clients:
            by_user.setdefault(client.user_id, []).append(client)
        for user_id, theirs in by_user.items():
            # Between users, let the loop deliver: an in-process evaluator answers
            # without waiting, and a round over every user would otherwise hold the
            # fan-out for the whole round.
            await asyncio.sleep(0)
            try:
                visible = await self._viewable(user_id)
            except AuthzUnavailableError as err:
                # Keep what was visible: closing every stream while authorization is
                # briefly away would send every console into a reconnect storm.
                self._metrics.refreshes.labels("unavailable").inc()
                log.warning("visibility refresh skipped", user_id=user_id, error=str(err))
                continue
            self._metrics.refreshes.labels("ok").inc()
            for client in theirs:  # the hub narrows to each client's account
                self._hub.update_visible(client, visible)
