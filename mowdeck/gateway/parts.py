"""Composition: ``build(settings, base, shard)``, every part of one gateway shard; no I/O,
nothing started (``service.py`` opens the bus, builds, starts the parts in ``steps``' order
and stops them in ADR 0013's).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge
from contracts.v1.subjects import COMMANDS
from mowdeck.gateway.closing import ControllerClosing
from mowdeck.gateway.connections import ConnectionDeps
from mowdeck.gateway.connections.credentials import Credentials
from mowdeck.gateway.deliveries import HeldDeliveries
from mowdeck.gateway.effects import EffectRunner
from mowdeck.gateway.heartbeats import heartbeats
from mowdeck.gateway.intake import CommandIntake
from mowdeck.gateway.lane import EmergencyLane
from mowdeck.gateway.mower_keys import MowerKeys
from mowdeck.gateway.outcomes import read_stored_finals
from mowdeck.gateway.registrations import ShardRegistrations, registration_seed
from mowdeck.gateway.routing import ControllerRouter
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.gateway.shard import Shard
from mowdeck.gateway.subscriptions import command_consumer, emergency_lane
from mowdeck.kit.compose import Base, Step
from mowdeck.kit.consumer import Consumer
from mowdeck.kit.http import task_alive
from mowdeck.kit.periodic import Periodic
from mowdeck.kit.seed import FleetSeed

__all__ = ["Parts", "build", "steps"]


@dataclass(frozen=True, slots=True)
class Parts:
    """Every part of a started shard."""

    base: Base
    shard: Shard
    dispatcher: Dispatcher
    held: HeldDeliveries
    effects: EffectRunner
    router: ControllerRouter
    closing: ControllerClosing
    links: ConnectionDeps
    registrations: ShardRegistrations
    seed: FleetSeed
    intake: CommandIntake
    beats: Periodic
    lane: EmergencyLane
    consumer: Consumer


def build(
    settings: GatewaySettings,
    base: Base,
    shard: Shard,
    *,
    on_seeded: Callable[[], object] | None = None,
) -> Parts:
    """Every part, wired; called on the running loop (the controllers' bridge takes it).
    ``on_seeded()`` is called once the shard's mowers are seeded from Fleet."""
    s, bus, metrics, mowers = settings, base.bus, shard.metrics, shard.mowers
    loop = asyncio.get_running_loop()
    dispatcher = Dispatcher(workers=s.dispatcher_workers, metrics=shard.actor_metrics)
    keys = MowerKeys()

    def tell(mower_id: uuid.UUID, message: object) -> None:
        router.tell(mower_id, message)  # the router is built below, before anyone tells

    async def stream_pending() -> int:
        info = await bus.js.consumer_info(COMMANDS.name, shard.durable)
        return int(info.num_pending or 0)

    # Deliveries wait here for their command's final result (amendment 1 to ADR 0013),
    # reported in progress every third of the ack wait.
    held = HeldDeliveries(
        metrics, progress_every=s.command_ack_wait_seconds / 3, stream_pending=stream_pending
    )
    effects = EffectRunner(
        bus,
        metrics,
        connections=shard.connections,
        tell=tell,
        device_timeout=s.device_command_timeout_seconds,
        producer=shard.producer,
        keys=keys,
        on_final=held.finished,
    )
    router = ControllerRouter(
        dispatcher, mowers.__getitem__, effects, loop=loop, keys=keys, metrics=shard.actor_metrics
    )
    closing = ControllerClosing(router, LoopBridge(loop))
    links, registrations = _links(s, shard, router, closing, base.registry)
    seed = registration_seed(s, bus, registrations, shard.metrics, on_seeded)
    intake = CommandIntake(
        shard_index=s.shard_index,
        shard_count=s.shard_count,
        mowers=mowers,
        metrics=metrics,
        effects=effects,
        tell=tell,
        held=held,
        seeded=lambda: bool(s.bootstrap_mowers) or seed.seeded.is_set(),
    )
    beats = heartbeats(mowers, tell, s.state_heartbeat_seconds)
    lane = emergency_lane(s, intake, name=f"{shard.producer}-estop")
    consumer = command_consumer(bus, s, intake, durable=shard.durable)
    return Parts(
        base, shard, dispatcher, held, effects, router, closing, links, registrations, seed,
        intake, beats, lane, consumer,
    )  # fmt: skip


def steps(parts: Parts, settings: GatewaySettings) -> list[Step]:
    """The order the parts start in. What has no stop here is stopped by the service's own
    ``stop``, in ADR 0013's shutdown order; the rest stop in reverse after it."""
    dispatcher, effects, held, intake = parts.dispatcher, parts.effects, parts.held, parts.intake
    seed, beats, lane, consumer = parts.seed, parts.beats, parts.lane, parts.consumer

    async def bootstrap() -> None:
        for registration in settings.bootstrap_mowers:
            await parts.registrations.apply(registration)

    async def lane_start() -> None:
        await lane.start()
        parts.shard.metrics.lane_realtime.set(1 if lane.realtime else 0)

    async def stored_finals() -> None:
        # What the process before this one answered and did not acknowledge is known
        # before any of it is delivered again.
        stream, durable = COMMANDS.name, parts.shard.durable
        await read_stored_finals(
            parts.base.bus.js, stream=stream, durable=durable, finals=held.finals
        )

    return [
        Step(
            "controller workers",
            dispatcher.start,
            lambda: asyncio.to_thread(dispatcher.stop),
            lambda: dispatcher.workers_alive,
        ),
        Step(
            "results publisher", effects.start, effects.stop, task_alive(lambda: effects.publisher)
        ),
        Step("controllers", _nothing, parts.router.stop_all),
        Step("device link session", _nothing, parts.links.close),
        Step("device links", bootstrap, parts.registrations.close_links),
        Step("fleet seed", seed.start, seed.stop, lambda: seed.healthy),
        Step("admission", intake.start, None, task_alive(lambda: intake.task)),
        Step("heartbeats", beats.start, beats.stop, task_alive(lambda: beats.task)),
        Step("emergency lane", lane_start, None, lambda: lane.alive),
        Step("stored finals", stored_finals),
        Step("command acks", held.start, held.stop, task_alive(lambda: held.tasks[0])),
        Step("command progress", _nothing, None, task_alive(lambda: held.tasks[1])),
        Step("commands consumer", consumer.start, None, lambda: consumer.alive),
    ]


def _links(
    s: GatewaySettings,
    shard: Shard,
    router: ControllerRouter,
    closing: ControllerClosing,
    registry: CollectorRegistry,
) -> tuple[ConnectionDeps, ShardRegistrations]:
    # What the links share (their session, their pings' tasks): the gateway's own.
    links = ConnectionDeps(
        s.device_hosts(),
        Credentials.at(s.gateway_credentials_dir),
        automower=s.automower_endpoints(),
        registry=registry,
        limits=s.link_limits(),
    )
    registrations = ShardRegistrations(
        shard.mowers,
        router,
        closing,
        adapters=shard.adapters,
        metrics=shard.metrics,
        connections=shard.connections,
        endpoints=shard.kinds.policy(links.hosts),
        deps=links,
    )
    return links, registrations


def _nothing() -> None:
    return None
