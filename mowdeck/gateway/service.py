"""The Device-Gateway's composition root: one shard of ADR 0013."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from actors import ActorMetrics, Dispatcher, LoopBridge
from contracts.v1.subjects import COMMANDS
from mowdeck.devices.kinds import ConnectionKinds
from mowdeck.gateway.closing import ControllerClosing
from mowdeck.gateway.connections import ConnectionAdapters, ConnectionDeps, MowerConnection
from mowdeck.gateway.deliveries import HeldDeliveries
from mowdeck.gateway.effects import EffectRunner
from mowdeck.gateway.heartbeats import heartbeats
from mowdeck.gateway.intake import CommandIntake
from mowdeck.gateway.lane import EmergencyLane
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.mower_keys import MowerKeys
from mowdeck.gateway.mowers import ShardMowers
from mowdeck.gateway.outcomes import read_stored_finals
from mowdeck.gateway.registrations import ShardRegistrations
from mowdeck.gateway.routing import ControllerRouter
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.gateway.subscriptions import command_consumer, emergency_lane
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer
from mowdeck.kit.garbage_collector import GcPauses
from mowdeck.kit.http import problem_middleware, request_metrics, task_alive, with_ops_routes
from mowdeck.kit.seed import FleetSeed
from mowdeck.kit.shell import ServiceShell

__all__ = ["GatewayService"]

log = structlog.get_logger("mowdeck.gateway")


class GatewayService(ServiceShell[GatewaySettings]):
    """One gateway shard: registry, controllers, device links, command consumer."""

    name = "gateway"

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        bus: Bus | None = None,
        metrics_registry: CollectorRegistry | None = None,
        connections: ConnectionAdapters | None = None,
        kinds: ConnectionKinds | None = None,
        on_seeded: Callable[[], object] | None = None,
    ) -> None:
        """``on_seeded()`` is called once the shard's mowers are seeded from Fleet (the
        process's command freezes what lives from then on; a test process that builds and
        drops gateways passes nothing)."""
        super().__init__(settings, metrics_registry)
        self._given_bus = bus
        self.bus: Bus | None = bus
        self.metrics = GatewayMetrics(self.metrics_registry)
        self.adapters = connections or ConnectionAdapters.from_entry_points()
        self.kinds = kinds or ConnectionKinds.from_entry_points()
        self.adapters.check_declared(self.kinds)
        self.mowers = ShardMowers(settings.shard_index, settings.shard_count)
        self.connections: dict[uuid.UUID, MowerConnection] = {}
        self._actor_metrics = ActorMetrics(self.metrics_registry)
        self.gc_pauses = GcPauses(self.metrics_registry)
        self._on_seeded = on_seeded
        self.dispatcher = Dispatcher(
            workers=settings.dispatcher_workers, metrics=self._actor_metrics
        )
        self._keys = MowerKeys()
        self._stopped = False
        self.effects: EffectRunner | None = None
        self.router: ControllerRouter | None = None
        self._closing: ControllerClosing | None = None
        self.registrations: ShardRegistrations | None = None
        self.seed: FleetSeed | None = None
        self.intake: CommandIntake | None = None
        self.held: HeldDeliveries | None = None
        self._lane: EmergencyLane | None = None
        self._consumer: Consumer | None = None
        self.durable = f"device-gateway-{settings.shard_index}"
        self._producer = f"gateway-{settings.shard_index}"

    def tell(self, mower_id: uuid.UUID, message: object) -> None:
        """Send a message to a mower's controller, if it has one (call on the loop)."""
        assert self.router is not None
        self.router.tell(mower_id, message)

    async def _start(self) -> None:
        # Connect, seed the registry, start consuming commands, serve health.
        s, own = self.settings, self._resources
        self.bus = bus = await own.bus_for(
            self._given_bus,
            s,
            user="gateway",
            name=self._producer,
            readiness=self.readiness,
            registry=self.metrics_registry,
        )
        loop = asyncio.get_running_loop()
        self.dispatcher.start()
        own.push(lambda: asyncio.to_thread(self.dispatcher.stop), name="controller workers")
        # Deliveries wait here for their command's final result (amendment 1 to ADR 0013),
        # reported in progress every third of the ack wait.
        self.held = held = HeldDeliveries(
            self.metrics,
            progress_every=s.command_ack_wait_seconds / 3,
            stream_pending=self._stream_pending,
        )
        self.effects = effects = EffectRunner(
            bus,
            self.metrics,
            connections=self.connections,
            tell=self.tell,
            device_timeout=s.device_command_timeout_seconds,
            producer=self._producer,
            keys=self._keys,
            on_final=held.finished,
        )
        await effects.start()
        own.push(effects.stop, name="results publisher")
        self.router = router = ControllerRouter(
            self.dispatcher,
            self.mowers.__getitem__,
            effects,
            loop=loop,
            keys=self._keys,
            metrics=self._actor_metrics,
        )
        own.push(router.stop_all, name="controllers")
        self._closing = ControllerClosing(router, LoopBridge(loop))
        # What the links share (their session, their pings' tasks): the gateway's own, closed
        # after the links.
        links = ConnectionDeps(s.device_hosts())
        own.push(links.close, name="device link session")
        self.registrations = registrations = ShardRegistrations(
            self.mowers,
            router,
            self._closing,
            adapters=self.adapters,
            metrics=self.metrics,
            connections=self.connections,
            endpoints=self.kinds.policy(links.hosts),
            deps=links,
        )
        own.push(registrations.close_links, name="device links")
        for registration in s.bootstrap_mowers:
            await registrations.apply(registration)
        self.seed = seed = FleetSeed(
            bus,
            apply=registrations.apply,
            remove=registrations.remove,
            follow_events=True,
            shard_index=s.shard_index,
            shard_count=s.shard_count,
            request_timeout=s.fleet_list_timeout_seconds,
            retry_initial=s.fleet_retry_initial_seconds,
            retry_max=s.fleet_retry_max_seconds,
            on_retry=self.metrics.fleet_retries.inc,
            name="fleet-list-seed",
        )
        await seed.start()
        own.push(seed.stop, name="fleet seed")
        self.gc_pauses.install()
        own.push_sync(self.gc_pauses.uninstall, name="gc pause metric")
        if self._on_seeded is not None:
            seeded = loop.create_task(self._when_seeded(seed, self._on_seeded), name="seeded")
            own.push_task(seeded, name="seeded hook")
        self.intake = intake = CommandIntake(
            shard_index=s.shard_index,
            shard_count=s.shard_count,
            mowers=self.mowers,
            metrics=self.metrics,
            effects=effects,
            tell=self.tell,
            held=held,
        )
        intake.start()
        beats = heartbeats(self.mowers, self.tell, s.state_heartbeat_seconds)
        beats.start()
        own.push(beats.stop, name="heartbeats")
        self._lane = lane = emergency_lane(s, intake, name=f"{self._producer}-estop")
        await lane.start()
        self.metrics.lane_realtime.set(1 if lane.realtime else 0)
        self._consumer = consumer = await self._start_consumer(bus, intake, held)
        # What this shard cannot work without: /healthz fails when one of them died.
        watch = self.readiness.watch
        watch("commands consumer", lambda: consumer.alive)
        watch("emergency lane", lambda: lane.alive)
        watch("admission", task_alive(lambda: intake.task))
        watch("results publisher", task_alive(lambda: effects.publisher))
        watch("command acks", task_alive(lambda: held.tasks[0]))
        watch("command progress", task_alive(lambda: held.tasks[1]))
        watch("heartbeats", task_alive(lambda: beats.task))
        watch("controller workers", lambda: self.dispatcher.workers_alive)
        watch("fleet seed", lambda: seed.healthy)
        app = web.Application(
            middlewares=[
                request_metrics(self.metrics_registry, service="gateway"),
                problem_middleware,
            ]
        )
        with_ops_routes(app, self.readiness, self.metrics_registry)
        self._http = await own.serve(app, s.http_host, s.http_port)
        self.readiness.set_ready()
        log.info(
            "gateway started",
            shard=s.shard_index,
            shards=s.shard_count,
            mowers=len(self.mowers),
            http=self._http.url,
        )

    async def _start_consumer(
        self, bus: Bus, intake: CommandIntake, held: HeldDeliveries
    ) -> Consumer:
        # What the process before this one answered and did not acknowledge is known
        # before any of it is delivered again.
        await read_stored_finals(
            bus.js, stream=COMMANDS.name, durable=self.durable, finals=held.finals
        )
        held.start()
        self._resources.push(held.stop, name="command acks")
        consumer = command_consumer(bus, self.settings, intake, durable=self.durable)
        await consumer.start()
        return consumer

    async def _stream_pending(self) -> int:
        assert self.bus is not None
        info = await self.bus.js.consumer_info(COMMANDS.name, self.durable)
        return int(info.num_pending or 0)

    @staticmethod
    async def _when_seeded(seed: FleetSeed, hook: Callable[[], object]) -> None:
        await seed.seeded.wait()
        hook()

    async def stop(self) -> None:
        """Graceful shutdown in ADR 0013's order, then release what was started."""
        if self._stopped:
            return
        self._stopped = True
        timeout = self.settings.shutdown_timeout_seconds
        intake, effects, closing = self.intake, self.effects, self._closing
        self.readiness.set_not_ready("shutting down")
        if intake is not None:
            intake.closing = True
        if self._consumer is not None:  # deliveries arriving from now on are given back
            await self._consumer.stop()
        if intake is not None:  # so are the ordinary commands not admitted yet
            await intake.release()
        if closing is not None:  # every controller decides what it was told
            await closing.barrier(self.mowers)
        if effects is not None and not await effects.pending.wait_empty(timeout):
            log.error("shutdown timed out waiting for results", pending=len(effects.pending))
        # Every delivery whose result is stored is acknowledged before the bus drains.
        if self.held is not None and not await self.held.wait_empty(5.0):
            log.error("shutdown left deliveries unacknowledged", held=len(self.held))
        # The lane keeps sending stops until here, while what was admitted still runs.
        if intake is not None:
            intake.stops_closed = True
        if self._lane is not None:
            await self._lane.stop()
        if closing is not None:  # ending drive sessions, publishing mower.disconnected
            await closing.close_all(self.mowers, "gateway shutting down")
        if effects is not None:
            await effects.settle(timeout=5.0)
        if intake is not None:
            await intake.stop()
        # Then, in reverse: heartbeats, seed, links, controllers, publisher, workers, bus.
        await self._resources.close()
        log.info("gateway stopped", shard=self.settings.shard_index)
