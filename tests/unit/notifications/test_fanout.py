"""The fan-out's rounds: one ``check_many`` per mower, one write for the whole claim."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from prometheus_client import CollectorRegistry

from contracts.v1 import EventEnvelope, NotificationSent
from mowdeck.authz import (
    AuthzUnavailableError,
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.notifications.fanout import Decisions, FanOut
from mowdeck.notifications.memory import InMemoryNotificationStore
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.model import Completion, InboxItem
from mowdeck.notifications.preferences import Preferences
from mowdeck.notifications.settings import NotificationsSettings
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_MOWER, at
from tests.unit.notifications.store_contract import LEASE, event, queue


class CountingAuthorizer(LocalAuthorizer):
    """Counts ``check_many`` calls; refuses to answer for the mowers in ``down``."""

    def __init__(self) -> None:
        super().__init__(InMemoryTupleStore())
        self.calls: list[tuple[int, str]] = []
        self.down: set[str] = set()

    async def check_many(self, users: Sequence[str], relation: str, object: str) -> dict[str, bool]:
        self.calls.append((len(users), object))
        if object in self.down:
            raise AuthzUnavailableError("tuple store: down")
        return await super().check_many(users, relation, object)


class CountingStore(InMemoryNotificationStore):
    """Counts the fan-out's writes."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def complete_many(
        self, completions: Sequence[Completion], inbox_limit: int
    ) -> list[list[InboxItem]]:
        self.batches.append(len(completions))
        return await super().complete_many(completions, inbox_limit)


class RecordingPublisher:
    """Keeps what would go to the bus, acknowledged at once."""

    def __init__(self) -> None:
        self.sent: list[NotificationSent] = []

    async def event(self, envelope: EventEnvelope) -> asyncio.Future[None]:
        assert isinstance(envelope.payload, NotificationSent)
        self.sent.append(envelope.payload)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


REGISTRY = CollectorRegistry()
METRICS = NotificationsMetrics(REGISTRY)


def failures() -> float:
    """Pending events whose fan-out failed, so far (the counter is the module's)."""
    return REGISTRY.get_sample_value("mowdeck_notifications_fanout_failures_total") or 0.0


async def setup() -> tuple[CountingStore, CountingAuthorizer, RecordingPublisher, FanOut]:
    store, authorizer, publisher = CountingStore(), CountingAuthorizer(), RecordingPublisher()
    for mower in (MOWER, OTHER_MOWER):
        await authorizer.write([Tuple(account_object(ACCOUNT), "account", mower_object(mower))])
    await authorizer.write(grant_tuples(ACCOUNT, "amy", "viewer"))
    await authorizer.write(grant_tuples(ACCOUNT, "cy", "viewer"))
    for user in ("amy", "bob", "cy"):  # bob subscribed but may view nothing
        await store.put_preferences(user, ACCOUNT, Preferences(scope="all"))
    fanout = FanOut(
        store,
        decisions=Decisions(authorizer, timedelta(0), lambda: at(10_000)),
        publisher=publisher,  # type: ignore[arg-type]
        names=lambda _: "Robbie",
        settings=NotificationsSettings(),
        metrics=METRICS,
        clock=lambda: at(10_000),
    )
    return store, authorizer, publisher, fanout


async def test_a_round_checks_once_per_mower_and_writes_once() -> None:
    store, authorizer, publisher, fanout = await setup()
    await queue(store, event("a", 1), event("b", 2, mower_id=OTHER_MOWER), event("c", 3))
    assert await fanout.round() == 3
    assert sorted(authorizer.calls) == [(3, mower_object(MOWER)), (3, mower_object(OTHER_MOWER))]
    assert store.batches == [3]
    assert sorted((s.user_id, s.dedupe_key) for s in publisher.sent) == [
        ("amy", "a"),
        ("amy", "b"),
        ("amy", "c"),
        ("cy", "a"),
        ("cy", "b"),
        ("cy", "c"),
    ]
    assert await fanout.round() == 0
    assert (await store.unread_count("bob"), await store.unread_count("amy")) == (0, 3)


async def test_a_mower_whose_check_fails_delays_only_its_events() -> None:
    store, authorizer, publisher, fanout = await setup()
    authorizer.down.add(mower_object(OTHER_MOWER))
    await queue(store, event("a", 1), event("b", 2, mower_id=OTHER_MOWER))
    before = failures()
    assert await fanout.round() == 2
    assert sorted(s.dedupe_key for s in publisher.sent) == ["a", "a"]
    assert failures() == before + 1
    [left] = await store.claim_pending(at(10_000) + LEASE, 10, LEASE)
    assert (left.event.dedupe_key, left.attempts) == ("b", 2)
