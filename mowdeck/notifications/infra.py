"""Composition: what the parts run on (``Infra``), their stores among it.

``Stores`` are the parts' store ports, on one database or in one process's memory:
``service.py`` opens them on its pool, the contract tests run on both. The adapters are
wired to each other where one transaction spans two parts: the watches' transaction
writes the inbox's pending events and the alarm changes, the fan-out's write queues the
deliveries, the erasure deletes in every part (``ingest.ports`` and ``inbox.ports`` say
why each is one transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from prometheus_client import CollectorRegistry

from mowdeck.authn import DenyList, TokenVerifier
from mowdeck.authz import Authorizer
from mowdeck.kit.bus import Bus
from mowdeck.kit.http import Readiness
from mowdeck.notifications.alarms.feed import AlarmFeed
from mowdeck.notifications.alarms.memory import InMemoryAlarms
from mowdeck.notifications.alarms.ports import AlarmStore
from mowdeck.notifications.alarms.postgres import PostgresAlarms, write_changes
from mowdeck.notifications.delivery.memory import InMemoryDeliveries
from mowdeck.notifications.delivery.ports import DeliveryStore, TargetStore
from mowdeck.notifications.delivery.postgres import PostgresDeliveries, queue_deliveries
from mowdeck.notifications.inbox.erasure import InMemoryErasure, PostgresErasure
from mowdeck.notifications.inbox.memory import InMemoryInbox
from mowdeck.notifications.inbox.ports import Erasure, InboxStore, PendingStore, PreferencesStore
from mowdeck.notifications.inbox.postgres import PostgresInbox
from mowdeck.notifications.ingest.memory import InMemoryWatches
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.postgres import PostgresWatches
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.events import RuleEvent

__all__ = ["Infra", "Stores"]


@dataclass(frozen=True, slots=True)
class Stores:
    """Every part's store ports, wired to each other."""

    watches: WatchStore
    pending: PendingStore
    inbox: InboxStore
    preferences: PreferencesStore
    erasure: Erasure
    targets: TargetStore
    deliveries: DeliveryStore
    alarms: AlarmStore
    # Told of the alarms each committed transaction wrote (the announcer follows it).
    alarm_feed: AlarmFeed

    @classmethod
    def postgres(cls, pool: asyncpg.Pool, *, maintenance_timeout_ms: int | None = None) -> Stores:
        """The stores on ``pool``; pruning gets ``maintenance_timeout_ms`` (None: the pool's)."""
        deliveries = PostgresDeliveries(pool, maintenance_timeout_ms=maintenance_timeout_ms)
        inbox = PostgresInbox(pool, deliveries=queue_deliveries)
        alarms, feed = PostgresAlarms(pool, inbox.insert_pending), AlarmFeed()
        watches = PostgresWatches(
            pool, pending=inbox.insert_pending, alarms=write_changes, written=feed
        )
        # Deliveries first: the order the rows of a user or a mower were always deleted in.
        erasure = PostgresErasure(pool, [deliveries, watches, inbox, alarms])
        return cls(watches, inbox, inbox, inbox, erasure, deliveries, deliveries, alarms, feed)

    @classmethod
    def in_memory(cls) -> Stores:
        """The stores in this process's memory (unit tests)."""

        def queue(event: RuleEvent, items: Sequence[tuple[str, bool]]) -> None:
            # The inbox queues into the deliveries, which read the inbox's preferences.
            deliveries.queue(event, items)

        inbox = InMemoryInbox(deliveries=queue)
        deliveries = InMemoryDeliveries(preferences=inbox.preferences_of)
        alarms, feed = InMemoryAlarms(inbox.add_pending), AlarmFeed()
        watches = InMemoryWatches(pending=inbox.add_pending, alarms=alarms.apply, written=feed)
        erasure = InMemoryErasure([deliveries, watches, inbox, alarms])
        return cls(watches, inbox, inbox, inbox, erasure, deliveries, deliveries, alarms, feed)


@dataclass(frozen=True, slots=True)
class Infra:
    """What the parts run on: given to the service, or opened by its start."""

    bus: Bus
    stores: Stores
    authorizer: Authorizer
    verifier: TokenVerifier
    denylist: DenyList
    metrics: NotificationsMetrics
    registry: CollectorRegistry
    readiness: Readiness
    clock: Callable[[], datetime]
