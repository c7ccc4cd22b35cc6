"""Answers ``fleet.sites.areas`` (core request/reply, Fleet's queue group): every site's
areas by pages, so that a consumer (Notifications) loads them all at start."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import structlog
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry, Counter

from contracts.v1 import ContractError, SiteAreas, SiteAreasReply, SiteAreasRequest, decode, encode
from contracts.v1.subjects import FLEET_SITES_AREAS
from mowdeck.fleet.listing import PAYLOAD_SHARE, QUEUE
from mowdeck.fleet.sites.ports import SiteRepository
from mowdeck.kit.bus import Bus

__all__ = ["DEFAULT_LIMIT", "SiteAreasResponder", "page_reply"]

log = structlog.get_logger("mowdeck.fleet.sites.listing")
DEFAULT_LIMIT = 100


def page_reply(sites: list[SiteAreas], limit: int, budget: int) -> SiteAreasReply:
    """The reply of a page read with ``limit + 1`` sites, cut to ``budget`` bytes.

    A cut page ends early with ``next_after`` at its last site. A site whose areas alone
    exceed the budget still goes out alone (a page holds at least one site): 10,000
    positions are about 400 kB, within NATS's default max_payload of 1 MB.
    """
    more = len(sites) > limit
    page = sites[:limit]
    kept: list[SiteAreas] = []
    size = len(encode(SiteAreasReply(next_after=page[-1].site_id))) if page else 0
    for site in page:
        cost = len(encode(site)) + 1
        if kept and size + cost > budget:
            return SiteAreasReply(sites=kept, next_after=kept[-1].site_id)
        kept.append(site)
        size += cost
    return SiteAreasReply(sites=kept, next_after=kept[-1].site_id if more and kept else None)


class SiteAreasResponder:
    """Replies to ``SiteAreasRequest`` with a page of every site's areas."""

    def __init__(self, bus: Bus, repository: SiteRepository, registry: CollectorRegistry) -> None:
        self._bus = bus
        self._repository = repository
        self._sub: Any = None
        self._answered = Counter(
            "mowdeck_fleet_site_areas_requests_total",
            "fleet.sites.areas requests answered",
            ["outcome"],
            registry=registry,
        )

    async def start(self) -> None:
        """Join the queue group on ``fleet.sites.areas``."""
        self._sub = await self._bus.nc.subscribe(
            FLEET_SITES_AREAS, queue=QUEUE, cb=self._on_request
        )

    async def _on_request(self, msg: Msg) -> None:
        if not msg.reply:
            return
        try:
            request = decode(msg.data, SiteAreasRequest)
        except ContractError as err:
            await self._error(msg.reply, 400, f"invalid SiteAreasRequest: {err}", "invalid")
            return
        limit = request.limit or DEFAULT_LIMIT
        try:
            sites = await self._repository.areas_page(request.after, limit + 1)
            budget = int(self._bus.nc.max_payload * PAYLOAD_SHARE)
            body = encode(page_reply(sites, limit, budget))
            await self._bus.nc.publish(msg.reply, body)
        except Exception as err:
            log.exception("answering fleet.sites.areas failed")
            await self._error(msg.reply, 503, f"sites unavailable: {type(err).__name__}", "error")
            return
        self._answered.labels("ok").inc()

    async def _error(self, reply: str, code: int, detail: str, outcome: str) -> None:
        # ``sites`` null: the answer cannot be decoded as an empty SiteAreasReply.
        body = json.dumps({"sites": None, "error": {"code": code, "detail": detail}}).encode()
        headers = {"Nats-Service-Error": detail[:200], "Nats-Service-Error-Code": str(code)}
        self._answered.labels(outcome).inc()
        with contextlib.suppress(Exception):
            await self._bus.nc.publish(reply, body, headers=headers)

    async def stop(self) -> None:
        """Leave the queue group."""
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None
