"""Commands through a real gateway shard to real simulated mowers."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from nats.aio.msg import Msg
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from actors import DispatcherActor
from contracts.v1 import (
    EmergencyStop,
    PauseMow,
    ReturnToDock,
    SetBladeHeight,
    StartMow,
    encode,
)
from contracts.v1.subjects import PRIORITY_HEADER, command_subject
from mowdeck.gateway import deliveries as deliveries_module
from mowdeck.gateway.actor import Submit
from mowdeck.gateway.controller import PREEMPTED
from mowdeck.kit.bus import Bus
from simulator import LatencyFault, SimulatorServer
from tests.integration.gateway.conftest import (
    ResultLog,
    command,
    running_gateway,
    sentinel_command,
    settings_for,
    wait_connected,
)
from tests.support.eventually import eventually
from tests.support.jetstream import unsettled
from tests.support.settings import fast_path_from_environment


def received(sim: SimulatorServer, mower_id: uuid.UUID) -> list[tuple[uuid.UUID, str, str]]:
    records = sim.fleet.mower(mower_id).commands or []
    return [(r.command_id, r.kind, r.status) for r in records]


async def test_every_admission_path(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        now = datetime.now(UTC)

        ok = command(mower, SetBladeHeight(height_mm=55))
        await bus.publish_command(ok, now=now)
        assert (await results.wait_final(ok.command_id)).status == "executed"
        assert results.of(ok.command_id) == ["accepted", "executed"]
        assert (ok.command_id, "set_blade_height", "executed") in received(sim, mower.mower_id)

        unknown = command(mower, PauseMow())
        unknown = unknown.__class__(
            **{
                **{f: getattr(unknown, f) for f in unknown.__struct_fields__},
                "mower_id": uuid.uuid4(),
            }
        )
        await bus.publish_command(unknown, now=now)
        final = await results.wait_final(unknown.command_id)
        assert (final.status, final.reason) == ("rejected", "unknown mower")

        foreign_account = command(mower, StartMow(), account=uuid.uuid4())
        await bus.publish_command(foreign_account, now=now)
        final = await results.wait_final(foreign_account.command_id)
        assert (final.status, final.reason) == ("rejected", "account does not own this mower")
        assert foreign_account.command_id not in {c for c, _, _ in received(sim, mower.mower_id)}

        # Published without the publisher's expiry guard, as a delayed producer would.
        stale = command(mower, StartMow(), now=now - timedelta(minutes=2))
        await bus.publish(
            command_subject(mower.mower_id),
            encode(stale),
            msg_id=str(stale.command_id),
            headers={PRIORITY_HEADER: "normal"},
        )
        assert (await results.wait_final(stale.command_id)).status == "expired"

        # Malformed and mismatched envelopes are terminated: no result, never redelivered.
        await bus.publish(command_subject(mower.mower_id), b"{garbage", msg_id="bad-1")
        other = command(mowers[1], PauseMow())
        await bus.publish(
            command_subject(mower.mower_id), encode(other), msg_id=str(other.command_id)
        )
        await eventually(lambda: gw.metrics.refused.labels("invalid")._value.get() == 2)
        await sentinel_command(bus, results, mower)
        assert results.of(other.command_id) == []
        assert await unsettled(bus, "COMMANDS", gw.shard.durable, until=(0, 0)) == (0, 0)
        info = await bus.js.consumer_info("COMMANDS", gw.shard.durable)
        assert info.num_redelivered == 0


async def test_other_shards_commands_are_acknowledged_without_acting(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mine = [m for m in mowers if m.mower_id.int % 2 == 0]
    theirs = [m for m in mowers if m.mower_id.int % 2 == 1]
    assert mine and theirs, "the seed must give both shards a mower"
    async with running_gateway(
        settings_for(nats_server.url, mowers, shard_index=0, shard_count=2)
    ) as gw:
        assert set(gw.mowers) == {m.mower_id for m in mine}
        env = command(theirs[0], PauseMow())
        await bus.publish_command(env, now=datetime.now(UTC))
        await eventually(lambda: gw.metrics.foreign._value.get() == 1)
        await sentinel_command(bus, results, mine[0])  # after it on the shard's consumer
        assert results.of(env.command_id) == []
        assert received(sim, theirs[0].mower_id) == []


async def test_emergency_stop_overtakes_a_slow_command_and_a_queue(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        await sim.inject(mower.mower_id, LatencyFault(ms=2000))
        slow = command(mower, StartMow())
        await bus.publish_command(slow, now=datetime.now(UTC))
        await eventually(lambda: received(sim, mower.mower_id))
        queued = [command(mower, ReturnToDock() if i % 2 else PauseMow()) for i in range(100)]
        await asyncio.gather(*(bus.publish_command(q, now=datetime.now(UTC)) for q in queued))
        stop = command(mower, EmergencyStop(reason="person on the lawn"))
        sent_at = asyncio.get_running_loop().time()
        await bus.publish_command(stop, now=datetime.now(UTC))
        # The stop reaches the mower while the slow start is still in flight.
        await eventually(
            lambda: any(c == stop.command_id for c, _, _ in received(sim, mower.mower_id)),
            timeout=5,
        )
        assert asyncio.get_running_loop().time() - sent_at < 1.5
        assert (await results.wait_final(stop.command_id)).status == "executed"
        finals = {q.command_id: await results.wait_final(q.command_id) for q in queued}
        assert {(f.status, f.reason) for f in finals.values()} == {("rejected", PREEMPTED)}
        await results.wait_final(slow.command_id)
        # Nothing of the overtaken queue ever reached the mower.
        got = [c for c, _, _ in received(sim, mower.mower_id)]
        assert got == [slow.command_id, stop.command_id]
        assert sim.fleet.mower(mower.mower_id).state(datetime.now(UTC)).activity == "stopped"


async def test_a_stop_is_sent_ahead_of_a_busy_loop(
    sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    """The loop has a second of work queued when the stop is published: the stop's send
    runs within a few of those callbacks, not after them (the emergency lane)."""
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        order: list[object] = []

        class Recording:
            """The mower's link, noting when a stop is handed to it."""

            def __init__(self, link: Any) -> None:
                self._link = link

            def __getattr__(self, name: str) -> Any:
                return getattr(self._link, name)

            async def send(self, envelope: Any, *, timeout: float) -> Any:
                if envelope.is_emergency:
                    order.append("stop sent")
                return await self._link.send(envelope, timeout=timeout)

        gw.connections[mower.mower_id] = Recording(gw.connections[mower.mower_id])  # type: ignore[assignment]
        stop = command(mower, EmergencyStop(reason="lane test"))
        # A publisher on another thread and loop: this loop is about to be busy.
        go = threading.Event()
        published = threading.Event()

        def publisher() -> None:
            async def run() -> None:
                other = await Bus.connect(
                    nats_server.url, name="lane-test", fast_path=fast_path_from_environment()
                )
                await asyncio.to_thread(go.wait, 10)
                await other.publish_command(stop, now=datetime.now(UTC))
                published.set()
                await other.drain()

            asyncio.run(run())

        thread = threading.Thread(target=publisher)
        thread.start()
        await asyncio.sleep(0.2)  # the publisher is connected

        def busy(i: int) -> None:
            until = time.perf_counter() + 0.0005
            while time.perf_counter() < until:
                pass
            order.append(i)

        loop = asyncio.get_running_loop()
        for i in range(2000):
            loop.call_soon(busy, i)
        go.set()
        await eventually(lambda: "stop sent" in order and len(order) > 2000, timeout=20)
        thread.join(10)
        assert published.is_set()
        # About a second of callbacks was queued; the stop went out within the first
        # fraction of it (the lane thread waits for the interpreter's switch interval).
        assert order.index("stop sent") < 1000, order.index("stop sent")
        assert (await results.wait_final(stop.command_id)).status == "executed"


async def test_a_slow_mower_does_not_delay_another(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    slow_mower, fast_mower = mowers[0], mowers[1]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        await sim.inject(slow_mower.mower_id, LatencyFault(ms=3000))
        slow = [command(slow_mower, SetBladeHeight(height_mm=30 + i)) for i in range(3)]
        for env in slow:
            await bus.publish_command(env, now=datetime.now(UTC))
        started = asyncio.get_running_loop().time()
        fast = [command(fast_mower, SetBladeHeight(height_mm=30 + i)) for i in range(20)]
        for env in fast:
            await bus.publish_command(env, now=datetime.now(UTC))
        for env in fast:
            assert (await results.wait_final(env.command_id)).status == "executed"
        assert asyncio.get_running_loop().time() - started < 2.0
        assert results.final(slow[-1].command_id) is None  # still waiting its turn


async def test_duplicates_and_redeliveries_execute_once(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        env = command(mower, SetBladeHeight(height_mm=42))
        await bus.publish_command(env, now=datetime.now(UTC))
        await bus.publish_command(env, now=datetime.now(UTC))  # same msg id: dropped by the stream
        # The same command under another msg id gets past the stream: the controller
        # de-duplicates by command id, like a redelivery after a missing ack.
        await bus.publish(
            command_subject(mower.mower_id),
            encode(env),
            msg_id="replay-1",
            headers={PRIORITY_HEADER: "normal"},
        )
        await results.wait_final(env.command_id)
        await sentinel_command(bus, results, mower)  # behind the replay, on its subject
        assert results.of(env.command_id) == ["accepted", "executed"]
        assert [c for c, _, _ in received(sim, mower.mower_id)].count(env.command_id) == 1


async def test_expiry_right_before_sending(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        await sim.inject(mower.mower_id, LatencyFault(ms=1500))
        blocker = command(mower, StartMow())
        short = command(mower, PauseMow(), ttl_s=0.5)
        await bus.publish_command(blocker, now=datetime.now(UTC))
        await bus.publish_command(short, now=datetime.now(UTC))
        final = await results.wait_final(short.command_id)
        assert final.status == "expired"
        assert results.of(short.command_id) == ["accepted", "expired"]
        assert short.command_id not in [c for c, _, _ in received(sim, mower.mower_id)]


async def test_a_device_that_does_not_answer_in_time_fails_the_command(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    settings = settings_for(nats_server.url, mowers, device_command_timeout_seconds=0.3)
    async with running_gateway(settings) as gw:
        await wait_connected(gw, len(mowers))
        await sim.inject(mower.mower_id, LatencyFault(ms=2000))
        env = command(mower, PauseMow())
        await bus.publish_command(env, now=datetime.now(UTC))
        final = await results.wait_final(env.command_id)
        assert final.status == "failed"
        assert final.reason is not None
        assert "no answer" in final.reason


async def test_a_shard_consumer_created_now_starts_at_the_end_of_the_stream(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    # A new shard index (a first deployment, MOWDECK_SHARD_COUNT grown) must not replay
    # the stream's day of commands, which other instances answered and ran already.
    mowers = sim.registrations()
    mower = mowers[0]
    before = command(mower, SetBladeHeight(height_mm=31), ttl_s=120)
    await bus.publish_command(before, now=datetime.now(UTC))
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        after = command(mower, SetBladeHeight(height_mm=32))
        await bus.publish_command(after, now=datetime.now(UTC))
        # ``after`` is the sentinel: published behind ``before`` on the same subject.
        assert (await results.wait_final(after.command_id)).status == "executed"
        assert results.of(before.command_id) == []
        assert before.command_id not in [c for c, _, _ in received(sim, mower.mower_id)]


async def test_a_real_redelivery_after_expiry_gets_no_second_result(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    # The gateway's ack of one command is lost; JetStream redelivers it after ack_wait,
    # when it has expired. Its results are the first delivery's, and nothing else.
    mowers = sim.registrations()
    mower = mowers[0]
    env = command(mower, SetBladeHeight(height_mm=44), ttl_s=1.0)
    marker = str(env.command_id).encode()
    real_ack_all = deliveries_module.ack_together
    lost: list[int] = []

    async def ack_all(msgs: list[Msg]) -> None:
        kept = []
        for msg in msgs:
            if marker in msg.data and not lost:
                lost.append(msg.metadata.num_delivered)
                continue  # lost on the way to the server
            kept.append(msg)
        await real_ack_all(kept)

    monkeypatch.setattr(deliveries_module, "ack_together", ack_all)
    settings = settings_for(nats_server.url, mowers, command_ack_wait_seconds=2.0)
    async with running_gateway(settings) as gw:
        await wait_connected(gw, len(mowers))
        await bus.publish_command(env, now=datetime.now(UTC))
        assert (await results.wait_final(env.command_id)).status == "executed"
        assert lost == [1]
        await eventually(lambda: gw.metrics.duplicates._value.get() == 1, timeout=10)
        assert gw.metrics.redeliveries._value.get() >= 1
        await sentinel_command(bus, results, mower)  # behind the redelivery, on its subject
        assert results.of(env.command_id) == ["accepted", "executed"]
        assert [c for c, _, _ in received(sim, mower.mower_id)].count(env.command_id) == 1


async def test_a_command_told_to_a_controller_that_just_died_reaches_its_successor(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    # Tells are handed over once per loop turn; a controller can fail between the lookup
    # and the hand-over. Its message must reach the restarted controller, and the other
    # mowers' messages of that turn must not be dropped with it.
    mowers = sim.registrations()
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        dead = DispatcherActor.start(dispatcher=gw.parts.dispatcher)
        dead.stop()
        first, second = mowers[0], mowers[1]
        lost = command(first, SetBladeHeight(height_mm=33))
        other = command(second, SetBladeHeight(height_mm=34))
        gw.parts.router._tells.append((str(first.mower_id), dead, Submit(lost, 1)))
        gw.tell(second.mower_id, Submit(other, 2))  # the same turn's batch
        assert (await results.wait_final(lost.command_id)).status == "executed"
        assert (await results.wait_final(other.command_id)).status == "executed"


async def test_healthz_fails_when_a_part_the_shard_needs_has_died(
    sim: SimulatorServer, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        async with aiohttp.ClientSession(gw.url) as http:
            async with http.get("/healthz") as r:
                assert r.status == 200
            task = gw.parts.intake.task
            assert task is not None
            task.cancel()  # as if admission had died of a bug
            await asyncio.gather(task, return_exceptions=True)
            async with http.get("/healthz") as r:
                assert r.status == 503
                assert (await r.json())["failed"] == ["admission"]


async def test_commands_for_a_controller_being_restarted_wait_for_it_in_order(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    # A controller that failed (a bug) is restarted after a backoff; what is admitted for
    # its mower meanwhile must reach the restarted one, in order, not be dropped.
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        key = str(mower.mower_id)
        gw.tell(mower.mower_id, object())  # an unknown message: the controller fails
        await eventually(lambda: gw.parts.router.supervisor.get(key) is None, timeout=5)
        assert key in gw.parts.router.supervisor  # restart pending
        first = command(mower, SetBladeHeight(height_mm=41))
        second = command(mower, SetBladeHeight(height_mm=42))
        gw.tell(mower.mower_id, Submit(first, 100))
        gw.tell(mower.mower_id, Submit(second, 101))
        assert (await results.wait_final(first.command_id)).status == "executed"
        assert (await results.wait_final(second.command_id)).status == "executed"
        ran = [c for c, _, _ in received(sim, mower.mower_id)]
        assert ran.index(first.command_id) < ran.index(second.command_id)


class _Poison:
    """A message no controller knows: its handler raises, and the controller fails."""


async def test_the_commands_a_failed_controller_held_get_their_final_result(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    # The controller has one command at the slow device and two in its queue when it
    # fails (a bug). The one at the device is answered by its successor when the device
    # answers; the queued ones, acknowledged on the stream long ago, are answered failed,
    # never run, and the mower takes commands again.
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        await sim.inject(mower.mower_id, LatencyFault(ms=1000))
        at_device, queued, behind = (
            command(mower, SetBladeHeight(height_mm=30 + i)) for i in range(3)
        )
        for env in (at_device, queued, behind):
            await bus.publish_command(env, now=datetime.now(UTC))
        for env in (at_device, queued, behind):
            await eventually(lambda env=env: "accepted" in results.of(env.command_id))
        gw.tell(mower.mower_id, _Poison())
        for env in (queued, behind):
            final = await results.wait_final(env.command_id)
            assert (final.status, final.reason) == (
                "failed",
                "the mower's controller failed (TypeError)",
            )
        assert (await results.wait_final(at_device.command_id)).status == "executed"
        later = command(mower, StartMow())
        await bus.publish_command(later, now=datetime.now(UTC))
        assert (await results.wait_final(later.command_id, timeout=10)).status == "executed"
        ran = [c for c, _, _ in received(sim, mower.mower_id)]
        assert queued.command_id not in ran and behind.command_id not in ran
        assert ran.count(at_device.command_id) == 1
        for env in (at_device, queued, behind, later):
            assert len([s for s in results.of(env.command_id) if s != "accepted"]) == 1
        assert len(gw.parts.effects.pending) == 0  # a shutdown has nothing to wait for


async def test_commands_for_a_controller_given_up_on_are_answered_not_dropped(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    key = str(mower.mower_id)
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        supervisor = gw.parts.router.supervisor
        assert supervisor is not None
        while key not in supervisor.given_up():  # fails until the supervisor gives up
            await eventually(
                lambda: supervisor.get(key) is not None or key in supervisor.given_up(), timeout=10
            )
            if key not in supervisor.given_up():
                gw.tell(mower.mower_id, _Poison())
                await eventually(lambda: supervisor.get(key) is None, timeout=5)
        env = command(mower, SetBladeHeight(height_mm=33))
        await bus.publish_command(env, now=datetime.now(UTC))
        final = await results.wait_final(env.command_id)
        assert (final.status, final.reason) == ("failed", "the mower's controller is unavailable")
        # What the controller held when it failed for the last time is answered at once,
        # not only once another command for the mower comes along.
        held = command(mower, SetBladeHeight(height_mm=35))
        gw.parts.router._open.told(key, Submit(held, 1))
        with capture_logs(processors=[merge_contextvars]) as logs:
            gw.parts.router.controller_failed(key, TypeError("bug"), True)
        assert len(gw.parts.router._open) == 0  # answered in the call, not at the next tell
        [answered] = [e for e in logs if e["event"] == "commands of a failed controller answered"]
        assert answered["mower_id"] == key
        final = await results.wait_final(held.command_id)
        assert (final.status, final.reason) == ("failed", "the mower's controller is unavailable")
        assert env.command_id not in [c for c, _, _ in received(sim, mower.mower_id)]
        # The other mowers never noticed.
        other = command(mowers[1], SetBladeHeight(height_mm=34))
        await bus.publish_command(other, now=datetime.now(UTC))
        assert (await results.wait_final(other.command_id)).status == "executed"
