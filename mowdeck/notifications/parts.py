"""Composition: ``build(settings, infra)``, every part of a replica; no I/O, nothing started
(``service.py`` opens the ``Infra``, builds, and starts the parts in its ``steps``' order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors import LoopBridge
from contracts.v1.subjects import EVENTS, MOWER_EVENT_FILTER, TELEMETRY
from mowdeck.authz import DecisionCache
from mowdeck.kit.batching import MicroBatchConsumer
from mowdeck.kit.consumer import Consumer, ConsumerSpec, DirectConsumer
from mowdeck.kit.seed import FleetSeed
from mowdeck.kit.sites import SiteAreasFeed
from mowdeck.notifications.alarms.feed import AlarmAnnouncer
from mowdeck.notifications.alarms.round import AlarmRound
from mowdeck.notifications.delivery.channels.loader import Channels
from mowdeck.notifications.delivery.metrics import DeliveryMetrics
from mowdeck.notifications.delivery.pruning import DeliveryPruning
from mowdeck.notifications.delivery.worker import DeliveryWorker
from mowdeck.notifications.inbox import identity as ids
from mowdeck.notifications.inbox.access import AccessCache
from mowdeck.notifications.inbox.fanout import FanOut
from mowdeck.notifications.inbox.names import MowerNames
from mowdeck.notifications.infra import Infra
from mowdeck.notifications.ingest.actor import WatchActors
from mowdeck.notifications.ingest.consuming import ConsumingSince
from mowdeck.notifications.ingest.geofences import Geofences
from mowdeck.notifications.ingest.links import LINKS_DURABLE, LinkEvents, decode_link
from mowdeck.notifications.ingest.offline import OfflineScan
from mowdeck.notifications.ingest.states import STATES_DURABLE, StateBatcher
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["DeliveryParts", "InboxParts", "IngestParts", "Parts", "build"]


@dataclass(frozen=True, slots=True)
class IngestParts:
    """States, link events and the silence timer, through the watch actors."""

    consuming: ConsumingSince
    actors: WatchActors
    batcher: StateBatcher
    states: DirectConsumer
    links: MicroBatchConsumer[Any]
    scan: OfflineScan
    fences: Geofences  # the sites' areas and the mowers' sites, for the geofence rules
    sites: SiteAreasFeed


@dataclass(frozen=True, slots=True)
class InboxParts:
    """Mower names from Fleet, the fan-out, identity events."""

    names: MowerNames
    seed: FleetSeed
    fanout: FanOut
    identity: Consumer
    grants: ids.GrantsFeed
    access: AccessCache  # the API's callers, dropped with the decisions


@dataclass(frozen=True, slots=True)
class DeliveryParts:
    """The channels, the worker that sends through them, the pruning of what it sent."""

    channels: Channels
    worker: DeliveryWorker
    pruning: DeliveryPruning


@dataclass(frozen=True, slots=True)
class Parts:
    """Every part of a replica."""

    infra: Infra
    ingest: IngestParts
    inbox: InboxParts
    delivery: DeliveryParts
    alarms: AlarmRound
    announcer: AlarmAnnouncer


def build(
    settings: NotificationsSettings,
    infra: Infra,
    *,
    fanout: bool = True,
    on_actors_started: Callable[[int], object] | None = None,
) -> Parts:
    """The parts of a replica on ``infra``; ``fanout``: events wake this replica's fan-out."""
    s, fences = settings, Geofences()
    actors = WatchActors(
        infra.stores.watches, workers=s.notifications_actor_workers, thresholds=s.thresholds,
        metrics=infra.metrics.actors, place=fences.placement,
    )  # fmt: skip
    inbox = _inbox(s, infra, actors, fences)
    wake = inbox.fanout.wake if fanout else lambda: None  # another replica fans out
    ingest = _ingest(s, infra, actors, fences, wake=wake, on_actors_started=on_actors_started)
    metrics = DeliveryMetrics(infra.registry)
    deliveries, channels = infra.stores.deliveries, Channels(s)
    worker = DeliveryWorker(deliveries, channels, s, metrics, infra.clock)
    pruning = DeliveryPruning(deliveries, s, metrics, clock=infra.clock)
    alarms = AlarmRound.of(s, infra.stores.alarms, infra.metrics, wake=wake, clock=infra.clock)
    announcer = AlarmAnnouncer(infra.bus.publisher, infra.clock)
    infra.stores.alarm_feed.follow(announcer)  # alarm changes to Realtime's streams
    delivery = DeliveryParts(channels, worker, pruning)
    return Parts(infra, ingest, inbox, delivery, alarms, announcer)


def _ingest(
    s: NotificationsSettings,
    infra: Infra,
    actors: WatchActors,
    fences: Geofences,
    *,
    wake: Callable[[], object],
    on_actors_started: Callable[[int], object] | None,
) -> IngestParts:
    bus, watches, metrics, clock = infra.bus, infra.stores.watches, infra.metrics, infra.clock
    consuming = ConsumingSince(bus.nc, clock)
    scan = OfflineScan(
        watches,
        thresholds=s.thresholds,
        consuming=consuming,
        metrics=metrics,
        clock=clock,
        on_events=wake,
        batch=s.notifications_offline_scan_batch,
        interval=s.notifications_offline_scan_seconds,
    )
    since = lambda: consuming.since  # noqa: E731 - read at every batch
    batch_max, linger = s.notifications_state_batch_max, s.notifications_state_batch_linger_ms
    batcher = StateBatcher(
        watches,
        supervisor=actors.supervisor,
        snapshots=actors.snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        thresholds=s.thresholds,
        metrics=metrics,
        consuming_since=since,
        clock=clock,
        on_events=wake,
        batch_max=batch_max,
        linger=linger / 1000,
        on_actors_started=on_actors_started,
        place=actors.place,
    )
    links = LinkEvents(
        watches, supervisor=actors.supervisor, thresholds=s.thresholds, metrics=metrics,
        consuming_since=since, on_events=wake,
    )  # fmt: skip
    mower_events = _spec(EVENTS.name, MOWER_EVENT_FILTER, LINKS_DURABLE)
    states = _spec(TELEMETRY.name, TELEMETRY.subjects[0], STATES_DURABLE)
    link_consumer = MicroBatchConsumer(
        bus, mower_events, decode=decode_link, commit=links.commit, batch_max=batch_max,
        linger=linger / 1000,
    )  # fmt: skip
    reader = DirectConsumer(bus, states, batcher.take)
    sites = fences.feed(bus, timeout=s.notifications_sites_timeout_seconds)
    return IngestParts(consuming, actors, batcher, reader, link_consumer, scan, fences, sites)


def _inbox(
    s: NotificationsSettings, infra: Infra, actors: WatchActors, fences: Geofences
) -> InboxParts:
    bus, stores, clock = infra.bus, infra.stores, infra.clock
    ttl = s.decision_cache_ttl.total_seconds()
    decisions = DecisionCache(infra.authorizer, ttl, clock=lambda: clock().timestamp())
    names = MowerNames(stores.erasure, actors.forget, fences.apply_mower)
    seed = FleetSeed(
        bus, apply=names.apply, remove=names.remove, follow_events=True,
        request_timeout=s.notifications_seed_timeout_seconds, name="notifications-fleet-seed",
    )  # fmt: skip
    fanout = FanOut(
        stores.pending,
        stores.preferences,
        decisions=decisions,
        publisher=bus.publisher,
        names=names.get,
        settings=s,
        metrics=infra.metrics,
        clock=clock,
        poll=s.notifications_fanout_poll_seconds,
    )
    access = AccessCache(infra.authorizer, names.account, decisions, ttl)
    events = ids.IdentityEvents(stores.erasure, access, infra.metrics)
    spec = _spec(EVENTS.name, ids.IDENTITY_FILTER, ids.IDENTITY_DURABLE)
    identity, grants = Consumer(bus, spec, events.on_message), ids.GrantsFeed(bus, events)
    return InboxParts(names, seed, fanout, identity, grants, access)


def _spec(stream: str, subject: str, durable: str) -> ConsumerSpec:
    return ConsumerSpec(stream=stream, subject=subject, durable=durable, queue=durable)
