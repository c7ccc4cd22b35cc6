"""The Device-Gateway's composition root: one shard of ADR 0013."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pykka
import structlog
from aiohttp import web
from nats.js import api
from prometheus_client import CollectorRegistry

from actors import (
    ActorMetrics,
    Dispatcher,
    InMemorySnapshotStore,
    LoopBridge,
    ShardSupervisor,
    Snapshot,
    is_emergency,
)
from contracts.v1 import (
    MowerRegistration,
    MowerState,
)
from contracts.v1.subjects import COMMAND_FILTER, COMMANDS
from mowdeck.gateway.actor import (
    Close,
    ControllerActor,
    EffectOutbox,
    EmergencySubmit,
    Heartbeat,
    LinkChanged,
    Rename,
    StateReported,
    Submit,
)
from mowdeck.gateway.connections import ConnectionRegistry, MowerConnection
from mowdeck.gateway.controller import Effect, SendToDevice, result_effect
from mowdeck.gateway.effects import EffectRunner
from mowdeck.gateway.intake import EMERGENCY_MARKER, CommandIntake
from mowdeck.gateway.lane import EmergencyLane
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.names import MowerNames
from mowdeck.gateway.open_commands import OpenCommands
from mowdeck.gateway.registry import Change, FleetFeed, Registry
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.collector import GcPauses, freeze_long_lived
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from mowdeck.kit.http import (
    HttpServer,
    Readiness,
    problem_middleware,
    task_alive,
    with_ops_routes,
)

__all__ = ["GatewayService"]

log = structlog.get_logger("mowdeck.gateway")
_debug = logging.getLogger("mowdeck.gateway")


class _Link:
    """A connection's events, told to the mower's controller."""

    __slots__ = ("_service", "mower_id")

    def __init__(self, service: GatewayService, mower_id: uuid.UUID) -> None:
        self._service = service
        self.mower_id = mower_id

    def on_state(self, state: MowerState) -> None:
        if state.mower_id != self.mower_id:
            log.warning(
                "state for another mower dropped",
                mower_id=str(self.mower_id),
                reported=str(state.mower_id),
            )
            return
        self._service.tell(self.mower_id, StateReported(state))

    def on_link(self, up: bool, reason: str | None) -> None:
        self._service.tell(self.mower_id, LinkChanged(up, reason))


class GatewayService:
    """One gateway shard: registry, controllers, device links, command consumer."""

    name = "gateway"

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        bus: Bus | None = None,
        registry: CollectorRegistry | None = None,
        connections: ConnectionRegistry | None = None,
        freeze_after_seed: bool = False,
    ) -> None:
        """``freeze_after_seed``: once the registry is seeded from Fleet, move what is
        alive out of the garbage collector's sight (``mowdeck gateway`` sets it; a test
        process that builds and drops gateways must not)."""
        self.settings = settings
        self._own_bus = bus is None
        self.bus: Bus | None = bus
        self.metrics_registry = registry or CollectorRegistry()
        self.metrics = GatewayMetrics(self.metrics_registry)
        self.adapters = connections or ConnectionRegistry.from_entry_points()
        self.registry = Registry(settings.shard_index, settings.shard_count)
        self.readiness = Readiness()
        self.connections: dict[uuid.UUID, MowerConnection] = {}
        self._actor_metrics = ActorMetrics(self.metrics_registry)
        self._gc_pauses = GcPauses(self.metrics_registry)
        self._freeze_after_seed = freeze_after_seed
        self.dispatcher = Dispatcher(
            workers=settings.dispatcher_workers, metrics=self._actor_metrics
        )
        self._supervisor: ShardSupervisor | None = None
        self._bridge: LoopBridge | None = None
        self.effects: EffectRunner | None = None
        self._outbox: EffectOutbox | None = None
        self._consumer: Consumer | None = None
        self._feed: FleetFeed | None = None
        self.intake: CommandIntake | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._tells: list[tuple[str, pykka.ActorRef[Any], object]] = []
        self._held_deliveries: set[asyncio.Task[None]] = set()
        self._held: dict[str, list[object]] = {}
        self._open = OpenCommands()  # what each controller holds, answered if it fails
        self._tells_scheduled = False
        self._names = MowerNames()
        self._lane: EmergencyLane | None = None
        self._http: HttpServer | None = None
        self.durable = f"device-gateway-{settings.shard_index}"
        self._producer = f"gateway-{settings.shard_index}"

    # Lifecycle.

    async def start(self) -> None:
        """Connect, seed the registry, start consuming commands, serve health."""
        s = self.settings
        if self.bus is None:
            self.bus = await Bus.connect(
                s.nats_url, name=self._producer, fast_path=s.nats_fast_path
            )
        await self.bus.ensure_streams()
        loop = asyncio.get_running_loop()
        self._bridge = LoopBridge(loop)
        self.dispatcher.start()
        self._supervisor = ShardSupervisor(
            self.dispatcher,
            self._make_controller,
            InMemorySnapshotStore(),
            metrics=self._actor_metrics,
            on_failure=self._controller_failed,
        )
        self.effects = EffectRunner(
            self.bus,
            self.metrics,
            connections=self.connections,
            tell=self.tell,
            device_timeout=s.device_command_timeout_seconds,
            producer=self._producer,
            names=self._names,
        )
        await self.effects.start()
        self._outbox = EffectOutbox(loop, self._perform)
        for registration in s.bootstrap_mowers:
            await self.apply(registration)
        self._feed = FleetFeed(
            self.bus,
            shard_index=s.shard_index,
            shard_count=s.shard_count,
            on_apply=self.apply,
            on_remove=self.remove,
            on_retry=self.metrics.fleet_retries.inc,
            request_timeout=s.fleet_list_timeout_seconds,
            retry_initial=s.fleet_retry_initial_seconds,
            retry_max=s.fleet_retry_max_seconds,
        )
        await self._feed.start()
        self._gc_pauses.install()
        if self._freeze_after_seed:
            self._tasks.append(asyncio.create_task(self._freeze_when_seeded(), name="gc-freeze"))
        self.intake = CommandIntake(
            shard_index=s.shard_index,
            shard_count=s.shard_count,
            registry=self.registry,
            metrics=self.metrics,
            effects=self.effects,
            tell=self.tell,
        )
        self.intake.start()
        self._tasks.append(asyncio.create_task(self._heartbeats(), name="heartbeats"))
        # The emergency lane: a thread and a connection of its own that see every
        # command as it is published, so a stop is neither queued behind the stream's
        # backlog nor behind a busy turn of this loop (docs/gateway.md).
        self._lane = EmergencyLane(
            s.nats_url,
            name=f"{self._producer}-estop",
            subject=COMMAND_FILTER,
            handle=self.intake.on_lane_message,
            marker=EMERGENCY_MARKER,
            fast_path=s.nats_fast_path,
        )
        await self._lane.start()
        self._consumer = Consumer(
            self.bus,
            ConsumerSpec(
                stream=COMMANDS.name,
                subject=COMMAND_FILTER,
                durable=self.durable,
                ack_wait=s.command_ack_wait_seconds,
                # Bounds the local queue of ordinary commands awaiting admission.
                max_ack_pending=2000,
                # A shard's consumer created now (a first deployment, a new index after
                # MOWDECK_SHARD_COUNT grew) starts at the stream's end: replaying the
                # stream's day of commands would answer commands other instances answered
                # and run again those not yet expired. An existing durable keeps its place.
                deliver_policy=api.DeliverPolicy.NEW,
            ),
            self.intake.on_command,
            # The intake settles what arrives while closing: it acks the stream copy of a
            # stop the emergency lane already sent, which the next owner would send again.
            settles_while_closing=True,
        )
        await self._consumer.start()
        self._watch()
        app = web.Application(middlewares=[problem_middleware])
        with_ops_routes(app, self.readiness, self.metrics_registry)
        self._http = HttpServer(app, s.http_host, s.http_port)
        await self._http.start()
        self.readiness.set_ready()
        log.info(
            "gateway started",
            shard=s.shard_index,
            shards=s.shard_count,
            mowers=len(self.registry),
            http=self._http.url,
        )

    def _watch(self) -> None:
        # What this shard cannot work without: /healthz fails when one of them died.
        consumer, lane, intake, effects = self._consumer, self._lane, self.intake, self.effects
        assert consumer is not None
        assert lane is not None
        assert intake is not None
        assert effects is not None
        watch = self.readiness.watch
        watch("commands consumer", lambda: consumer.alive)
        watch("emergency lane", lambda: lane.alive)
        watch("admission", task_alive(lambda: intake.task))
        watch("results publisher", task_alive(lambda: effects.publisher))
        heartbeats = next(t for t in self._tasks if t.get_name() == "heartbeats")
        watch("heartbeats", task_alive(lambda: heartbeats))
        watch("controller workers", lambda: self.dispatcher.workers_alive)

    @property
    def url(self) -> str:
        """Base URL of the health and metrics endpoints."""
        assert self._http is not None
        return self._http.url

    async def _freeze_when_seeded(self) -> None:
        # The controllers, links and registrations live as long as the process; a full
        # collection walking them all is a pause in every mower's command path.
        assert self._feed is not None
        await self._feed.seeded.wait()
        freeze_long_lived("registry seeded")

    async def stop(self) -> None:
        """Graceful shutdown in ADR 0013's order."""
        timeout = self.settings.shutdown_timeout_seconds
        self.readiness.set_not_ready("shutting down")
        if self.intake is not None:
            self.intake.closing = True
        if self._consumer is not None:
            await self._consumer.stop()
        if self.intake is not None:
            await self.intake.release()
        await self._barrier()
        assert self.effects is not None
        if not await self.effects.pending.wait_empty(timeout):
            log.error("shutdown timed out waiting for results", pending=len(self.effects.pending))
        await self._close_lane()
        await self._close_controllers("gateway shutting down")
        await self.effects.settle(timeout=5.0)
        if self.intake is not None:
            await self.intake.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._feed is not None:
            await self._feed.stop()
        for conn in list(self.connections.values()):
            await conn.close()
        self.connections.clear()
        if self._supervisor is not None:
            await self._supervisor.stop_all()
        await self.effects.stop()
        self._gc_pauses.uninstall()
        self.dispatcher.stop()
        if self._http is not None:
            await self._http.stop()
        if self._own_bus and self.bus is not None:
            await self.bus.drain()
        log.info("gateway stopped", shard=self.settings.shard_index)

    async def _close_lane(self) -> None:
        # The lane keeps sending stops until here, while what was admitted still runs.
        if self.intake is not None:
            self.intake.stops_closed = True
        if self._lane is not None:
            await self._lane.stop()

    # Controllers.

    def _make_controller(self, key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        # The gateway keeps nothing durable: a controller always starts fresh.
        del snapshot
        registration = self.registry[uuid.UUID(key)]
        assert self._outbox is not None
        return ControllerActor.start(
            dispatcher=self.dispatcher, registration=registration, outbox=self._outbox
        )

    def tell(self, mower_id: uuid.UUID, message: object) -> None:
        """Send a message to a mower's controller, if it has one (call on the loop).

        Ordinary messages are handed over once per loop turn: a tell that finds a worker
        idle wakes it, and waking a thread per state or command costs more than handling
        it. Emergency messages are handed over at once.
        """
        assert self._supervisor is not None
        key = self._names.key(mower_id)
        self._open.told(key, message)
        held = self._held.get(key)
        if held is not None:
            held.append(message)  # behind what waits for the restarted controller
            return
        ref = self._supervisor.get(key)
        if ref is None:
            if key in self._supervisor:  # restarting after a failure: keep it for the next
                self._hold(key, message)
            elif key in self._supervisor.given_up():
                self._answer_lost(key, "the mower's controller is unavailable")
            return
        if is_emergency(message):
            self._tell_one(key, ref, message)
            return
        self._tells.append((key, ref, message))
        if not self._tells_scheduled:
            self._tells_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_tells)

    def _flush_tells(self) -> None:
        self._tells_scheduled = False
        tells, self._tells = self._tells, []
        for key, ref, message in tells:
            self._tell_one(key, ref, message)

    def _tell_one(self, key: str, ref: pykka.ActorRef[Any], message: object) -> None:
        held = self._held.get(key)
        if held is not None:
            held.append(message)
            return
        try:
            ref.tell(message)
        except pykka.ActorDeadError:
            # The controller failed since it was looked up; the supervisor restarts it.
            self._hold(key, message)

    def _perform(self, mower_id: uuid.UUID, effects: Sequence[Effect]) -> None:
        # The outbox's sink: what a controller decided, performed on the loop.
        self._open.performed(self._names.key(mower_id), effects)
        assert self.effects is not None
        self.effects(mower_id, effects)

    def _controller_failed(self, key: str, error: BaseException, gave_up: bool) -> None:
        # A controller failed (a bug): its queue and the messages in its inbox are gone.
        # What it decided before is performed first; what was told since waits for its
        # successor (held); the rest is answered here.
        if self._outbox is not None:
            self._outbox.flush()
        self._flush_tells()  # tells of this turn to the dead controller are held
        if gave_up:  # no successor: everything is answered now, held messages too
            self._answer_lost(key, "the mower's controller is unavailable")
            return
        held = self._held.get(key, ())
        keep = [m.envelope.command_id for m in held if isinstance(m, (Submit, EmergencySubmit))]
        self._answer_lost(key, f"the mower's controller failed ({type(error).__name__})", keep)

    def _answer_lost(self, key: str, reason: str, keep: Sequence[uuid.UUID] = ()) -> None:
        # Ordinary commands a controller took with it get their final result; a stop it
        # never decided still goes to the device (its outcome reaches the successor).
        lost = self._open.take(key, keep)
        if not lost:
            return
        now = datetime.now(UTC)
        effects: list[Effect] = []
        for envelope in lost:
            if envelope.is_emergency:
                effects += [result_effect(envelope, "accepted", now), SendToDevice(envelope)]
            else:
                effects.append(result_effect(envelope, "failed", now, reason))
        log.error("commands of a failed controller answered", mower=key, commands=len(lost))
        self._perform(lost[0].mower_id, effects)

    def _hold(self, key: str, message: object) -> None:
        # Messages for a controller being restarted wait, in order, for the restarted one
        # (an admitted command must still get its result); the other mowers' messages are
        # not held up.
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = []
            task = asyncio.get_running_loop().create_task(self._deliver_held(key))
            self._held_deliveries.add(task)
            task.add_done_callback(self._held_deliveries.discard)
        held.append(message)

    async def _deliver_held(self, key: str) -> None:
        assert self._supervisor is not None
        try:
            ref = await self._supervisor.get_or_start(key)
        except Exception as err:
            dropped = self._held.pop(key, [])
            log.error(
                "controller unavailable; messages dropped",
                mower=key,
                messages=len(dropped),
                error=repr(err),
            )
            self._answer_lost(key, "the mower's controller is unavailable")
            return
        messages = self._held.pop(key, [])  # with whatever arrived while it restarted
        for message in messages:
            self._tell_one(key, ref, message)

    async def apply(self, registration: MowerRegistration) -> None:
        """Add or update a mower of this shard."""
        change = self.registry.apply(registration)
        mower_id = registration.mower_id
        if change in (Change.FOREIGN, Change.UNCHANGED):
            return
        assert self._supervisor is not None
        if change is Change.RENAMED:
            self.tell(mower_id, Rename(registration))
            return
        if change is Change.RECONNECT:
            old = self.connections.pop(mower_id, None)
            if old is not None:
                await old.close()
            self.tell(mower_id, Rename(registration))
            self.tell(mower_id, LinkChanged(False, "connection changed"))
        else:
            await self._supervisor.get_or_start(str(mower_id))
        self.metrics.registry_size.set(len(self.registry))
        try:
            factory = self.adapters.factory(registration.connection.kind)
        except Exception as err:
            log.error("cannot connect mower", mower_id=str(mower_id), error=str(err))
            return
        conn = factory(registration, _Link(self, mower_id))
        self.connections[mower_id] = conn
        await conn.open()
        log.info(
            "mower registered",
            mower_id=str(mower_id),
            change=change.value,
            kind=registration.connection.kind,
        )

    async def remove(self, mower_id: uuid.UUID) -> None:
        """Forget a mower: close its link and controller, report it disconnected."""
        if self.registry.remove(mower_id) is None:
            return
        self.metrics.registry_size.set(len(self.registry))
        conn = self.connections.pop(mower_id, None)
        if conn is not None:
            await conn.close()
        await self._close_one(mower_id, "mower removed")
        assert self._supervisor is not None
        await self._supervisor.stop(str(mower_id))
        log.info("mower removed", mower_id=str(mower_id))

    async def _close_one(self, mower_id: uuid.UUID, reason: str) -> None:
        assert self._supervisor is not None
        assert self._bridge is not None
        self._flush_tells()  # what was told before must be decided before the close
        ref = self._supervisor.get(str(mower_id))
        if ref is None:
            return
        try:
            await self._bridge.ask(ref, Close(reason), timeout=5.0)
        except Exception as err:
            log.warning("controller did not close", mower_id=str(mower_id), error=str(err))

    async def _close_controllers(self, reason: str) -> None:
        await asyncio.gather(*(self._close_one(m, reason) for m in list(self.registry)))
        if self._outbox is not None:
            self._outbox.flush()  # the closes' effects, before anyone waits for their work

    async def _barrier(self) -> None:
        # Every Submit told before this point is decided once each controller answers.
        assert self._supervisor is not None
        assert self._bridge is not None
        self._flush_tells()
        if self._held_deliveries:  # messages waiting for a restarted controller go first
            await asyncio.wait(set(self._held_deliveries), timeout=10.0)
        refs = [self._supervisor.get(str(m)) for m in self.registry]
        await asyncio.gather(
            *(self._bridge.ask(r, Heartbeat(), timeout=5.0) for r in refs if r is not None),
            return_exceptions=True,
        )
        # The answers can overtake the decisions' effects, which the outbox hands over a
        # slice per loop turn: perform the rest now, so every command accepted before the
        # barrier is pending before anyone waits for the pending set to empty.
        if self._outbox is not None:
            self._outbox.flush()

    async def _heartbeats(self) -> None:
        interval = self.settings.telemetry_heartbeat_seconds
        while True:
            await asyncio.sleep(interval)
            beat = Heartbeat()
            for mower_id in list(self.registry):
                self.tell(mower_id, beat)
