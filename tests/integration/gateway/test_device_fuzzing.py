"""Devices that misbehave lose their link with a reason; no other mower notices.

Stand-in devices (an aiohttp server speaking the device protocol) send, once their hello
is through, one thing each: a malformed frame drawn by Hypothesis, a frame over the size
limit, a state of another mower (the real one next to them), a second hello of another
mower, or a flood of states. Each link must be closed with code 1008 (1009 for the large
frame), logged with its reason and counted by kind; on the next dial the stand-in
behaves and the link comes back. Meanwhile a real simulated mower on the same shard is
commanded and reports states, and the forged state never reaches its subject.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec
import pytest
import structlog
from aiohttp import WSCloseCode, web

from contracts.v1 import (
    Connection,
    MowerRegistration,
    MowerState,
    SetBladeHeight,
    decode_state,
)
from mowdeck.gateway.service import GatewayService
from mowdeck.kit.bus import Bus
from simulator import SimulatorServer
from simulator.protocol import Hello, ProtocolError, StateFrame, decode_device_frame, encode_frame
from tests.integration.gateway.conftest import (
    ACCOUNT,
    ResultLog,
    command,
    running_gateway,
    settings_for,
    wait_connected,
)
from tests.support.eventually import eventually
from tests.support.fuzzing import draw, examples, junk
from tests.support.natsserver import NatsServer


def _state(mower_id: uuid.UUID, **changes: object) -> MowerState:
    base = MowerState(
        mower_id=mower_id,
        account_id=ACCOUNT,
        observed_at=datetime.now(UTC),
        activity="idle",
        battery=50,
    )
    return msgspec.structs.replace(base, **changes)


def _refused(data: bytes) -> bool:
    try:
        decode_device_frame(data)
    except ProtocolError:
        return True
    return False


@dataclass
class StandIns:
    """Stand-in devices by mower id: what each sends after hello on its first link."""

    sends: dict[uuid.UUID, list[bytes]] = field(default_factory=dict)
    dials: collections.Counter[uuid.UUID] = field(default_factory=collections.Counter)
    closes: dict[uuid.UUID, int | None] = field(default_factory=dict)
    url: str = ""

    def add(self, frames: list[bytes]) -> MowerRegistration:
        mower_id = uuid.uuid4()
        self.sends[mower_id] = frames
        options = {"url": f"{self.url}/mowers/{mower_id}/ws", "backoff_max_seconds": 0.5}
        options["backoff_initial_seconds"] = 0.05
        return MowerRegistration(
            mower_id=mower_id,
            account_id=ACCOUNT,
            name="stand-in",
            connection=Connection(kind="simulator", options=options),
        )

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        mower_id = uuid.UUID(request.match_info["mower_id"])
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        self.dials[mower_id] += 1
        await ws.send_bytes(encode_frame(Hello(mower_id=mower_id)))
        if self.dials[mower_id] == 1:
            for frame in self.sends[mower_id]:
                if ws.closed:
                    break
                try:
                    await ws.send_bytes(frame)
                except (ConnectionError, RuntimeError):
                    break
        else:
            await ws.send_bytes(encode_frame(StateFrame(state=_state(mower_id))))
        async for _ in ws:
            pass
        if self.dials[mower_id] == 1:
            self.closes[mower_id] = ws.close_code
        return ws


@pytest.fixture
async def stand_ins() -> AsyncIterator[StandIns]:
    """Stand-in devices on a port of their own."""
    devices = StandIns()
    app = web.Application()
    app.router.add_get("/mowers/{mower_id}/ws", devices.handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    devices.url = f"ws://127.0.0.1:{port}"
    yield devices
    await runner.cleanup()


class TelemetrySeen:
    """Every state published on ``telemetry.mower.<id>`` for one mower, read from the stream."""

    def __init__(self) -> None:
        self.states: list[MowerState] = []

    async def on(self, msg: object) -> None:
        self.states.append(decode_state(msg.data))  # type: ignore[attr-defined]


def _closed_count(gateway: GatewayService, reason: str) -> float:
    sample = gateway.metrics_registry.get_sample_value(
        "mowdeck_gateway_device_links_closed_total", {"reason": reason}
    )
    return sample or 0.0


@pytest.mark.timeout(120)
async def test_a_device_that_misbehaves_loses_its_link_and_no_other_mower_notices(
    bus: Bus,
    sim: SimulatorServer,
    results: ResultLog,
    stand_ins: StandIns,
    nats_server: NatsServer,
) -> None:
    good = sim.registrations()[0]
    valid = msgspec.to_builtins(StateFrame(state=_state(uuid.uuid4())))
    malformed = draw(junk(valid).filter(_refused), examples(25), at=29)
    assert len(malformed) >= 10
    kinds: dict[uuid.UUID, str] = {}
    registrations = [good]
    for frame in malformed:
        reg = stand_ins.add([frame])
        kinds[reg.mower_id] = "malformed_frame"
        registrations.append(reg)
    forged = _state(good.mower_id, error_code="forged", battery=1)
    special = {
        "frame_too_large": [b'{"type":"state","v":1,"pad":"' + b"x" * (80 << 10) + b'"}'],
        "foreign_mower": [encode_frame(StateFrame(state=forged))],
        "flood": [],  # filled below with the stand-in's own states
    }
    for kind, frames in special.items():
        reg = stand_ins.add(frames)
        if kind == "flood":
            # The flood is of the stand-in's own states: valid frames, too many of them
            # (a burst of 1,000 and 200 a second: closed once it sends faster than 300).
            frame = encode_frame(StateFrame(state=_state(reg.mower_id)))
            stand_ins.sends[reg.mower_id] = [frame] * 5000
        kinds[reg.mower_id] = kind
        registrations.append(reg)
    hello_of_another = stand_ins.add([encode_frame(Hello(mower_id=good.mower_id))])
    kinds[hello_of_another.mower_id] = "foreign_mower"
    registrations.append(hello_of_another)

    seen = TelemetrySeen()
    sub = await bus.js.subscribe(
        f"telemetry.mower.{good.mower_id}", stream="TELEMETRY", ordered_consumer=True, cb=seen.on
    )
    settings = settings_for(nats_server.url, registrations)
    with structlog.testing.capture_logs() as logs:
        async with running_gateway(settings) as gw:
            await wait_connected(gw, 1)
            # Commands to the real mower while the stand-ins misbehave: each executes.
            sent = []
            for height in (30, 40, 50):
                cmd = command(good, SetBladeHeight(height_mm=height))
                await bus.publish_command(cmd, now=datetime.now(UTC))
                sent.append(cmd)
            for cmd in sent:
                assert (await results.wait_final(cmd.command_id)).status == "executed"
            await eventually(lambda: len(stand_ins.closes) == len(kinds), 30, what="closes")
            # Every stand-in dials again and, behaving now, is up again.
            await eventually(
                lambda: all(stand_ins.dials[m] >= 2 for m in kinds), 30, what="redials"
            )
            await wait_connected(gw, len(registrations))
            counted = {k: _closed_count(gw, k) for k in set(kinds.values())}
            # A state of the real mower published after every close: the sentinel that
            # shows the forged state, sent before, would have arrived by now.
            before = len(seen.states)
            cmd = command(good, SetBladeHeight(height_mm=60))
            await bus.publish_command(cmd, now=datetime.now(UTC))
            assert (await results.wait_final(cmd.command_id)).status == "executed"
            await eventually(lambda: any(s.blade_height_mm == 60 for s in seen.states[before:]), 10)
    await sub.unsubscribe()

    assert not [s for s in seen.states if s.error_code == "forged"]
    wanted = collections.Counter(kinds.values())
    for kind, count in wanted.items():
        assert counted[kind] == count, (kind, counted)
    too_big, violation = WSCloseCode.MESSAGE_TOO_BIG, WSCloseCode.POLICY_VIOLATION
    for mower_id, kind in kinds.items():
        code = stand_ins.closes[mower_id]
        assert code == (too_big if kind == "frame_too_large" else violation), (kind, code)
    closed = {e["mower_id"]: e["reason"] for e in logs if e["event"] == "device link closed"}
    for mower_id, kind in kinds.items():
        reason = closed[str(mower_id)]
        assert reason.startswith(f"protocol violation: {kind.replace('_', ' ')}: "), reason
