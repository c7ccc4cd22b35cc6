"""The PostgreSQL inbox against the inbox's and the preferences' contracts, and what only
a real database shows: SKIP LOCKED claims, concurrent completions, the trim, indexes."""

from __future__ import annotations

import asyncio

import asyncpg

from mowdeck.notifications.inbox import sql
from mowdeck.notifications.inbox.model import InboxEntry
from mowdeck.notifications.infra import Stores
from tests.support.postgres import plan_of
from tests.unit.notifications.inbox.inbox_contract import InboxContract
from tests.unit.notifications.inbox.preferences_contract import PreferencesContract
from tests.unit.notifications.samples import MOWER, at
from tests.unit.notifications.stores import LEASE, deliver, event, queue


class TestPostgresInbox(InboxContract):
    pass


class TestPostgresPreferences(PreferencesContract):
    pass


# -- concurrency -------------------------------------------------------------------------


async def test_two_replicas_claim_different_pending_events(
    stores: Stores, pool: asyncpg.Pool
) -> None:
    await queue(stores, *[event(f"k{n}", n) for n in range(20)])
    claims = await asyncio.gather(
        *(stores.pending.claim_pending(at(0), 5, LEASE) for _ in range(4))
    )
    keys = [p.event.dedupe_key for claim in claims for p in claim]
    assert len(keys) == 20
    assert len(set(keys)) == 20
    assert await pool.fetchval("SELECT max(attempts) FROM notification_pending") == 1


async def test_one_event_completed_twice_at_once_is_stored_once(
    stores: Stores,
) -> None:
    await queue(stores, event("twice"))
    [pending] = await stores.pending.claim_pending(at(0), 10, LEASE)
    entries = [InboxEntry(user_id=f"user-{n:03}") for n in range(50)]
    done = await asyncio.gather(
        *(
            stores.pending.complete_pending(pending.id, pending.event, entries, 200)
            for _ in range(3)
        )
    )
    assert sum(len(items) for items in done) == 50
    for entry in entries[:3]:
        assert len((await stores.inbox.inbox_page(entry.user_id, 10)).items) == 1


async def test_the_inbox_is_trimmed_to_its_limit(stores: Stores, pool: asyncpg.Pool) -> None:
    for n in range(205):
        await deliver(stores, event(f"k{n:03}", n), ["amy", "bob"] if n < 10 else ["amy"])
    assert (
        await pool.fetchval("SELECT count(*) FROM notification_inbox WHERE user_id = 'amy'") == 200
    )
    page = await stores.inbox.inbox_page("amy", 200)
    assert page.items[-1].dedupe_key == "k005"
    assert page.next is None
    assert len((await stores.inbox.inbox_page("bob", 200)).items) == 10


# -- plans -----------------------------------------------------------------------------------


async def test_the_inbox_page_walks_its_index_backwards(pool: asyncpg.Pool) -> None:
    plan = await plan_of(pool, sql.INBOX_AFTER, "amy", 20, at(0), MOWER)
    assert "Index Scan Backward using notification_inbox_page" in plan, plan


async def test_subscribers_come_from_the_partial_index(pool: asyncpg.Pool) -> None:
    plan = await plan_of(pool, sql.SUBSCRIBERS, MOWER)
    assert "notification_preferences_subscribers" in plan, plan
