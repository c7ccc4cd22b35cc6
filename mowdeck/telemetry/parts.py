"""Composition: ``build(settings, base, ...)``, every part of a replica; no I/O, nothing
started (``service.py`` opens the base, builds, and starts the parts in ``steps``' order).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1.subjects import COMMANDS, EVENTS, MOWER_EVENT_FILTER, RESULT_FILTER, TELEMETRY
from mowdeck.kit.compose import Base, Step
from mowdeck.kit.consumer import Consumer, ConsumerSpec, DirectConsumer, settle
from mowdeck.kit.http import task_alive
from mowdeck.kit.seed import FleetSeed
from mowdeck.telemetry.actor import LatestRowSnapshots, actor_factory
from mowdeck.telemetry.directory import DirectoryEvents, directory_seed
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.ingest import StateBatcher
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import TelemetryStore
from mowdeck.telemetry.results import ResultHandler
from mowdeck.telemetry.retention import Retention
from mowdeck.telemetry.routes import QueryDeps, create_app
from mowdeck.telemetry.settings import TelemetrySettings

__all__ = ["Parts", "app", "build", "steps"]

STATES_DURABLE = "telemetry-states"
STATES_SUBJECT = TELEMETRY.subjects[0]
RESULTS_DURABLE = "telemetry-results"
DIRECTORY_DURABLE = "telemetry-directory"


@dataclass(frozen=True, slots=True)
class Parts:
    """Every part of a Telemetry replica."""

    base: Base
    store: TelemetryStore
    metrics: TelemetryMetrics
    dispatcher: Dispatcher
    supervisor: ShardSupervisor
    batcher: StateBatcher
    consumers: dict[str, Consumer]  # events, results, states
    seed: FleetSeed
    retention: Retention
    clock: Callable[[], datetime]


def build(
    settings: TelemetrySettings,
    base: Base,
    store: TelemetryStore,
    metrics: TelemetryMetrics,
    *,
    clock: Callable[[], datetime],
    on_actors_started: Callable[[int], object] | None = None,
) -> Parts:
    """Every part, wired; called on the running loop (the batcher's bridge takes it)."""
    s, bus = settings, base.bus
    rules = Rules(heartbeat=s.heartbeat, max_clock_skew=s.max_clock_skew)
    dispatcher = Dispatcher(
        workers=s.telemetry_actor_workers, name="telemetry", metrics=metrics.actors
    )
    snapshots = LatestRowSnapshots(store)
    supervisor = ShardSupervisor(
        dispatcher, actor_factory(dispatcher, rules), snapshots, metrics=metrics.actors
    )
    batcher = StateBatcher(
        store,
        supervisor=supervisor,
        snapshots=snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        rules=rules,
        metrics=metrics,
        batch_max=s.telemetry_batch_max,
        linger=s.telemetry_batch_linger_ms / 1000,
        on_actors_started=on_actors_started,
    )
    consumers = _consumers(s, base, store, metrics=metrics, supervisor=supervisor, batcher=batcher)
    seed = directory_seed(
        bus,
        store,
        timeout=s.telemetry_seed_timeout_seconds,
        retry_max=s.telemetry_seed_retry_max_seconds,
    )
    retention = Retention(store, s, metrics, clock=clock)
    return Parts(
        base, store, metrics, dispatcher, supervisor, batcher, consumers, seed, retention, clock
    )


def steps(parts: Parts, *, seed: bool = True, retention: bool = True) -> list[Step]:
    """The order the parts start in (and stop in, reversed), with their ``/readyz`` names;
    ``seed`` or ``retention`` False leaves that part unstarted (a test's choice)."""
    dispatcher, batcher = parts.dispatcher, parts.batcher
    found = [
        Step(
            "fingerprint workers",
            dispatcher.start,
            lambda: asyncio.to_thread(dispatcher.stop),
            lambda: dispatcher.workers_alive,
        ),
        Step("actor supervisor", _nothing, parts.supervisor.stop_all),
        Step("state batcher", batcher.start, batcher.stop, task_alive(lambda: batcher.task)),
    ]
    for name, consumer in parts.consumers.items():
        found.append(Step(f"{name} consumer", consumer.start, consumer.stop, _alive(consumer)))
    if seed:
        found.append(
            Step("directory seed", parts.seed.start, parts.seed.stop, _healthy(parts.seed))
        )
    # Its stop runs also when a test started it by hand.
    found.append(
        Step("retention", parts.retention.start if retention else _nothing, parts.retention.stop)
    )
    return found


def app(settings: TelemetrySettings, parts: Parts) -> web.Application:
    """The query API."""
    base = parts.base
    authorizer, verifier, denylist = base.require_api()
    deps = QueryDeps(parts.store, authorizer, settings, parts.metrics, parts.clock)
    return create_app(deps, verifier, base.readiness, base.registry, denylist)


def _consumers(
    s: TelemetrySettings,
    base: Base,
    store: TelemetryStore,
    *,
    metrics: TelemetryMetrics,
    supervisor: ShardSupervisor,
    batcher: StateBatcher,
) -> dict[str, Consumer]:
    bus = base.bus
    results = ResultHandler(
        store,
        metrics,
        unknown_attempts=s.telemetry_unknown_mower_attempts,
        retry_delay=s.telemetry_unknown_mower_retry_seconds,
    )

    async def forget(mower_id: uuid.UUID) -> None:
        # A removed mower's actor must not keep its memory: a later state starts afresh.
        await supervisor.stop(str(mower_id))

    directory = DirectoryEvents(store, metrics, on_removed=forget)

    async def on_result(msg: Any) -> None:
        await settle(msg, results.handle, consumer=RESULTS_DURABLE)

    async def on_event(msg: Any) -> None:
        await settle(msg, directory.handle, consumer=DIRECTORY_DURABLE)

    # The states: the whole stream, not TELEMETRY_FILTER (a filter narrower than the
    # stream's subjects costs JetStream about twice the CPU per delivered message, file
    # store; the batcher acknowledges anything that is not telemetry.mower.<id>), read
    # directly on the connection's read loop: the batcher only queues each delivery.
    return {
        "events": Consumer(
            bus, _spec(EVENTS.name, MOWER_EVENT_FILTER, DIRECTORY_DURABLE), on_event
        ),
        "results": Consumer(bus, _spec(COMMANDS.name, RESULT_FILTER, RESULTS_DURABLE), on_result),
        "states": DirectConsumer(
            bus, _spec(TELEMETRY.name, STATES_SUBJECT, STATES_DURABLE), batcher.take
        ),
    }


def _nothing() -> None:
    return None


def _spec(stream: str, subject: str, durable: str) -> ConsumerSpec:
    return ConsumerSpec(stream=stream, subject=subject, durable=durable, queue=durable)


def _alive(consumer: Consumer) -> Callable[[], bool]:
    return lambda: consumer.alive


def _healthy(seed: FleetSeed) -> Callable[[], bool]:
    return lambda: seed.healthy
