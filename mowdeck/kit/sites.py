"""The sites' areas from Fleet: ``fleet.sites.areas`` at start, kept by the site events.

Every replica of a service that judges positions (Notifications' geofences, later the
gateway) needs every site's areas, so this follows ``event.site.*`` with an ordered
consumer of its own (every replica sees every event; a durable queue group would hand
each event to one replica only), from the moment it starts, then asks Fleet for every
site's areas by pages, retried in the background like the Fleet seed (``kit/seed.py``).
Versions decide: the sink keeps the highest version of a site's areas it saw, so the
list and the events may arrive in any order. The sink is called on a worker thread
(``asyncio.to_thread``): turning a site's areas into geometry takes milliseconds, and a
thousand sites at start must not hold up the loop. ``site.removed`` carries no version; the
sink remembers removals so a list asked before one cannot bring the site back.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.js import api

from contracts.v1 import (
    ContractError,
    SiteAreas,
    SiteAreasReply,
    SiteAreasRequest,
    SiteRef,
    decode,
    decode_event,
)
from contracts.v1.subjects import EVENTS, FLEET_SITES_AREAS, SITE_EVENT_FILTER
from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.bus import Bus
from mowdeck.kit.seed import seed_healthy

__all__ = ["SiteAreasFeed", "list_site_areas"]

log = structlog.get_logger("mowdeck.kit.sites")

PAGE = 500


async def list_site_areas(bus: Bus, *, timeout: float, limit: int = PAGE) -> list[SiteAreas]:
    """Every site's areas, every page of ``fleet.sites.areas``; a failed page fails it."""
    sites: list[SiteAreas] = []
    request: SiteAreasRequest | None = SiteAreasRequest(limit=limit)
    while request is not None:
        data = await bus.request(FLEET_SITES_AREAS, request, timeout=timeout)
        reply = decode(data, SiteAreasReply)
        sites += reply.sites
        after = reply.next_after
        request = None if after is None else SiteAreasRequest(after=after, limit=limit)
    return sites


class SiteAreasFeed:
    """Hands every site's areas to ``apply`` and removals to ``remove``, from the list
    and the events; ``apply`` keeps the highest version (and ignores removed sites)."""

    def __init__(
        self,
        bus: Bus,
        *,
        apply: Callable[[SiteAreas], object],
        remove: Callable[[uuid.UUID], object],
        request_timeout: float,
        retry_initial: float = 1.0,
        retry_max: float = 30.0,
        name: str = "site-areas",
    ) -> None:
        self._bus = bus
        self._apply, self._remove = apply, remove
        self._timeout = request_timeout
        self._retry_initial, self._retry_max = retry_initial, retry_max
        self.name = name
        self._sub: Any = None
        self._stopping = False
        self.loaded = asyncio.Event()
        self.task: asyncio.Task[int] | None = None

    async def start(self) -> None:
        """Follow the site events, then load the list in the background."""
        self._sub = await self._bus.js.subscribe(
            SITE_EVENT_FILTER,
            stream=EVENTS.name,
            ordered_consumer=True,
            deliver_policy=api.DeliverPolicy.NEW,
            cb=self._on_event,
        )
        self.task = asyncio.get_running_loop().create_task(self.run(), name=self.name)

    @property
    def healthy(self) -> bool:
        """False once the loading task ended with an error (a bug): for ``/healthz``."""
        return self._stopping or seed_healthy(lambda: self.task)()

    async def _on_event(self, msg: Msg) -> None:
        try:
            event = decode_event(msg.data)
        except ContractError as err:
            log.warning("site event dropped", subject=msg.subject, reason=str(err))
            return
        payload = event.payload
        try:
            if event.type == "site.areas_changed" and isinstance(payload, SiteAreas):
                await asyncio.to_thread(self._apply, payload)
            elif event.type == "site.removed" and isinstance(payload, SiteRef):
                await asyncio.to_thread(self._remove, payload.site_id)
        except Exception:
            log.exception("site event failed", type=event.type)

    async def run(self) -> int:
        """Ask Fleet until it answers, apply every site; returns the sites listed."""
        delay, attempt = self._retry_initial, 0
        while True:
            attempt += 1
            try:
                sites = await list_site_areas(self._bus, timeout=self._timeout)
            except Exception as err:  # Fleet absent, a bad page
                log.warning("fleet site areas failed; retrying", feed=self.name,
                            attempt=attempt, retry_in_s=delay, error=str(err),
                            error_type=type(err).__name__)  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_max)
                continue
            for site in sites:
                try:
                    await asyncio.to_thread(self._apply, site)
                except Exception:  # one site's areas that cannot be used: the others can
                    log.exception("site areas failed", site_id=str(site.site_id))
            log.info("site areas loaded from fleet", feed=self.name, sites=len(sites))
            self.loaded.set()
            return len(sites)

    async def stop(self) -> None:
        """Stop loading and following."""
        self._stopping = True
        if self.task is not None:
            await cancel_and_wait(self.task)
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as err:
                log.debug("unsubscribe failed", error=str(err))
            self._sub = None
