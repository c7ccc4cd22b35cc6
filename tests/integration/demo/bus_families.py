"""The subject families the bus fuzzing feeds, each with its valid message and sentinel."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import msgspec

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    ContractError,
    EventEnvelope,
    MowerListReply,
    MowerListRequest,
    MowerState,
    SetBladeHeight,
    UserRef,
    decode,
    decode_command,
    decode_event,
    decode_result,
    decode_state,
)
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck import demo
from mowdeck.gateway.service import GatewayService
from mowdeck.kit.bus import Bus
from mowdeck.realtime.service import RealtimeService
from tests.support.eventually import eventually

TERMINATED = {"message terminated", "command terminated", "state terminated"}
FAILURES = {"handler failed", "emergency lane failed on a message"}
Check = Callable[["System"], Awaitable[None]]


@dataclass
class System:
    """The running demo and what the test needs of it."""

    running: demo.Demo
    bus: Bus
    http: aiohttp.ClientSession
    logs: list[dict[str, Any]]

    @property
    def gateway(self) -> GatewayService:
        return next(s for s in self.running.services if isinstance(s, GatewayService))

    def lane_ignored(self) -> float:
        """Stop announcements the gateway's emergency lane counted as invalid."""
        found = self.gateway.metrics_registry.get_sample_value(
            "mowdeck_gateway_emergency_announcements_ignored_total", {"reason": "invalid"}
        )
        return found or 0.0

    def realtime_received(self, stream: str) -> float:
        """Messages Realtime's live subscription on ``stream`` received so far."""
        realtime = next(s for s in self.running.services if isinstance(s, RealtimeService))
        found = realtime.metrics_registry.get_sample_value(
            "mowdeck_realtime_bus_messages_received_total", {"stream": stream}
        )
        return found or 0.0

    async def command(self, mower: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.running.fleet_url}/v1/mowers/{mower}/commands?wait=20"
        async with self.http.post(url, json={"command": body}) as r:
            answer: dict[str, Any] = await r.json()
        assert r.status == 200, answer
        return answer

    async def get(self, url: str) -> tuple[int, Any]:
        async with self.http.get(url) as r:
            return r.status, await r.json()


@dataclass
class Family:
    """Subjects of one kind, the decoder that must refuse the junk, and a sentinel."""

    name: str
    subjects: Callable[[System], list[str]]
    stream: str | None
    valid: dict[str, Any]
    decoder: Callable[[bytes], object]
    sentinel: Check
    # No service consumes ``event.site.*`` with a durable yet: its junk goes to Realtime's
    # live subscription only. Set this once one does, and its durables are held to it.
    durables: bool = True


def refused_by(decoder: Callable[[bytes], object]) -> Callable[[bytes], bool]:
    def refused(data: bytes) -> bool:
        try:
            decoder(data)
        except (ContractError, ValueError, RecursionError):
            return True
        return False

    return refused


_NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
_MOWER = uuid.UUID(int=7)
_ENVELOPE = CommandEnvelope.issue(
    mower_id=_MOWER,
    account_id=_MOWER,
    command=SetBladeHeight(height_mm=40),
    issued_by="user:fuzz",
    now=_NOW,
    ttl=timedelta(seconds=30),
)
_STATE = MowerState(
    mower_id=_MOWER, account_id=_MOWER, observed_at=_NOW, activity="idle", battery=5
)
_RESULT = CommandResult(command_id=_MOWER, mower_id=_MOWER, status="executed", at=_NOW)
_USER_EVENT = EventEnvelope.new(
    "identity.user.disabled", UserRef(user_id="user:x"), producer="fuzz", now=_NOW
)


def _builtins(value: object) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


def _list_request(data: bytes) -> object:
    return decode(data, MowerListRequest)


async def _command_executes(system: System) -> None:
    answer = await system.command(system.running.example or system.running.mowers[-1], HEIGHT)
    assert answer["status"] in {"executed", "failed"}, answer


async def _stop_executes(system: System) -> None:
    body = {"kind": "emergency_stop", "reason": "fuzz sentinel"}
    answer = await system.command(system.running.mowers[-2], body)
    assert answer["status"] in {"executed", "failed"}, answer


async def _state_read(system: System) -> None:
    mower, since = system.running.mowers[0], datetime.now(UTC)
    url = f"{system.running.telemetry_url}/v1/mowers/{mower}/state"

    async def newer() -> bool:
        status, body = await system.get(url)
        return status == 200 and datetime.fromisoformat(body["observed_at"]) >= since

    await eventually(newer, 30, interval=0.2, what="a state newer than the batch")


async def _timeline_read(system: System) -> None:
    mower = system.running.example or system.running.mowers[-1]
    answer = await system.command(mower, HEIGHT)
    url = f"{system.running.telemetry_url}/v1/mowers/{mower}/commands"

    async def listed() -> bool:
        status, body = await system.get(url)
        items = body.get("items", body) if isinstance(body, dict) else body
        return status == 200 and answer["command_id"] in str(items)

    await eventually(listed, 20, interval=0.2, what="the sentinel in the command timeline")


async def _list_answered(system: System) -> None:
    data = await system.bus.request(FLEET_MOWERS_LIST, MowerListRequest(), timeout=5)
    reply = decode(data, MowerListReply)
    assert {m.mower_id for m in reply.mowers} >= set(system.running.mowers)


HEIGHT = {"kind": "set_blade_height", "height_mm": 35}


def _mower_subjects(prefix: str) -> Callable[[System], list[str]]:
    return lambda system: [f"{prefix}{m}" for m in system.running.mowers]


def _event_subjects(*names: str) -> Callable[[System], list[str]]:
    return lambda _system: [f"event.{n}" for n in names]


FAMILIES = [
    Family(
        "command.mower.*",
        _mower_subjects("command.mower."),
        "COMMANDS",
        _builtins(_ENVELOPE),
        decode_command,
        _command_executes,
    ),
    Family(
        "emergency.mower.*",
        _mower_subjects("emergency.mower."),
        None,
        _builtins(_ENVELOPE),
        decode_command,
        _stop_executes,
    ),
    Family(
        "telemetry.mower.*",
        _mower_subjects("telemetry.mower."),
        "TELEMETRY",
        _builtins(_STATE),
        decode_state,
        _state_read,
    ),
    Family(
        "command.result.mower.*",
        _mower_subjects("command.result.mower."),
        "COMMANDS",
        _builtins(_RESULT),
        decode_result,
        _timeline_read,
    ),
    Family(
        "event.mower.*",
        _event_subjects("mower.registered", "mower.updated", "mower.removed", "mower.connected"),
        "EVENTS",
        _builtins(_USER_EVENT),
        decode_event,
        _command_executes,
    ),
    Family(
        "event.identity.*",
        _event_subjects("identity.user.disabled", "identity.grants.changed"),
        "EVENTS",
        _builtins(_USER_EVENT),
        decode_event,
        _command_executes,
    ),
    Family(
        "event.site.*",
        _event_subjects("site.created", "site.areas_changed"),
        "EVENTS",
        _builtins(_USER_EVENT),
        decode_event,
        _command_executes,
        durables=False,
    ),
    Family(
        "fleet.mowers.list",
        lambda _system: [FLEET_MOWERS_LIST],
        None,
        {"shard_index": 0, "shard_count": 1, "after": str(_MOWER)},
        _list_request,
        _list_answered,
    ),
]
