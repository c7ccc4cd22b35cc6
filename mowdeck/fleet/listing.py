"""Answers ``fleet.mowers.list`` (core NATS request/reply, one queue group for replicas)."""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

import structlog
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry, Counter

from contracts.v1 import (
    ContractError,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    decode,
    encode,
)
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.fleet.ports import MowerRepository
from mowdeck.kit.bus import Bus

__all__ = ["QUEUE", "MowerListResponder", "error_reply", "within"]

log = structlog.get_logger("mowdeck.fleet.listing")
QUEUE = "fleet"
# The share of the connection's max_payload a reply may use; the rest is margin.
PAYLOAD_SHARE = 0.9
# A reply without mowers but with next_after: what every page costs besides its mowers.
_FRAME = len(encode(MowerListReply(mowers=[], next_after=uuid.UUID(int=0))))


def error_reply(code: int, detail: str) -> tuple[bytes, dict[str, str]]:
    """An error answer that cannot be mistaken for an empty list.

    ``mowers`` is null, so decoding it as ``MowerListReply`` fails; the NATS service
    headers carry the code and text for clients that look at them first.
    """
    body = json.dumps({"mowers": None, "error": {"code": code, "detail": detail}}).encode()
    return body, {"Nats-Service-Error": detail[:200], "Nats-Service-Error-Code": str(code)}


def within(reply: MowerListReply, budget: int) -> tuple[MowerListReply, list[MowerRegistration]]:
    """``reply`` cut so that it encodes to at most ``budget`` bytes; also what no page holds.

    A cut page ends early with ``next_after`` at its last mower, so the caller asks on
    (the contract lets a page hold fewer than ``limit``). A registration that alone is
    larger than ``budget`` is passed over, so it cannot block the ones behind it.
    """
    kept: list[MowerRegistration] = []
    too_large: list[MowerRegistration] = []
    size = _FRAME
    for registration in reply.mowers:
        cost = len(encode(registration)) + 1  # and its comma
        if _FRAME + cost > budget:
            too_large.append(registration)
        elif size + cost > budget:
            return MowerListReply(mowers=kept, next_after=_last(kept, too_large)), too_large
        else:
            kept.append(registration)
            size += cost
    return MowerListReply(mowers=kept, next_after=reply.next_after), too_large


def _last(kept: list[MowerRegistration], passed: list[MowerRegistration]) -> uuid.UUID:
    return max(r.mower_id for r in (*kept[-1:], *passed[-1:]))


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
            await self._send(msg.reply, body, headers)
            return
        passed: list[MowerRegistration] = []
        try:
            reply = request.answer(await self._repository.all_registrations())
            body = encode(reply)
            budget = int(self._bus.nc.max_payload * PAYLOAD_SHARE)
            if len(body) > budget:
                reply, passed = within(reply, budget)
                body = encode(reply)
        except Exception as err:
            log.exception("listing mowers failed")
            await self._unavailable(msg.reply, f"registry unavailable: {type(err).__name__}")
            return
        try:
            await self._bus.nc.publish(msg.reply, body)
        except Exception as err:
            log.exception("mower list reply not sent")
            await self._unavailable(msg.reply, f"reply not sent: {type(err).__name__}")
            return
        for registration in passed:
            log.error(
                "mower left out of the list: its registration exceeds the bus's max_payload",
                mower_id=str(registration.mower_id),
            )
        self._answered.labels("ok").inc()
        log.debug(
            "mower list answered",
            shard_index=request.shard_index,
            shard_count=request.shard_count,
            mowers=len(reply.mowers),
            more=reply.next_after is not None,
        )

    async def _unavailable(self, reply: str, detail: str) -> None:
        body, headers = error_reply(503, detail)
        self._answered.labels("error").inc()
        await self._send(reply, body, headers)

    async def _send(self, reply: str, body: bytes, headers: dict[str, str]) -> None:
        # An error reply that cannot be sent either (the connection is gone): the
        # requester times out, as it would without any replica.
        try:
            await self._bus.nc.publish(reply, body, headers=headers)
        except Exception:
            log.exception("error reply not sent")

    async def stop(self) -> None:
        """Leave the queue group."""
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None
