"""The schedules' parts of a Fleet replica (composed by ``fleet/parts.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from prometheus_client import CollectorRegistry

from mowdeck.fleet.schedules.outbox import Publishes
from mowdeck.fleet.schedules.postgres import PostgresScheduleStore, PostgresSiteDirectory
from mowdeck.fleet.schedules.scheduler import Scheduler, SchedulerSettings
from mowdeck.fleet.schedules.usecases import Schedules
from mowdeck.fleet.settings import FleetSettings
from mowdeck.fleet.usecases import Fleet

__all__ = ["ScheduleParts", "build_schedules"]


@dataclass(frozen=True, slots=True)
class ScheduleParts:
    """The schedule API's use cases and the scheduler."""

    api: Schedules
    scheduler: Scheduler


def build_schedules(
    s: FleetSettings,
    pool: asyncpg.Pool,
    fleet: Fleet,
    publisher: Publishes,
    registry: CollectorRegistry,
    *,
    clock: Callable[[], datetime],
) -> ScheduleParts:
    """The schedule use cases and the scheduler, on one store."""
    store = PostgresScheduleStore(pool, mode=s.fleet_scheduler_claim)
    settings = SchedulerSettings(
        s.fleet_scheduler_interval_seconds,
        s.fleet_scheduler_batch,
        s.command_default_ttl_seconds,
        s.fleet_scheduler_republish_seconds,
        s.fleet_scheduler_lead_seconds,
    )
    schedules = Schedules(fleet, store, PostgresSiteDirectory(pool), publisher, clock)
    return ScheduleParts(schedules, Scheduler(store, publisher, settings, registry, clock=clock))
