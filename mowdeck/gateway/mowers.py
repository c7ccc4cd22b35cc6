"""The volatile registry of this shard's mowers, fed by Fleet's events and list (ADR 0013)."""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.js import api

from contracts.v1 import (
    ContractError,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    decode,
    decode_event,
    shard_of,
)
from contracts.v1.subjects import EVENTS, FLEET_MOWERS_LIST
from mowdeck.kit.bus import Bus

__all__ = ["Change", "FleetFeed", "ShardMowers"]

log = structlog.get_logger("mowdeck.gateway.mowers")


class Change(enum.Enum):
    """What applying a registration changed."""

    FOREIGN = "foreign"
    ADDED = "added"
    UNCHANGED = "unchanged"
    RENAMED = "renamed"
    RECONNECT = "reconnect"


class ShardMowers(Mapping[uuid.UUID, MowerRegistration]):
    """This shard's mowers by id; nothing here is persisted."""

    def __init__(self, shard_index: int, shard_count: int) -> None:
        self.shard_index = shard_index
        self.shard_count = shard_count
        self._mowers: dict[uuid.UUID, MowerRegistration] = {}

    def owns(self, mower_id: uuid.UUID) -> bool:
        """True when this shard owns ``mower_id``."""
        return shard_of(mower_id, self.shard_count) == self.shard_index

    def apply(self, registration: MowerRegistration) -> Change:
        """Add or update a registration (additive; a changed connection means reconnect)."""
        if not self.owns(registration.mower_id):
            return Change.FOREIGN
        current = self._mowers.get(registration.mower_id)
        self._mowers[registration.mower_id] = registration
        if current is None:
            return Change.ADDED
        if current.connection != registration.connection:
            return Change.RECONNECT
        if current != registration:
            return Change.RENAMED
        return Change.UNCHANGED

    def remove(self, mower_id: uuid.UUID) -> MowerRegistration | None:
        """Forget a mower; returns its registration if it was known."""
        return self._mowers.pop(mower_id, None)

    def __getitem__(self, mower_id: uuid.UUID) -> MowerRegistration:
        return self._mowers[mower_id]

    def __iter__(self) -> Iterator[uuid.UUID]:
        return iter(self._mowers)

    def __len__(self) -> int:
        return len(self._mowers)


Apply = Callable[[MowerRegistration], Awaitable[None]]
Remove = Callable[[uuid.UUID], Awaitable[None]]


class FleetFeed:
    """Follows ``event.mower.registered|updated|removed``, then asks Fleet for the list.

    The list request is retried in the background, from ``retry_initial`` seconds doubling
    to ``retry_max``, with a warning each time; the gateway is ready meanwhile with the
    mowers it knows. A mower removed by an event while the list was pending is not
    brought back by a stale list.
    """

    def __init__(
        self,
        bus: Bus,
        *,
        shard_index: int,
        shard_count: int,
        on_apply: Apply,
        on_remove: Remove,
        on_retry: Callable[[], None],
        request_timeout: float,
        retry_initial: float,
        retry_max: float,
    ) -> None:
        self._bus = bus
        self._request = MowerListRequest(shard_index=shard_index, shard_count=shard_count)
        self._on_apply = on_apply
        self._on_remove = on_remove
        self._on_retry = on_retry
        self._timeout = request_timeout
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._sub: Any = None
        self._seed_task: asyncio.Task[None] | None = None
        self._removed_during_seed: set[uuid.UUID] = set()
        self.seeded = asyncio.Event()

    async def start(self) -> None:
        """Subscribe to the events, then start seeding from Fleet in the background."""
        self._sub = await self._bus.js.subscribe(
            "event.mower.*",
            stream=EVENTS.name,
            ordered_consumer=True,
            deliver_policy=api.DeliverPolicy.NEW,
            cb=self._on_event,
        )
        self._seed_task = asyncio.create_task(self._seed(), name="fleet-list-seed")

    async def _on_event(self, msg: Msg) -> None:
        event_type = msg.subject.removeprefix("event.")
        if event_type not in ("mower.registered", "mower.updated", "mower.removed"):
            return
        try:
            event = decode_event(msg.data)
        except ContractError as err:
            log.warning("registry event dropped", subject=msg.subject, reason=str(err))
            return
        registration: MowerRegistration = event.payload
        if event.type == "mower.removed":
            self._removed_during_seed.add(registration.mower_id)
            await self._on_remove(registration.mower_id)
        else:
            self._removed_during_seed.discard(registration.mower_id)
            await self._on_apply(registration)

    async def _seed(self) -> None:
        delay = self._retry_initial
        attempt = 0
        while True:
            attempt += 1
            try:
                registrations = await self._list_all()
            except Exception as err:  # Fleet absent, a bad page, a bus being replaced
                self._on_retry()
                log.warning(
                    "fleet mower list failed; retrying",
                    attempt=attempt,
                    retry_in_s=delay,
                    error=str(err),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_max)
                continue
            applied = 0
            for registration in registrations:
                if registration.mower_id in self._removed_during_seed:
                    continue
                await self._on_apply(registration)
                applied += 1
            log.info("registry seeded from fleet", mowers=applied, attempts=attempt)
            self._removed_during_seed.clear()
            self.seeded.set()
            return

    async def _list_all(self) -> list[MowerRegistration]:
        """Every page of this shard's list; a failure on any page fails the whole list."""
        registrations: list[MowerRegistration] = []
        request: MowerListRequest | None = self._request
        while request is not None:
            data = await self._bus.request(FLEET_MOWERS_LIST, request, timeout=self._timeout)
            reply = decode(data, MowerListReply)
            registrations += reply.mowers
            request = request.next_page(reply)
        return registrations

    async def stop(self) -> None:
        """Stop following and seeding."""
        if self._seed_task is not None:
            self._seed_task.cancel()
            await asyncio.gather(self._seed_task, return_exceptions=True)
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as err:
                log.debug("unsubscribe failed", error=str(err))
