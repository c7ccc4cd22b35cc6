"""The state batch's transaction: touches for heartbeats, documents read only when unsure,
and a plan made again when another writer moved the watch."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from contracts.v1 import MowerState
from mowdeck.notifications.ingest.actor import WatchAnswer
from mowdeck.notifications.ingest.memory import InMemoryWatches
from mowdeck.notifications.ingest.plan import contact_only, plan_states
from mowdeck.notifications.ingest.statebatch import StateBatchWriter
from mowdeck.notifications.rules.watch import MowerWatch
from tests.unit.notifications.samples import MOWER, THRESHOLDS, at, state


class CountingStore(InMemoryWatches):
    """The in-memory watches, counting the documents their transactions read (the
    events they commit go nowhere)."""

    def __init__(self) -> None:
        super().__init__(pending=lambda _: None)
        self.documents_read = 0

    @asynccontextmanager
    async def watches(self) -> AsyncIterator[Any]:
        async with super().watches() as tx:
            lock = tx.lock

            async def counting(mower_ids: Any) -> dict[uuid.UUID, MowerWatch]:
                found = await lock(mower_ids)
                self.documents_read += len(found)
                return found

            tx.lock = counting  # type: ignore[method-assign]
            yield tx


def answer(base: MowerWatch | None, states: list[MowerState], now: float) -> WatchAnswer:
    """What a watch actor holding ``base`` answers for ``states``."""
    plan = plan_states({} if base is None else {MOWER: base}, states, at(now), THRESHOLDS)
    after = plan.writes[-1].watch if plan.writes else base
    return WatchAnswer(base, plan, after, contact_only(base, plan))


async def commit(
    writer: StateBatchWriter, base: MowerWatch | None, states: list[MowerState], now: float
) -> tuple[WatchAnswer, Any]:
    """One batch of ``MOWER``'s states through the writer."""
    given = answer(base, states, now)
    result = await writer.commit({MOWER: given}, {MOWER: states}, at(now), None)
    return given, result


async def test_heartbeats_are_touches_without_reading_the_document() -> None:
    store = CountingStore()
    writer = StateBatchWriter(store, THRESHOLDS)
    first, _ = await commit(writer, None, [state(0)], 0)
    watch = first.watch
    for seconds in (10, 20, 30):
        given, result = await commit(writer, watch, [state(seconds)], seconds)
        assert given.contact_only
        assert (result.touched, result.plan.writes) == ([given.watch], [])
        watch = given.watch
    assert store.documents_read == 0
    assert store.versions[MOWER] == 0
    assert await store.read_watches([MOWER]) == {MOWER: watch}


async def test_a_watch_another_writer_moved_is_planned_again() -> None:
    store = InMemoryWatches(pending=lambda _: None)
    ours = StateBatchWriter(store, THRESHOLDS)
    theirs = StateBatchWriter(store, THRESHOLDS)
    first, _ = await commit(ours, None, [state(0, battery=50)], 0)
    # The other replica saw the battery drop first and told the user.
    told, result = await commit(theirs, first.watch, [state(10, battery=15)], 10)
    assert [e.kind for e in result.plan.events] == ["battery_low"]
    # Our actor still holds the first watch: its later state would fire again, as a
    # heartbeat of the old watch it would re-arm nothing; planned again, it does neither.
    stale, result = await commit(ours, first.watch, [state(20, battery=15)], 20)
    assert [e.kind for e in stale.plan.events] == ["battery_low"]
    assert result.plan.events == []
    assert list(result.replanned) == [MOWER]
    [stored] = (await store.read_watches([MOWER])).values()
    assert (stored.observed_at, stored.battery_armed_at) == (at(20), None)
    assert told.watch is not None


async def test_a_touch_by_another_writer_makes_a_heartbeat_unsure() -> None:
    store = CountingStore()
    ours = StateBatchWriter(store, THRESHOLDS)
    theirs = StateBatchWriter(store, THRESHOLDS)
    first, _ = await commit(ours, None, [state(0)], 0)
    await commit(theirs, first.watch, [state(20)], 20)  # a heartbeat on the other replica
    before = store.documents_read
    # Ours holds the watch at 0 s; its state of 10 s is older than the stored contact.
    given, result = await commit(ours, first.watch, [state(10)], 25)
    assert given.contact_only
    assert store.documents_read == before + 1
    assert (result.touched, result.plan.writes, list(result.replanned)) == ([], [], [MOWER])
    [stored] = (await store.read_watches([MOWER])).values()
    assert stored.observed_at == at(20)


async def test_after_a_plan_made_again_the_next_batch_reads_the_document_once() -> None:
    store = CountingStore()
    ours = StateBatchWriter(store, THRESHOLDS)
    theirs = StateBatchWriter(store, THRESHOLDS)
    first, _ = await commit(ours, None, [state(0, battery=50)], 0)
    await commit(theirs, first.watch, [state(10, battery=49)], 10)
    _, result = await commit(ours, first.watch, [state(20, battery=49)], 20)
    adopted = result.replanned[MOWER]
    # The actor adopts the watch after the commit; a batch it evaluated before that may
    # still come with the old one, so the stamp is not trusted until a batch checks it.
    reads = store.documents_read
    given, result = await commit(ours, adopted, [state(30, battery=49)], 30)
    assert (store.documents_read, result.touched) == (reads + 1, [given.watch])
    again, result = await commit(ours, given.watch, [state(40, battery=49)], 40)
    assert (store.documents_read, result.touched) == (reads + 1, [again.watch])
