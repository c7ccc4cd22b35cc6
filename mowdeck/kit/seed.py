"""The Fleet seed: a service's mowers from ``fleet.mowers.list``, kept by Fleet's events.

Every service that needs to know which mowers exist (the gateway, Telemetry) asks Fleet
at start with a paged ``fleet.mowers.list`` request for its shard, retried in the
background from ``retry_initial`` seconds doubling to ``retry_max`` with a warning each
time, and follows ``event.mower.registered|updated|removed`` meanwhile. Events win: the
list is older than any event that arrives while it is pending, so a mower that had an
event since the list was asked keeps what the event said.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
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
)
from contracts.v1.subjects import EVENTS, FLEET_MOWERS_LIST
from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.bus import Bus

__all__ = ["FleetSeed", "list_mowers", "seed_healthy"]

log = structlog.get_logger("mowdeck.seed")

ApplyOne = Callable[[MowerRegistration], Awaitable[object]]
ApplyList = Callable[[list[MowerRegistration]], Awaitable[int]]
Remove = Callable[[uuid.UUID], Awaitable[object]]
Sleep = Callable[[float], Awaitable[object]]

_MOWER_EVENTS = ("mower.registered", "mower.updated", "mower.removed")


async def list_mowers(
    bus: Bus, request: MowerListRequest, *, timeout: float
) -> list[MowerRegistration]:
    """Every page of Fleet's list for ``request``'s shard; a failed page fails the list."""
    registrations: list[MowerRegistration] = []
    page: MowerListRequest | None = request
    while page is not None:
        data = await bus.request(FLEET_MOWERS_LIST, page, timeout=timeout)
        reply = decode(data, MowerListReply)
        registrations += reply.mowers
        page = page.next_page(reply)
    return registrations


def seed_healthy(task: Callable[[], asyncio.Future[Any] | None]) -> Callable[[], bool]:
    """A ``watch`` check: the seed task ``task()`` returns has not ended with an error.

    Unlike a loop's task, a seed's task ends when it is done: only an error (a bug, as
    every other failure is retried) or a cancellation outside ``stop`` is a failure.
    """

    def healthy() -> bool:
        current = task()
        if current is None or not current.done():
            return True
        return not current.cancelled() and current.exception() is None

    return healthy


class FleetSeed:
    """Asks Fleet for the mowers until it answers; optionally follows the mower events.

    Exactly one of ``apply`` and ``apply_list`` receives the list:

    - ``apply`` gets each registration in turn; one whose mower had an event since the
      list was asked is skipped (checked right before it, so an event arriving while the
      list is being applied wins too), and one that raises is logged and skipped;
    - ``apply_list`` gets the whole list at once, without the mowers that had an event;
      a failure retries the list (for a sink that lets events win on its own, as
      Telemetry's directory does in SQL).

    With ``follow_events`` the seed subscribes to the mower events itself and hands them
    to ``apply`` and ``remove``; a service with a consumer of its own calls ``saw()``.
    ``run()`` retries for ever, so the task ends with an error only on a bug, which
    ``healthy`` reports; ``on_seeded()`` is called once the list is applied.
    """

    def __init__(
        self,
        bus: Bus,
        *,
        apply: ApplyOne | None = None,
        apply_list: ApplyList | None = None,
        remove: Remove | None = None,
        follow_events: bool = False,
        shard_index: int = 0,
        shard_count: int = 1,
        request_timeout: float,
        retry_initial: float = 1.0,
        retry_max: float = 30.0,
        on_retry: Callable[[], object] | None = None,
        on_seeded: Callable[[], object] | None = None,
        sleep: Sleep = asyncio.sleep,
        name: str = "fleet-seed",
    ) -> None:
        if (apply is None) == (apply_list is None):
            raise ValueError("a FleetSeed takes exactly one of apply and apply_list")
        if follow_events and (apply is None or remove is None):
            raise ValueError("following the events needs apply and remove")
        self._bus = bus
        self._apply = apply
        self._apply_list = apply_list
        self._remove = remove
        self._follow = follow_events
        self._request = MowerListRequest(shard_index=shard_index, shard_count=shard_count)
        self._timeout = request_timeout
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._on_retry = on_retry
        self._on_seeded = on_seeded
        self._sleep = sleep
        self.name = name
        self._newer: set[uuid.UUID] = set()  # mowers with an event while the list is pending
        self._sub: Any = None
        self._stopping = False
        self.seeded = asyncio.Event()
        self.task: asyncio.Task[int] | None = None

    async def start(self) -> asyncio.Task[int]:
        """Follow the events (if asked to), then seed in the background; returns the task."""
        if self._follow:
            self._sub = await self._bus.js.subscribe(
                "event.mower.*",
                stream=EVENTS.name,
                ordered_consumer=True,
                deliver_policy=api.DeliverPolicy.NEW,
                cb=self._on_event,
            )
        self.task = asyncio.get_running_loop().create_task(self.run(), name=self.name)
        return self.task

    @property
    def healthy(self) -> bool:
        """False once the seed task ended without seeding (a bug): for ``/healthz``."""
        return self._stopping or seed_healthy(lambda: self.task)()

    def saw(self, mower_id: uuid.UUID) -> None:
        """An event about ``mower_id`` was applied: the pending list must not overwrite it."""
        if not self.seeded.is_set():
            self._newer.add(mower_id)

    async def _on_event(self, msg: Msg) -> None:
        if msg.subject.removeprefix("event.") not in _MOWER_EVENTS:
            return
        try:
            event = decode_event(msg.data, subject=msg.subject)
        except ContractError as err:
            log.warning("mower event dropped", subject=msg.subject, reason=str(err))
            return
        registration: MowerRegistration = event.payload
        self.saw(registration.mower_id)
        try:
            if event.type == "mower.removed":
                assert self._remove is not None
                await self._remove(registration.mower_id)
            else:
                assert self._apply is not None
                await self._apply(registration)
        except Exception:
            log.exception(
                "mower event failed", type=event.type, mower_id=str(registration.mower_id)
            )

    async def run(self) -> int:
        """Ask Fleet until it answers, apply the list; returns the mowers applied."""
        delay = self._retry_initial
        attempt = 0
        while True:
            attempt += 1
            try:
                registrations = await list_mowers(self._bus, self._request, timeout=self._timeout)
                applied = await self._apply_all(registrations)
            except Exception as err:  # Fleet absent, a bad page, a store or bus failing
                if self._on_retry is not None:
                    self._on_retry()
                log.warning(
                    "fleet mower list failed; retrying",
                    seed=self.name,
                    attempt=attempt,
                    retry_in_s=delay,
                    error=str(err),
                    error_type=type(err).__name__,
                )
                await self._sleep(delay)
                delay = min(delay * 2, self._retry_max)
                continue
            log.info(
                "mowers seeded from fleet",
                seed=self.name,
                mowers=len(registrations),
                applied=applied,
                attempts=attempt,
            )
            self.seeded.set()
            self._newer.clear()
            if self._on_seeded is not None:
                self._on_seeded()
            return applied

    async def _apply_all(self, registrations: list[MowerRegistration]) -> int:
        if self._apply_list is not None:
            return await self._apply_list(
                [r for r in registrations if r.mower_id not in self._newer]
            )
        assert self._apply is not None
        applied = 0
        for registration in registrations:
            if registration.mower_id in self._newer:
                continue  # an event since the list was asked said something newer
            try:
                await self._apply(registration)
            except Exception:
                log.exception("listed mower failed", mower_id=str(registration.mower_id))
                continue
            applied += 1
        return applied

    async def stop(self) -> None:
        """Stop seeding and following."""
        self._stopping = True
        if self.task is not None:
            await cancel_and_wait(self.task)
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as err:
                log.debug("unsubscribe failed", error=str(err))
            self._sub = None
