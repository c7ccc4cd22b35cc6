"""The rules side of the composition: watch actors, the state pipeline, the offline scan.

Each ``start_*`` starts one part, hands ``res`` what stops it and ``readiness`` what
tells whether it is alive; ``service.py`` calls them in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from actors import Dispatcher, LoopBridge, ShardSupervisor
from mowdeck.kit.http import Readiness, task_alive
from mowdeck.kit.lifecycle import Resources
from mowdeck.kit.periodic import Periodic
from mowdeck.notifications.ingest.actor import WatchSnapshots, actor_factory
from mowdeck.notifications.ingest.consuming import ConsumingSince
from mowdeck.notifications.ingest.offline import OfflineScan
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.states import StatePipeline
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["Engine", "WatchActors", "start_offline_scan", "start_pipeline", "start_watch_actors"]


@dataclass(frozen=True, slots=True)
class WatchActors:
    """The dispatcher, the shard supervisor and the snapshots of the watch actors."""

    dispatcher: Dispatcher
    supervisor: ShardSupervisor
    snapshots: WatchSnapshots


@dataclass(frozen=True, slots=True)
class Engine:
    """What the rules' parts share: the store, settings, metrics, clock and the wake-up."""

    store: WatchStore
    settings: NotificationsSettings
    metrics: NotificationsMetrics
    consuming: ConsumingSince
    clock: Callable[[], datetime]
    wake: Callable[[], object]


def start_watch_actors(
    store: WatchStore, settings: NotificationsSettings, res: Resources
) -> WatchActors:
    """The worker threads and the supervisor of one actor per mower."""
    dispatcher = Dispatcher(workers=settings.notifications_actor_workers, name="notifications")
    dispatcher.start()
    res.push(lambda: asyncio.to_thread(dispatcher.stop), name="actor dispatcher")
    snapshots = WatchSnapshots(store)
    supervisor = ShardSupervisor(
        dispatcher, actor_factory(dispatcher, settings.thresholds), snapshots
    )
    res.push(supervisor.stop_all, name="actor supervisor")
    return WatchActors(dispatcher, supervisor, snapshots)


def start_pipeline(
    engine: Engine,
    actors: WatchActors,
    res: Resources,
    readiness: Readiness,
    on_actors_started: Callable[[int], object] | None = None,
) -> StatePipeline:
    """The state pipeline (its consumer is started with the others); ``on_actors_started``
    hears of every batch that started actors."""
    s, consuming = engine.settings, engine.consuming
    pipeline = StatePipeline(
        engine.store,
        supervisor=actors.supervisor,
        snapshots=actors.snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        thresholds=s.thresholds,
        metrics=engine.metrics,
        consuming_since=lambda: consuming.since,
        clock=engine.clock,
        on_events=engine.wake,
        batch_max=s.notifications_state_batch_max,
        linger=s.notifications_state_batch_linger_ms / 1000,
        on_actors_started=on_actors_started,
    )
    pipeline.start()
    res.push(pipeline.stop, name="state pipeline")
    readiness.watch("state pipeline", task_alive(lambda: pipeline.task))
    readiness.watch("watch workers", lambda: actors.dispatcher.workers_alive)
    return pipeline


def start_offline_scan(engine: Engine, res: Resources, readiness: Readiness) -> OfflineScan:
    """The offline timer, a periodic round on every replica."""
    s = engine.settings
    scan = OfflineScan(
        engine.store,
        thresholds=s.thresholds,
        consuming=engine.consuming,
        metrics=engine.metrics,
        clock=engine.clock,
        on_events=engine.wake,
        batch=s.notifications_offline_scan_batch,
    )
    timer = Periodic("notifications-offline-scan", s.notifications_offline_scan_seconds, scan.round)
    timer.start()
    res.push(timer.stop, name="offline scan")
    readiness.watch("offline scan", task_alive(lambda: timer.task))
    return scan
