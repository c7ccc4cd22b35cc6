"""One contract for every ``WatchStore``: subclass ``WatchContract``, give ``stores``."""

from __future__ import annotations

import msgspec
import pytest

from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest.model import Stamp, WatchWrite
from tests.unit.notifications.samples import MOWER, OTHER_MOWER, at
from tests.unit.notifications.stores import (
    LEASE,
    THIRD_MOWER,
    event,
    store_watches,
    watch_of,
)


class WatchContract:
    """Behaviour every adapter shares (with the pending events its transactions write)."""

    async def test_a_watch_round_trips(self, stores: Stores) -> None:
        watch = watch_of(activity="mowing", battery=10)
        await store_watches(stores, [(watch, 120)])
        assert await stores.watches.read_watches([MOWER, OTHER_MOWER]) == {MOWER: watch}
        async with stores.watches.watches() as tx:
            assert await tx.lock([OTHER_MOWER, MOWER]) == {MOWER: watch}

    async def test_a_written_watch_replaces_the_stored_one(self, stores: Stores) -> None:
        await store_watches(stores, [(watch_of(), 120)])
        newer = watch_of(seconds=50, battery=40)
        await store_watches(stores, [(newer, 170)])
        assert await stores.watches.read_watches([MOWER]) == {MOWER: newer}

    async def test_the_last_write_of_a_mower_wins(self, stores: Stores) -> None:
        first, last = watch_of(battery=50), watch_of(seconds=5, battery=49)
        async with stores.watches.watches() as tx:
            await tx.lock([MOWER])
            await tx.write([WatchWrite(first, at(120)), WatchWrite(last, at(125))], [])
        assert await stores.watches.read_watches([MOWER]) == {MOWER: last}

    async def test_a_watch_must_be_locked_to_be_written(self, stores: Stores) -> None:
        async with stores.watches.watches() as tx:
            await tx.lock([OTHER_MOWER])
            with pytest.raises(ValueError, match="without locking"):
                await tx.write([WatchWrite(watch_of(), None)], [])
        assert await stores.watches.read_watches([MOWER]) == {}

    async def test_a_failed_transaction_leaves_nothing(self, stores: Stores) -> None:
        async def failing() -> None:
            async with stores.watches.watches() as tx:
                await tx.lock([MOWER])
                await tx.write([WatchWrite(watch_of(), at(120))], [event()])
                raise RuntimeError("the batch failed after writing")

        with pytest.raises(RuntimeError):
            await failing()
        assert await stores.watches.read_watches([MOWER]) == {}
        assert await stores.pending.claim_pending(at(0), 10, LEASE) == []

    async def test_the_scan_claims_due_watches_most_overdue_first(self, stores: Stores) -> None:
        await store_watches(
            stores,
            [
                (watch_of(MOWER), 120),
                (watch_of(OTHER_MOWER), 100),
                (watch_of(THIRD_MOWER), None),
            ],
        )
        async with stores.watches.watches() as tx:
            assert await tx.claim_due(at(99), 10) == []
            claimed = await tx.claim_due(at(500), 1)
            assert [w.mower_id for w in claimed] == [OTHER_MOWER]
        async with stores.watches.watches() as tx:
            claimed = await tx.claim_due(at(500), 10)
            assert [w.mower_id for w in claimed] == [OTHER_MOWER, MOWER]

    async def test_a_state_batch_only_moves_the_silence_earlier(self, stores: Stores) -> None:
        await store_watches(stores, [(watch_of(), 120)])
        # Later and "never" do not postpone the stored time: the scan corrects it.
        await store_watches(stores, [(watch_of(seconds=10), 130)])
        await store_watches(stores, [(watch_of(seconds=20), None)])
        async with stores.watches.watches() as tx:
            assert [w.mower_id for w in await tx.claim_due(at(120), 10)] == [MOWER]
        await store_watches(stores, [(watch_of(seconds=30), 60)])
        async with stores.watches.watches() as tx:
            assert [w.mower_id for w in await tx.claim_due(at(60), 10)] == [MOWER]

    async def test_the_scan_stores_its_own_time(self, stores: Stores) -> None:
        await store_watches(stores, [(watch_of(), 120), (watch_of(OTHER_MOWER), 120)])
        async with stores.watches.watches() as tx:
            claimed = await tx.claim_due(at(120), 10)
            await tx.write(
                [WatchWrite(claimed[0], at(300)), WatchWrite(claimed[1], None)], [event()]
            )
        async with stores.watches.watches() as tx:
            assert await tx.claim_due(at(299), 10) == []
            assert [w.mower_id for w in await tx.claim_due(at(10**6), 10)] == [claimed[0].mower_id]
        assert len(await stores.pending.claim_pending(at(0), 10, LEASE)) == 1

    async def test_a_stamp_counts_the_writes_that_change_the_watch(self, stores: Stores) -> None:
        await store_watches(stores, [(watch_of(), 120)])
        async with stores.watches.watches() as tx:
            assert await tx.lock_versions([OTHER_MOWER, MOWER]) == {MOWER: Stamp(0, at(0))}
        await store_watches(stores, [(watch_of(seconds=10, battery=70), 130)])
        async with stores.watches.watches() as tx:
            assert await tx.lock_versions([MOWER]) == {MOWER: Stamp(1, at(10))}
            # The scan found nothing: only the due time is new, not the version.
            [claimed] = await tx.claim_due(at(10**6), 10)
        async with stores.watches.watches() as tx:
            [claimed] = await tx.claim_due(at(10**6), 10)
            await tx.write([WatchWrite(claimed, at(500), changed=False)], [])
        async with stores.watches.watches() as tx:
            assert await tx.lock_versions([MOWER]) == {MOWER: Stamp(1, at(10))}
            assert await tx.claim_due(at(499), 10) == []
            assert [w.mower_id for w in await tx.claim_due(at(500), 10)] == [MOWER]

    async def test_a_touch_moves_only_the_contact(self, stores: Stores) -> None:
        watch = watch_of(battery=70)
        await store_watches(stores, [(watch, 120)])
        heard = msgspec.structs.replace(watch, observed_at=at(10), contact_at=at(11))
        async with stores.watches.watches() as tx:
            await tx.lock_versions([MOWER])
            await tx.touch([heard])
        assert await stores.watches.read_watches([MOWER]) == {MOWER: heard}
        async with stores.watches.watches() as tx:
            assert await tx.lock_versions([MOWER]) == {MOWER: Stamp(0, at(10))}
            assert await tx.lock([MOWER]) == {MOWER: heard}
            # The due time stayed: a later contact only makes the exact one later.
            assert await tx.claim_due(at(120), 10) == [heard]

    async def test_contact_never_goes_back(self, stores: Stores) -> None:
        watch = watch_of(battery=70)
        await store_watches(stores, [(watch, 120)])
        newer = msgspec.structs.replace(watch, observed_at=at(20), contact_at=at(21))
        older = msgspec.structs.replace(watch, observed_at=at(10), contact_at=at(11))
        for heard in (newer, older):
            async with stores.watches.watches() as tx:
                await tx.lock_versions([MOWER])
                await tx.touch([heard])
        assert await stores.watches.read_watches([MOWER]) == {MOWER: newer}
        # A whole write planned on an older contact keeps the newer one too.
        async with stores.watches.watches() as tx:
            await tx.lock([MOWER])
            await tx.write([WatchWrite(msgspec.structs.replace(older, battery=60), at(130))], [])
        [stored] = (await stores.watches.read_watches([MOWER])).values()
        assert (stored.battery, stored.observed_at, stored.contact_at) == (60, at(20), at(21))

    async def test_a_watch_must_be_locked_to_be_touched(self, stores: Stores) -> None:
        await store_watches(stores, [(watch_of(), 120), (watch_of(OTHER_MOWER), 120)])
        heard = msgspec.structs.replace(watch_of(), observed_at=at(10), contact_at=at(11))
        async with stores.watches.watches() as tx:
            await tx.lock_versions([OTHER_MOWER])
            with pytest.raises(ValueError, match="without locking"):
                await tx.touch([heard])
        assert await stores.watches.read_watches([MOWER]) == {MOWER: watch_of()}
