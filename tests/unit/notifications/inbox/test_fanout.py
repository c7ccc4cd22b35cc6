"""The fan-out's rounds: one ``check_pairs`` and one write for the whole claim."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from prometheus_client import CollectorRegistry

from contracts.v1 import EventEnvelope, NotificationSent
from mowdeck.authz import (
    AuthzUnavailableError,
    DecisionCache,
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
    user_ref,
)
from mowdeck.notifications.inbox.fanout import FanOut
from mowdeck.notifications.inbox.memory import InMemoryInbox
from mowdeck.notifications.inbox.model import Completion, InboxItem
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.settings import NotificationsSettings
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_MOWER, at
from tests.unit.notifications.stores import LEASE, event

MOWERS = (MOWER, OTHER_MOWER)


class CountingAuthorizer(LocalAuthorizer):
    """Counts ``check_pairs`` calls; refuses to answer while ``down``."""

    def __init__(self) -> None:
        super().__init__(InMemoryTupleStore())
        self.calls: list[list[tuple[str, str]]] = []
        self.down = False

    async def check_pairs(
        self, pairs: Sequence[tuple[str, str]], relation: str
    ) -> dict[tuple[str, str], bool]:
        self.calls.append(sorted(pairs))
        if self.down:
            raise AuthzUnavailableError("tuple store: down")
        return await super().check_pairs(pairs, relation)


class CountingStore(InMemoryInbox):
    """Counts the fan-out's writes (it queues no deliveries)."""

    def __init__(self) -> None:
        super().__init__(deliveries=lambda *_: None)
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


async def setup(
    now: list[datetime] | None = None,
) -> tuple[CountingStore, CountingAuthorizer, RecordingPublisher, FanOut]:
    """A fan-out over the in-memory store; ``now[0]`` is its clock (at(10_000) if not given)."""
    clock = now if now is not None else [at(10_000)]
    store, authorizer, publisher = CountingStore(), CountingAuthorizer(), RecordingPublisher()
    for mower in (MOWER, OTHER_MOWER):
        await authorizer.write([Tuple(account_object(ACCOUNT), "account", mower_object(mower))])
    await authorizer.write(grant_tuples(ACCOUNT, "amy", "viewer"))
    await authorizer.write(grant_tuples(ACCOUNT, "cy", "viewer"))
    for user in ("amy", "bob", "cy"):  # bob subscribed but may view nothing
        await store.put_preferences(user, ACCOUNT, Preferences(scope="all"))
    fanout = FanOut(
        store,
        store,
        decisions=DecisionCache(authorizer, 0.0),
        publisher=publisher,  # type: ignore[arg-type]
        names=lambda _: "Robbie",
        settings=NotificationsSettings(),
        metrics=METRICS,
        clock=lambda: clock[0],
    )
    return store, authorizer, publisher, fanout


async def test_a_round_checks_once_and_writes_once() -> None:
    store, authorizer, publisher, fanout = await setup()
    store.add_pending([event("a", 1), event("b", 2, mower_id=OTHER_MOWER), event("c", 3)])
    assert await fanout.round() == 3
    # Each subscriber once per mower, whatever the number of the mower's events.
    assert authorizer.calls == [
        sorted((user_ref(u), mower_object(m)) for u in ("amy", "bob", "cy") for m in MOWERS)
    ]
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


async def test_a_failed_check_delays_the_round_by_a_lease() -> None:
    now = [at(10_000)]
    store, authorizer, publisher, fanout = await setup(now)
    authorizer.down = True
    store.add_pending([event("a", 1), event("b", 2, mower_id=OTHER_MOWER)])
    before = failures()
    assert await fanout.round() == 2
    assert publisher.sent == []
    assert store.batches == []
    assert failures() == before + 2
    authorizer.down = False
    assert await fanout.round() == 0  # still claimed
    now[0] += LEASE
    assert await fanout.round() == 2
    assert sorted(s.dedupe_key for s in publisher.sent) == ["a", "a", "b", "b"]
