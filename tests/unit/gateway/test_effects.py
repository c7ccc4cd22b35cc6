"""The effect runner: the last expiry check before the device, the ids of published states."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from contracts.v1 import (
    CommandEnvelope,
    Connection,
    EmergencyStop,
    EventEnvelope,
    MowerRegistration,
    MowerState,
    StartMow,
    decode_event,
    encode,
)
from contracts.v1.subjects import MSG_ID_HEADER
from mowdeck.gateway.actor import DeviceOutcome
from mowdeck.gateway.connections import LinkLostError
from mowdeck.gateway.controller import (
    PREEMPTED,
    PublishLink,
    PublishState,
    SendToDevice,
    result_effect,
)
from mowdeck.gateway.effects import EffectRunner
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.kit.logging import ids_as_text
from tests.support.eventually import eventually
from tests.support.fakes import FakeBus

MOWER = uuid.UUID("00000000-0000-4000-8000-000000000003")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
REG = MowerRegistration(
    mower_id=MOWER, account_id=ACCOUNT, name="m", connection=Connection(kind="simulator")
)


class RecordingConnection:
    connected = True

    def __init__(self) -> None:
        self.sent: list[CommandEnvelope] = []

    async def send(self, envelope: CommandEnvelope, *, timeout: float) -> Any:
        self.sent.append(envelope)
        return SimpleNamespace(status="executed", reason=None)


def runner(now: datetime) -> tuple[EffectRunner, RecordingConnection, list[object]]:
    conn = RecordingConnection()
    told: list[object] = []
    effects = EffectRunner(
        FakeBus(),  # type: ignore[arg-type]  # no publish in these tests
        GatewayMetrics(CollectorRegistry()),
        connections={MOWER: conn},  # type: ignore[dict-item]
        tell=lambda _mower_id, message: told.append(message),
        device_timeout=1.0,
        producer="test",
        clock=lambda: now,
    )
    return effects, conn, told


def envelope(ttl_s: float, command: Any = None) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=StartMow() if command is None else command,
        issued_by="user:a",
        now=T0,
        ttl=timedelta(seconds=ttl_s),
    )


async def test_a_send_decided_before_a_stop_is_never_written_after_it() -> None:
    # The controller started a command, then took a stop: both reach the loop in one
    # drain. The stop is written at once; the command's send, a turn later, must not be.
    start, stop = envelope(ttl_s=5), envelope(ttl_s=5, command=EmergencyStop(reason="test"))
    effects, conn, told = runner(now=T0 + timedelta(seconds=1))
    effects(MOWER, [SendToDevice(start)])
    effects(MOWER, [SendToDevice(stop)])
    await effects.settle(timeout=1.0)
    assert conn.sent == [stop]
    assert DeviceOutcome(start, "rejected", PREEMPTED) in told
    assert DeviceOutcome(stop, "executed", None) in told
    # Decided after the stop: written.
    later = envelope(ttl_s=5)
    effects(MOWER, [SendToDevice(later)])
    await effects.settle(timeout=1.0)
    assert conn.sent == [stop, later]


async def test_a_send_decided_before_the_controller_knew_of_the_lanes_stop_is_rejected() -> None:
    # The lane sent a stop ahead of the stream; the controller, not told yet, starts a
    # command published before the stop. Until the controller answers the stop, every
    # send it decides is one the stop overtook.
    start, stop = envelope(ttl_s=5), envelope(ttl_s=5, command=EmergencyStop(reason="test"))
    now = T0 + timedelta(seconds=1)
    effects, conn, told = runner(now=now)
    effects.stop_sent_ahead(MOWER, stop.command_id)
    effects(MOWER, [SendToDevice(stop)])
    effects(MOWER, [SendToDevice(start)])
    await effects.settle(timeout=1.0)
    assert conn.sent == [stop]
    assert DeviceOutcome(start, "rejected", PREEMPTED) in told
    effects(MOWER, [result_effect(stop, "accepted", now)])  # the controller knows now
    later = envelope(ttl_s=5)
    effects(MOWER, [SendToDevice(later)])
    await effects.settle(timeout=1.0)
    assert conn.sent == [stop, later]


async def test_a_command_that_expired_on_its_way_to_the_device_is_not_sent() -> None:
    # The controller sent it while valid; by the time the loop performs the send it is not.
    env = envelope(ttl_s=5)
    effects, conn, told = runner(now=T0 + timedelta(seconds=6))
    effects(MOWER, [SendToDevice(env)])
    await effects.settle(timeout=1.0)
    assert conn.sent == []
    assert told == [DeviceOutcome(env, "expired", None)]


async def test_a_valid_command_is_sent_and_its_outcome_reported() -> None:
    env = envelope(ttl_s=5)
    effects, conn, told = runner(now=T0 + timedelta(seconds=1))
    effects(MOWER, [SendToDevice(env)])
    await effects.settle(timeout=1.0)
    assert conn.sent == [env]
    assert told == [DeviceOutcome(env, "executed", None)]


async def test_heartbeats_of_an_unchanged_state_are_not_duplicates_of_it() -> None:
    # The stream drops a repeated msg id within its duplicate window (30 s), so a
    # heartbeat republishing a state the device has not changed needs an id of its own.
    bus = FakeBus()
    effects = EffectRunner(
        bus,  # type: ignore[arg-type]
        GatewayMetrics(CollectorRegistry()),
        connections={},
        tell=lambda _mower_id, _message: None,
        device_timeout=1.0,
        producer="test",
    )
    state = MowerState(
        mower_id=MOWER, account_id=ACCOUNT, observed_at=T0, activity="docked", battery=90
    )
    publisher = asyncio.create_task(effects._publish())
    try:
        effects(MOWER, [PublishState(state, heartbeat=False)])
        for _ in range(2):
            await asyncio.sleep(0.01)  # heartbeats are due at different times
            effects(MOWER, [PublishState(state, heartbeat=True)])
        await eventually(lambda: len(bus.nc.published) == 3, 1.0)
    finally:
        publisher.cancel()
    ids = [(p.headers or {})[MSG_ID_HEADER] for p in bus.nc.published]
    assert len(ids) == len(set(ids)) == 3
    assert ids[0] == f"{MOWER}:{T0.timestamp():.6f}"  # a change keeps the state's own id


async def test_a_link_lost_after_sending_is_reported_as_such_not_as_a_timeout() -> None:
    class LosingConnection(RecordingConnection):
        async def send(self, envelope: CommandEnvelope, *, timeout: float) -> Any:
            raise LinkLostError("link lost before the mower answered: link closed")

    env = envelope(ttl_s=5)
    effects, _, told = runner(now=T0 + timedelta(seconds=1))
    effects._connections = {MOWER: LosingConnection()}  # type: ignore[dict-item]
    effects(MOWER, [SendToDevice(env)])
    await effects.settle(timeout=1.0)
    assert told == [
        DeviceOutcome(env, "failed", "link lost before the mower answered: link closed")
    ]


async def test_a_link_event_reason_fits_the_contract() -> None:
    published: list[EventEnvelope[Any]] = []
    effects, _, _ = runner(now=T0)

    async def capture(event: EventEnvelope[Any]) -> None:
        published.append(event)

    effects._publish_event = capture  # type: ignore[method-assign]
    effects(MOWER, [PublishLink(REG, False, "link error: " + "y" * 2000 + "\x00")])
    await effects.settle(timeout=1.0)
    (event,) = published
    decoded = decode_event(encode(event))
    assert decoded.payload.reason == event.payload.reason
    assert len(event.payload.reason) == 500


async def test_a_failed_publish_is_logged_naming_the_mower_and_command_it_was_for() -> None:
    effects = EffectRunner(
        FakeBus(fail_core=1),  # type: ignore[arg-type]  # its first publish fails
        GatewayMetrics(CollectorRegistry()),
        connections={},
        tell=lambda *_: None,
        device_timeout=1.0,
        producer="test",
        clock=lambda: T0,
    )
    await effects.start()
    env = envelope(30)
    try:
        with capture_logs(processors=[merge_contextvars, ids_as_text]) as logs:
            effects(MOWER, [result_effect(env, "rejected", T0, "unknown mower")])
            failed = await eventually(
                lambda: [line for line in logs if line["event"] == "publish failed; retrying"],
                what="the failed publish's line",
            )
    finally:
        await effects.stop()
    assert (failed[0]["mower_id"], failed[0]["command_id"]) == (str(MOWER), str(env.command_id))
