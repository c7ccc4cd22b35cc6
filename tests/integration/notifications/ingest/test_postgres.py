"""The PostgreSQL watch store against the watch contract, and what only a real database
shows: row locks that serialize batches, SKIP LOCKED claims, the due index, refused data."""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec
import pytest

from mowdeck.notifications.errors import StoreConflictError, StoreRejectedError
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest import sql
from mowdeck.notifications.ingest.model import WatchWrite
from tests.support.eventually import eventually
from tests.support.postgres import plan_of
from tests.unit.notifications.ingest.watch_contract import WatchContract
from tests.unit.notifications.samples import MOWER, OTHER_MOWER, at
from tests.unit.notifications.stores import LEASE, event, store_watches, watch_of


class TestPostgresWatches(WatchContract):
    pass


# -- concurrency -------------------------------------------------------------------------


async def test_two_batches_on_one_mower_serialize(stores: Stores, pool: asyncpg.Pool) -> None:
    # Both add one to the battery they read: without the row lock, one update is lost.
    await store_watches(stores, [(watch_of(battery=10), None)])
    first_locked = asyncio.Event()
    release_first = asyncio.Event()

    async def batch(wait: bool) -> int:
        async with stores.watches.watches() as tx:
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
    assert (await stores.watches.read_watches([MOWER]))[MOWER].battery == 12


async def test_a_watch_created_meanwhile_is_a_conflict(stores: Stores) -> None:
    # Two batches meet a new mower: the one that commits second planned on "no watch" and
    # must plan again, not overwrite the first one's watch.
    async with stores.watches.watches() as slow:
        assert await slow.lock([MOWER]) == {}
        await store_watches(stores, [(watch_of(battery=50), 120)])
        with pytest.raises(StoreConflictError):
            await slow.write([WatchWrite(watch_of(battery=99), at(120))], [event()])
    assert (await stores.watches.read_watches([MOWER]))[MOWER].battery == 50
    assert await stores.pending.claim_pending(at(0), 10, LEASE) == []


async def test_the_scan_skips_watches_a_batch_holds(stores: Stores) -> None:
    await store_watches(stores, [(watch_of(MOWER), 100), (watch_of(OTHER_MOWER), 100)])
    async with stores.watches.watches() as batch:
        await batch.lock([MOWER])
        async with stores.watches.watches() as scan:
            claimed = await asyncio.wait_for(scan.claim_due(at(200), 10), timeout=5)
            assert [w.mower_id for w in claimed] == [OTHER_MOWER]
            async with stores.watches.watches() as other_scan:
                assert await asyncio.wait_for(other_scan.claim_due(at(200), 10), 5) == []


# -- plans and data ------------------------------------------------------------------------


async def test_the_scan_walks_the_due_index(pool: asyncpg.Pool) -> None:
    plan = await plan_of(pool, sql.CLAIM_DUE, at(0), 100)
    assert "notification_watches_silence_due" in plan, plan


async def test_refused_data_is_a_store_rejected_error(stores: Stores, pool: asyncpg.Pool) -> None:
    async def write() -> None:
        await store_watches(stores, [(watch_of(), 120)], [event("nul\x00key")])

    with pytest.raises(StoreRejectedError):
        await write()
    assert await pool.fetchval("SELECT count(*) FROM notification_watches") == 0
