"""The PostgreSQL store against the store contract, and what only a real database shows:
row locks that serialize batches, SKIP LOCKED claims, indexes, refused data."""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec
import pytest

from mowdeck.notifications.errors import StoreConflictError, StoreRejectedError
from mowdeck.notifications.inbox import sql
from mowdeck.notifications.inbox.model import InboxEntry, WatchWrite
from mowdeck.notifications.inbox.postgres import PostgresNotificationStore
from tests.support.eventually import eventually
from tests.unit.notifications.delivery.delivery_contract import DeliveryContract
from tests.unit.notifications.samples import MOWER, OTHER_MOWER, at
from tests.unit.notifications.store_contract import (
    LEASE,
    StoreContract,
    deliver,
    event,
    queue,
    store_watches,
    watch_of,
)


@pytest.fixture
def store(pg_store: PostgresNotificationStore) -> PostgresNotificationStore:
    return pg_store


class TestPostgresStore(StoreContract):
    pass


# -- concurrency -------------------------------------------------------------------------


async def test_two_batches_on_one_mower_serialize(
    pg_store: PostgresNotificationStore, pool: asyncpg.Pool
) -> None:
    # Both add one to the battery they read: without the row lock, one update is lost.
    await store_watches(pg_store, [(watch_of(battery=10), None)])
    first_locked = asyncio.Event()
    release_first = asyncio.Event()

    async def batch(wait: bool) -> int:
        async with pg_store.watches() as tx:
            watch = (await tx.lock([MOWER]))[MOWER]
            if wait:
                first_locked.set()
                await release_first.wait()
            new = msgspec.structs.replace(watch, battery=watch.battery + 1)
            await tx.write([WatchWrite(new, None)], [])
            return watch.battery

    first = asyncio.create_task(batch(wait=True))
    await first_locked.wait()
    second = asyncio.create_task(batch(wait=False))
    # The second batch is seen by the server waiting for a row lock (the first holds it).
    await eventually(
        lambda: pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ),
        what="the second batch waiting for the row lock",
    )
    assert not second.done(), "the second batch read the watch the first one holds"
    release_first.set()
    assert list(await asyncio.gather(first, second)) == [10, 11]
    assert (await pg_store.read_watches([MOWER]))[MOWER].battery == 12


async def test_a_watch_created_meanwhile_is_a_conflict(pg_store: PostgresNotificationStore) -> None:
    # Two batches meet a new mower: the one that commits second planned on "no watch" and
    # must plan again, not overwrite the first one's watch.
    async with pg_store.watches() as slow:
        assert await slow.lock([MOWER]) == {}
        await store_watches(pg_store, [(watch_of(battery=50), 120)])
        with pytest.raises(StoreConflictError):
            await slow.write([WatchWrite(watch_of(battery=99), at(120))], [event()])
    assert (await pg_store.read_watches([MOWER]))[MOWER].battery == 50
    assert await pg_store.claim_pending(at(0), 10, LEASE) == []


async def test_the_scan_skips_watches_a_batch_holds(pg_store: PostgresNotificationStore) -> None:
    await store_watches(pg_store, [(watch_of(MOWER), 100), (watch_of(OTHER_MOWER), 100)])
    async with pg_store.watches() as batch:
        await batch.lock([MOWER])
        async with pg_store.watches() as scan:
            claimed = await asyncio.wait_for(scan.claim_due(at(200), 10), timeout=5)
            assert [w.mower_id for w in claimed] == [OTHER_MOWER]
            async with pg_store.watches() as other_scan:
                assert await asyncio.wait_for(other_scan.claim_due(at(200), 10), 5) == []


async def test_two_replicas_claim_different_pending_events(
    pg_store: PostgresNotificationStore, pool: asyncpg.Pool
) -> None:
    await queue(pg_store, *[event(f"k{n}", n) for n in range(20)])
    claims = await asyncio.gather(*(pg_store.claim_pending(at(0), 5, LEASE) for _ in range(4)))
    keys = [p.event.dedupe_key for claim in claims for p in claim]
    assert len(keys) == 20
    assert len(set(keys)) == 20
    assert await pool.fetchval("SELECT max(attempts) FROM notification_pending") == 1


async def test_one_event_completed_twice_at_once_is_stored_once(
    pg_store: PostgresNotificationStore,
) -> None:
    await queue(pg_store, event("twice"))
    [pending] = await pg_store.claim_pending(at(0), 10, LEASE)
    entries = [InboxEntry(user_id=f"user-{n:03}") for n in range(50)]
    done = await asyncio.gather(
        *(pg_store.complete_pending(pending.id, pending.event, entries, 200) for _ in range(3))
    )
    assert sum(len(items) for items in done) == 50
    for entry in entries[:3]:
        assert len((await pg_store.inbox_page(entry.user_id, 10)).items) == 1


async def test_the_inbox_is_trimmed_to_its_limit(
    pg_store: PostgresNotificationStore, pool: asyncpg.Pool
) -> None:
    for n in range(205):
        await deliver(pg_store, event(f"k{n:03}", n), ["amy", "bob"] if n < 10 else ["amy"])
    assert (
        await pool.fetchval("SELECT count(*) FROM notification_inbox WHERE user_id = 'amy'") == 200
    )
    page = await pg_store.inbox_page("amy", 200)
    assert page.items[-1].dedupe_key == "k005"
    assert page.next is None
    assert len((await pg_store.inbox_page("bob", 200)).items) == 10


# -- plans and data ------------------------------------------------------------------------


async def _plan(pool: asyncpg.Pool, statement: str, *args: object) -> str:
    async with pool.acquire() as conn, conn.transaction():
        # The tables are nearly empty, where any plan is cheap: rule the others out.
        for kind in ("seqscan", "bitmapscan", "sort"):
            await conn.execute(f"SET LOCAL enable_{kind} = off")
        rows = await conn.fetch("EXPLAIN " + statement, *args)
    return "\n".join(row[0] for row in rows)


async def test_the_inbox_page_walks_its_index_backwards(pool: asyncpg.Pool) -> None:
    plan = await _plan(pool, sql.INBOX_AFTER, "amy", 20, at(0), MOWER)
    assert "Index Scan Backward using notification_inbox_page" in plan, plan


async def test_the_scan_walks_the_due_index(pool: asyncpg.Pool) -> None:
    plan = await _plan(pool, sql.CLAIM_DUE, at(0), 100)
    assert "notification_watches_silence_due" in plan, plan


async def test_subscribers_come_from_the_partial_index(pool: asyncpg.Pool) -> None:
    plan = await _plan(pool, sql.SUBSCRIBERS, MOWER)
    assert "notification_preferences_subscribers" in plan, plan


async def test_refused_data_is_a_store_rejected_error(
    pg_store: PostgresNotificationStore, pool: asyncpg.Pool
) -> None:
    async def write() -> None:
        await store_watches(pg_store, [(watch_of(), 120)], [event("nul\x00key")])

    with pytest.raises(StoreRejectedError):
        await write()
    assert await pool.fetchval("SELECT count(*) FROM notification_watches") == 0


class TestPostgresDeliveries(DeliveryContract):
    pass
