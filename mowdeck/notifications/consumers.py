"""The durable consumers of Notifications and the grants subscription, started in one go.

States go to the ``StatePipeline`` (queue group ``notifications-states``), link events to
``LinkEvents`` (``notifications-links``, micro-batches), identity events to
``IdentityEvents`` (``notifications-identity``); ``identity.grants.changed`` is read by an
ordered consumer on every replica, since every replica has its own decision cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nats.js import api

from actors import ShardSupervisor
from contracts.v1.subjects import EVENTS, MOWER_EVENT_FILTER, TELEMETRY
from mowdeck.authz import DecisionCache
from mowdeck.kit.batching import MicroBatchConsumer
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec, DirectConsumer, settle
from mowdeck.kit.http import Readiness
from mowdeck.kit.lifecycle import Resources
from mowdeck.notifications.inbox.identity import IdentityEvents
from mowdeck.notifications.inbox.ports import Erasure
from mowdeck.notifications.ingest.consuming import ConsumingSince
from mowdeck.notifications.ingest.links import LinkEvents, decode_link
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.states import StatePipeline
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.settings import NotificationsSettings

__all__ = [
    "GRANTS_SUBJECT",
    "IDENTITY_DURABLE",
    "IDENTITY_FILTER",
    "LINKS_DURABLE",
    "STATES_DURABLE",
    "Consumers",
    "start_consumers",
]

STATES_DURABLE = "notifications-states"
LINKS_DURABLE = "notifications-links"
IDENTITY_DURABLE = "notifications-identity"
IDENTITY_FILTER = "event.identity.user.*"
GRANTS_SUBJECT = "event.identity.grants.changed"


@dataclass(frozen=True, slots=True)
class Consumers:
    """What the consumers hand their messages to."""

    watches: WatchStore
    erasure: Erasure
    supervisor: ShardSupervisor
    decisions: DecisionCache
    pipeline: StatePipeline
    consuming: ConsumingSince
    metrics: NotificationsMetrics
    wake: Callable[[], object]


async def start_consumers(
    bus: Bus,
    settings: NotificationsSettings,
    parts: Consumers,
    res: Resources,
    readiness: Readiness,
) -> None:
    """Start every consumer; each is stopped by ``res`` and watched by ``readiness``."""
    s, consuming = settings, parts.consuming
    identity = IdentityEvents(parts.erasure, parts.decisions, parts.metrics)

    async def on_identity(msg: Any) -> None:
        await settle(msg, identity.handle, consumer=IDENTITY_DURABLE)

    links = LinkEvents(
        parts.watches,
        supervisor=parts.supervisor,
        thresholds=s.thresholds,
        metrics=parts.metrics,
        consuming_since=lambda: consuming.since,
        on_events=parts.wake,
    )
    link_consumer = MicroBatchConsumer(
        bus,
        _spec(EVENTS.name, MOWER_EVENT_FILTER, LINKS_DURABLE),
        decode=decode_link,
        commit=links.commit,
        batch_max=s.notifications_state_batch_max,
        linger=s.notifications_state_batch_linger_ms / 1000,
    )
    await link_consumer.start()
    res.push(link_consumer.stop, name="links consumer")
    readiness.watch("links consumer", lambda: link_consumer.alive)
    # The states: the whole stream, as Telemetry reads it (a filter narrower than the
    # stream's subjects costs JetStream about twice the CPU per delivery; the pipeline
    # acknowledges whatever is not telemetry.mower.<id>), read directly on the connection's
    # read loop: the pipeline's callback only queues each delivery for its batch.
    states = _spec(TELEMETRY.name, TELEMETRY.subjects[0], STATES_DURABLE)
    identity_spec = _spec(EVENTS.name, IDENTITY_FILTER, IDENTITY_DURABLE)
    for name, consumer in (
        ("identity", Consumer(bus, identity_spec, on_identity)),
        ("states", DirectConsumer(bus, states, parts.pipeline.take)),
    ):
        await consumer.start()
        res.push(consumer.stop, name=f"{name} consumer")
        readiness.watch(f"{name} consumer", _alive(consumer))
    grants = await bus.js.subscribe(
        GRANTS_SUBJECT,
        stream=EVENTS.name,
        ordered_consumer=True,
        deliver_policy=api.DeliverPolicy.NEW,
        cb=identity.on_grants,
    )
    res.push(grants.unsubscribe, name="grants subscription")


def _spec(stream: str, subject: str, durable: str) -> ConsumerSpec:
    return ConsumerSpec(stream=stream, subject=subject, durable=durable, queue=durable)


def _alive(consumer: Consumer) -> Callable[[], bool]:
    return lambda: consumer.alive
