"""Answers ``fleet.mowers.list`` (core NATS request/reply, one queue group for replicas)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import structlog
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry, Counter

from contracts.v1 import ContractError, MowerListRequest, decode, encode
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.fleet.ports import MowerRepository
from mowdeck.kit.bus import Bus

__all__ = ["QUEUE", "MowerListResponder", "error_reply"]

log = structlog.get_logger("mowdeck.fleet.listing")
QUEUE = "fleet"


def error_reply(code: int, detail: str) -> tuple[bytes, dict[str, str]]:
    """An error answer that cannot be mistaken for an empty list.

    ``mowers`` is null, so decoding it as ``MowerListReply`` fails; the NATS service
    headers carry the code and text for clients that look at them first.
    """
    body = json.dumps({"mowers": None, "error": {"code": code, "detail": detail}}).encode()
    return body, {"Nats-Service-Error": detail[:200], "Nats-Service-Error-Code": str(code)}


class MowerListResponder:
    """Replies to ``MowerListRequest`` with the registrations of the asked shard."""

    def __init__(self, bus: Bus, repository: MowerRepository, registry: CollectorRegistry) -> None:
        self._bus = bus
        self._repository = repository
        self._sub: Any = None
        self._answered = Counter(
            "mowdeck_fleet_list_requests_total",
            "fleet.mowers.list requests answered",
            ["outcome"],
            registry=registry,
        )

    async def start(self) -> None:
        """Join the queue group on ``fleet.mowers.list``."""
        self._sub = await self._bus.nc.subscribe(
            FLEET_MOWERS_LIST, queue=QUEUE, cb=self._on_request
        )

    async def _on_request(self, msg: Msg) -> None:
        if not msg.reply:
            return
        try:
            request = decode(msg.data, MowerListRequest)
        except ContractError as err:
            body, headers = error_reply(400, f"invalid MowerListRequest: {err}")
            self._answered.labels("invalid").inc()
            await self._bus.nc.publish(msg.reply, body, headers=headers)
            return
        try:
            reply = request.answer(await self._repository.all_registrations())
        except Exception as err:
            log.exception("listing mowers failed")
            body, headers = error_reply(503, f"registry unavailable: {type(err).__name__}")
            self._answered.labels("error").inc()
            await self._bus.nc.publish(msg.reply, body, headers=headers)
            return
        self._answered.labels("ok").inc()
        await self._bus.nc.publish(msg.reply, encode(reply))
        log.debug(
            "mower list answered",
            shard_index=request.shard_index,
            shard_count=request.shard_count,
            mowers=len(reply.mowers),
            more=reply.next_after is not None,
        )

    async def stop(self) -> None:
        """Leave the queue group."""
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None
